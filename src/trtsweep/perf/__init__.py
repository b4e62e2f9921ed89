"""The client: llm-perf, an LLM-aware benchmark client for Triton (gRPC/HTTP) and OpenAI-compatible servers.

May import: trtsweep.errors, trtsweep.common, trtsweep.serve (the self-test's server only).
"""
