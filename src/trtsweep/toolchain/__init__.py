"""The toolchain: every TensorRT-LLM command and option table (convert_checkpoint.py / quantize.py -> trtllm-build,
and the PyTorch flow's LLM API options, ModelOpt and trtllm-serve in `llmapi/`), checked per release, cached by content.

May import: trtsweep.errors, trtsweep.common, trtsweep.runtime.

- `versions`: what each TRT-LLM release's tools accept (flags, choices, example layout).
- `precisions`: which tool and which flags make each precision, per family and version.
- `calibration`: the user's prompts as a local calibration dataset the tools can read.
- `commands`: argv lists, validated against the version's tables.
- `artifacts`: content-keyed output directories and the completion marker.
- `runner`: the tools run where their runtime runs them (trtsweep.runtime), output to a log file.
- `engine`: the engine's config.json checked against the request; build records.
- `pipeline`: the two steps the Ansible modules call.
"""
