"""TensorRT-LLM's PyTorch flow (1.0+): LLM API options, `trtllm-serve`, ModelOpt quantization, checked per release.

May import: trtsweep.errors, trtsweep.common, trtsweep.toolchain.
"""
