"""Starting, health-checking and stopping Triton Inference Server (local, native, container runtimes)."""
