"""Triton model repositories for TensorRT-LLM style serving (inflight_batcher_llm layout)."""
