"""Serving: starting, supervising, health-checking and stopping Triton or trtllm-serve (local, native, container),
and the hf backend's generation.

May import: trtsweep.errors, trtsweep.common, trtsweep.toolchain.
"""
