"""Serving: starting, supervising, health-checking and stopping Triton or trtllm-serve (local, native, container,
pyxis: where it runs is trtsweep.runtime's), and the hf backend's generation.

May import: trtsweep.errors, trtsweep.common, trtsweep.runtime, trtsweep.toolchain.
"""
