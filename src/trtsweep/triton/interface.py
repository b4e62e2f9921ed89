"""The request interface of TensorRT-LLM's `inflight_batcher_llm` models, per version, and how trtsweep's
repository presents it.

`interface.json` holds, per TensorRT-LLM version (major.minor), the upstream `ensemble` config's inputs,
outputs and steps (which model input or output each tensor is wired to) and the inputs and outputs of its
`preprocessing`, `postprocessing` and `tensorrt_llm_bls` models; it is extracted from the upstream templates by
`tools/triton_interface.py`, and each entry names its source. trtsweep's repository of a version has:

- the upstream ensemble's inputs, exactly, wired as upstream wires them (a client written for the standard
  ensemble works unchanged), and its outputs (a name upstream lists twice, once) plus `num_output_tokens` from
  postprocessing where upstream has no output of that name;
- preprocessing / postprocessing with the upstream tensors the ensemble maps, plus postprocessing's
  NUM_OUTPUT_TOKENS;
- tensorrt_llm_bls with the upstream BLS inputs and outputs, running the ensemble's steps itself.

Which of these inputs a model honours, and which it refuses by name, is each python model's own table
(triton/templates/*/model.py).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

from trtsweep.errors import TrtsweepError

# trtsweep's own output: exact output token counts per response (llm-perf sums them)
NUM_OUTPUT_TOKENS = {"name": "NUM_OUTPUT_TOKENS", "data_type": "TYPE_INT32", "dims": [-1]}
COUNT_OUTPUT = "num_output_tokens"


@cache
def table() -> dict[str, dict[str, Any]]:
    return json.loads((resources.files("trtsweep.triton") / "interface.json").read_text(encoding="utf-8"))


@dataclass(frozen=True)
class Interface:
    """trtsweep's view of one version's interface; tensors are dicts as interface.json stores them."""

    version: str
    source: str
    ensemble_inputs: list[dict[str, Any]]
    ensemble_outputs: list[dict[str, Any]]
    steps: list[dict[str, Any]]
    preprocessing: dict[str, list[dict[str, Any]]]
    postprocessing: dict[str, list[dict[str, Any]]]
    bls: dict[str, list[dict[str, Any]]]


def tensor_dict(t: Any, output: bool = False, data_type: str | None = None) -> dict[str, Any]:
    """A ModelConfig tensor (protobuf ModelInput / ModelOutput) as interface.json stores it."""
    from tritonclient.grpc import model_config_pb2

    out: dict[str, Any] = {"name": t.name, "data_type": data_type or model_config_pb2.DataType.Name(t.data_type)}
    out["dims"] = list(t.dims)
    if not output and t.optional:
        out["optional"] = True
    if t.HasField("reshape"):
        out["reshape"] = list(t.reshape.shape)
    if not output and t.allow_ragged_batch:
        out["ragged"] = True
    return out


def _unique(tensors: list[dict[str, Any]]) -> list[dict[str, Any]]:
    seen: set[str] = set()
    return [t for t in tensors if not (t["name"] in seen or seen.add(t["name"]))]


def _mapped(tensors: list[dict[str, Any]], names: set[str]) -> list[dict[str, Any]]:
    return [t for t in tensors if t["name"] in names]


def _step(steps: list[dict[str, Any]], model: str) -> dict[str, Any]:
    return next(s for s in steps if s["model"] == model)


def load(version: str) -> Interface:
    """The interface of one version key (versions.version_key); TrtsweepError if the table lacks it."""
    entry = table().get(version)
    if entry is None:
        raise TrtsweepError(f"no request interface for TensorRT-LLM {version}; known: {', '.join(table())}")
    steps = json.loads(json.dumps(entry["ensemble"]["steps"]))
    outputs = _unique(entry["ensemble"]["outputs"])
    pre, post = _step(steps, "preprocessing"), _step(steps, "postprocessing")
    post_inputs = _mapped(entry["postprocessing"]["inputs"], set(post["inputs"]))
    post_outputs = [*_mapped(entry["postprocessing"]["outputs"], set(post["outputs"])), NUM_OUTPUT_TOKENS]
    if all(t["name"] != COUNT_OUTPUT for t in outputs):
        post["outputs"][NUM_OUTPUT_TOKENS["name"]] = COUNT_OUTPUT
        outputs.append({"name": COUNT_OUTPUT, "data_type": "TYPE_INT32", "dims": [-1]})
    return Interface(
        version=version,
        source=entry["source"],
        ensemble_inputs=entry["ensemble"]["inputs"],
        ensemble_outputs=outputs,
        steps=steps,
        preprocessing={
            "inputs": _mapped(entry["preprocessing"]["inputs"], set(pre["inputs"])),
            "outputs": _mapped(entry["preprocessing"]["outputs"], set(pre["outputs"])),
        },
        postprocessing={"inputs": post_inputs, "outputs": post_outputs},
        bls={"inputs": entry["tensorrt_llm_bls"]["inputs"], "outputs": _unique(entry["tensorrt_llm_bls"]["outputs"])},
    )
