"""trtsweep: sweep TensorRT-LLM / Triton configurations and benchmark them.

The package follows the pipeline: sweep (the plan) -> fleet (hosts, lanes, records) -> hub (download) ->
toolchain (quantize, convert, build) -> triton (repository) -> serve -> perf (benchmark) -> report -> handoff.
"""

__version__ = "0.1.0"
