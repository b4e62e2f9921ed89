"""The TensorRT-LLM engine build pipeline: HF model -> TRT-LLM checkpoint (convert_checkpoint.py or
quantize.py) -> engine (trtllm-build), version-aware, cached by the content of the inputs, resumable.

- `versions`: what each TRT-LLM release's tools accept (flags, choices, example layout).
- `precisions`: which tool and which flags make each precision, per family and version.
- `calibration`: the user's prompts as a local calibration dataset the tools can read.
- `commands`: argv lists, validated against the version's tables.
- `artifacts`: content-keyed output directories and the completion marker.
- `runner`: native or container (docker CLI) execution, output to a log file.
- `engine`: the engine's config.json checked against the request; build records.
- `pipeline`: the two steps the Ansible modules call.
"""
