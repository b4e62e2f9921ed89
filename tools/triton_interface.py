"""Extract the request interface of TensorRT-LLM's `inflight_batcher_llm` models, per version, into
src/trtsweep/triton/interface.json (facts only: tensor names, types, shapes, and the ensemble's wiring).

    python tools/triton_interface.py --mirror <triton-inference-server/tensorrtllm_backend git dir>

Versions 0.8 .. 0.19 are read at the tensorrtllm_backend tags v0.8.0 .. v0.19.0, 0.20 at that repository's
last commit with the files (c2e65b8). 1.2 lives in NVIDIA/TensorRT-LLM `triton_backend/`, a 2.5 GB repository
that could not be read at one release commit here: it is 0.20's files plus the tensors TL_1_2_* name, each read
in NVIDIA/TensorRT-LLM `triton_backend/all_models/inflight_batcher_llm/<model>/config.pbtxt` at the commit named.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
from pathlib import Path

from google.protobuf import text_format
from tritonclient.grpc import model_config_pb2

from trtsweep.triton.interface import tensor_dict

MODELS = ("ensemble", "preprocessing", "postprocessing", "tensorrt_llm_bls")
TAGS = {f"0.{n}": f"v0.{n}.0" for n in range(8, 20)} | {"0.20": "c2e65b8"}
ROOT = "all_models/inflight_batcher_llm"
TYPED = re.compile(r'name:\s*"(\w+)"\s*data_type:\s*\$\{(\w+)\}')
PLACEHOLDER = re.compile(r"\$\{\s*(\w+)\s*\}")


def parse(text: str) -> dict[str, object]:
    """One config.pbtxt -> {inputs, outputs[, steps]}; `${x}` data types kept as the parameter name x."""
    typed = {name: param for name, param in TYPED.findall(text)}
    filled = TYPED.sub(lambda m: f'name: "{m.group(1)}" data_type: TYPE_FP32', text)
    filled = PLACEHOLDER.sub(lambda m: "1", filled)  # numbers and bools; quoted values stay strings
    config = text_format.Parse(filled, model_config_pb2.ModelConfig())
    out: dict[str, object] = {
        "inputs": [tensor_dict(t, False, typed.get(t.name)) for t in config.input],
        "outputs": [tensor_dict(t, True, typed.get(t.name)) for t in config.output],
    }
    if config.platform == "ensemble":
        out["steps"] = [
            {
                "model": s.model_name,
                "inputs": dict(sorted(s.input_map.items())),
                "outputs": dict(sorted(s.output_map.items())),
            }
            for s in config.ensemble_scheduling.step
        ]
    return out


def _quoted_placeholders(text: str) -> str:
    return re.sub(r'"\$\{\s*(\w+)\s*\}"', r'"<\1>"', text)


def read(text: str) -> dict[str, object]:
    return parse(_quoted_placeholders(text))


def from_mirror(mirror: str, version: str) -> dict[str, object]:
    tag = TAGS[version]
    commit = subprocess.run(
        ["git", "-C", mirror, "rev-parse", f"{tag}^{{commit}}"], capture_output=True, text=True, check=True
    ).stdout.strip()
    models = {}
    for model in MODELS:
        text = subprocess.run(
            ["git", "-C", mirror, "show", f"{tag}:{ROOT}/{model}/config.pbtxt"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        models[model] = read(text)
    return {
        "source": f"triton-inference-server/tensorrtllm_backend@{commit[:10]} ({tag}) {ROOT}/<model>/config.pbtxt",
        **models,
    }


# NVIDIA/TensorRT-LLM after the move of the backend (1.2 line): the request tensors added to 0.20's models. Read
# at TL@2a9abd95 (ensemble) and TL@0193dbd4 (tensorrt_llm_bls); the tensorrt_llm model of TL@0c8de69 (1.2.0rc8)
# has the same two inputs and outputs (trtsweep.triton.versions). Preprocessing / postprocessing: as 0.20 for
# the tensors the ensemble maps.
TL_1_2_SOURCE = (
    "0.20 (tensorrtllm_backend@c2e65b8) plus return_num_input_tokens / return_num_output_tokens and "
    "num_input_tokens / num_output_tokens as read in NVIDIA/TensorRT-LLM@2a9abd95 triton_backend/all_models/"
    "inflight_batcher_llm/ensemble/config.pbtxt and @0193dbd4 .../tensorrt_llm_bls/config.pbtxt"
)
TL_1_2_FLAGS = ("return_num_input_tokens", "return_num_output_tokens")
TL_1_2_COUNTS = ("num_input_tokens", "num_output_tokens")


def tl_1_2(base: dict[str, object]) -> dict[str, object]:
    """1.2 = 0.20 + TL_1_2_FLAGS after return_perf_metrics, TL_1_2_COUNTS after the last output."""
    table = json.loads(json.dumps(base))
    for model in ("ensemble", "tensorrt_llm_bls"):
        inputs = table[model]["inputs"]
        at = next(i for i, t in enumerate(inputs) if t["name"] == "return_perf_metrics")
        inputs[at + 1 : at + 1] = [{**inputs[at], "name": name} for name in TL_1_2_FLAGS]
        table[model]["outputs"] += [{"name": name, "data_type": "TYPE_INT32", "dims": [1]} for name in TL_1_2_COUNTS]
    step = next(s for s in table["ensemble"]["steps"] if s["model"] == "tensorrt_llm")
    step["inputs"].update({name: name for name in TL_1_2_FLAGS})
    step["outputs"].update({name: name for name in TL_1_2_COUNTS})
    return {**table, "source": TL_1_2_SOURCE}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mirror", required=True)
    parser.add_argument("--out", default="src/trtsweep/triton/interface.json")
    args = parser.parse_args()
    table = {version: from_mirror(args.mirror, version) for version in TAGS}
    table["1.2"] = tl_1_2(table["0.20"])
    Path(args.out).write_text(json.dumps(table, indent=1, sort_keys=False) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
