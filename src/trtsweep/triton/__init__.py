"""The repository stage: Triton model repositories (inflight_batcher_llm and llmapi layouts) from the templates in
`templates/`.

May import: trtsweep.errors, trtsweep.common, trtsweep.toolchain.
"""
