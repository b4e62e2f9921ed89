"""TensorRT-LLM's PyTorch flow (1.0+): LLM API options, the `trtllm-serve` command, checked per release."""
