"""trtsweep: sweep TensorRT-LLM / Triton configurations and benchmark them."""

__version__ = "0.1.0"
