"""llm-perf: an LLM-aware benchmark client for Triton (gRPC/HTTP) and OpenAI-compatible servers."""
