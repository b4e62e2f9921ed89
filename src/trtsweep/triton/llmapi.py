"""The pytorch flow's Triton model repository: the `llmapi` layout (one python model named `tensorrt_llm`).

    tensorrt_llm/config.pbtxt     the llmapi tensors (text_input, streaming, sampling_param_*, ... -> text_output)
    tensorrt_llm/1/model.yaml     the LLM API arguments (model, backend: pytorch, the point's options) + triton_config
    tensorrt_llm/1/model.py       tensorrtllm: the release's own model (and helpers.py), copied from its source
                                  tree (`triton_backend/all_models/llmapi/tensorrt_llm/1/`); hf: trtsweep's
                                  transformers model with the same tensors (triton/templates/tensorrt_llm_llmapi_hf)

config.pbtxt: generated from the release's recorded llmapi tensors (llmapi/args/<release>.json `llmapi_model`)
when trtsweep has them; otherwise the release's own config.pbtxt from its source tree, unchanged. Either way
`max_batch_size` and the decoupled policy are written to match model.yaml's `triton_config` (Triton reads the
config's values first, so they must agree). Triton's own batching is off (`max_batch_size: 0`): the llmapi model
takes one 1-D `text_input` per request, as upstream's requires; the LLM API batches in flight, up to the point's
`max_batch_size` LLM API option. model.yaml's LLM arguments are checked against the release's LLM
API (llmapi.args.check_options) before anything is written.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from trtsweep.errors import TrtsweepError
from trtsweep.toolchain.llmapi import args

MODEL = "tensorrt_llm"
SOURCE_SUBDIR = Path("triton_backend") / "all_models" / "llmapi" / "tensorrt_llm"
HF_TEMPLATE = "tensorrt_llm_llmapi_hf"


@dataclass(frozen=True)
class LlmapiRepo:
    backend: str  # hf | tensorrtllm
    release: str  # the LLM API table the options were checked against (major.minor)
    model: str  # the checkpoint the model loads (HF directory, ModelOpt-quantized or not)
    options: dict[str, Any]  # the point's LLM API options (llmapi.options.build)
    decoupled: bool
    source_dir: str | None = None  # tensorrtllm: the release's .../all_models/llmapi/tensorrt_llm
    hf: dict[str, Any] = field(default_factory=dict)  # hf: the model's own settings (trtsweep_hf: in model.yaml)


def recorded_inputs(release: str) -> list[dict[str, Any]] | None:
    """The release's llmapi input tensors, when trtsweep has a record of them (else None)."""
    record = args.table(release).get("llmapi_model") or {}
    return record.get("inputs") or None


def _tensor(t: dict[str, Any], kind: str) -> str:
    dims = ", ".join(str(d) for d in t["dims"])
    optional = "\n    optional: true" if t.get("optional") and kind == "input" else ""
    return f'  {{\n    name: "{t["name"]}"\n    data_type: {t["data_type"]}\n    dims: [ {dims} ]{optional}\n  }}'


def _policy(decoupled: bool) -> str:
    return f"max_batch_size: 0\nmodel_transaction_policy {{\n  decoupled: {str(decoupled).lower()}\n}}\n"


def generated_config(release: str, spec: LlmapiRepo) -> str:
    record = args.table(release)["llmapi_model"]
    inputs = ",\n".join(_tensor(t, "input") for t in record["inputs"])
    outputs = ",\n".join(_tensor(t, "output") for t in record["outputs"])
    return (
        f"# the llmapi model of TensorRT-LLM {release}: tensors from trtsweep's record (llmapi/args/{release}.json)\n"
        f'name: "{MODEL}"\nbackend: "python"\n{_policy(spec.decoupled)}'
        f"instance_group [\n  {{\n    count: 1\n    kind: KIND_CPU\n  }}\n]\n"
        f"input [\n{inputs}\n]\noutput [\n{outputs}\n]\n"
    )


def _release_config(source: Path, spec: LlmapiRepo) -> str:
    """The release's own config.pbtxt, its batch size and transaction policy set to match model.yaml."""
    text = (source / "config.pbtxt").read_text(encoding="utf-8")
    kept = [line for line in text.splitlines() if not line.strip().startswith("max_batch_size")]
    if any("model_transaction_policy" in line for line in kept):
        raise TrtsweepError(
            f"{source}/config.pbtxt sets model_transaction_policy itself; trtsweep sets it from model.yaml"
        )
    return "\n".join(kept) + "\n" + _policy(spec.decoupled)


def model_yaml(spec: LlmapiRepo) -> dict[str, Any]:
    llm = {"model": spec.model, "backend": "pytorch", **spec.options}
    args.check_options(spec.release, {k: v for k, v in llm.items() if k != "backend"}, prefix="model.yaml")
    out: dict[str, Any] = {**llm, "triton_config": {"max_batch_size": 0, "decoupled": spec.decoupled}}
    if spec.backend == "hf":
        out["trtsweep_hf"] = dict(spec.hf)
    return out


def _source(spec: LlmapiRepo) -> Path:
    if not spec.source_dir:
        raise TrtsweepError(
            f"the llmapi model of TensorRT-LLM {spec.release} comes from its source tree: set trtllm.dir"
        )
    source = Path(spec.source_dir)
    if not (source / "1" / "model.py").is_file():
        raise TrtsweepError(
            f"{source}/1/model.py: not found (expected TensorRT-LLM's {SOURCE_SUBDIR} of {spec.release})"
        )
    return source


def from_params(params: dict[str, Any]) -> LlmapiRepo:
    """The spec from the triton_repo module's params (layout: llmapi); unknown keys are an error."""
    known = set(LlmapiRepo.__dataclass_fields__)
    unknown = sorted(set(params) - known - {"layout"})
    if unknown:
        raise TrtsweepError(f"llmapi repository: unknown parameter(s) {unknown}; known: {sorted(known)}")
    return LlmapiRepo(**{k: v for k, v in params.items() if k != "layout"})


def render(spec: LlmapiRepo) -> dict[str, str]:
    """Relative path -> content of the whole repository; TrtsweepError naming the first problem."""
    if spec.backend not in ("hf", "tensorrtllm"):
        raise TrtsweepError(f"backend: expected hf or tensorrtllm, got {spec.backend!r}")
    files = {f"{MODEL}/1/model.yaml": yaml.safe_dump(model_yaml(spec), sort_keys=True, default_flow_style=False)}
    if spec.backend == "hf":
        code = resources.files("trtsweep.triton") / "templates" / HF_TEMPLATE / "model.py"
        files[f"{MODEL}/1/model.py"] = code.read_text(encoding="utf-8")
        files[f"{MODEL}/config.pbtxt"] = generated_config(spec.release, spec)
    else:
        source = _source(spec)
        for name in ("model.py", "helpers.py"):
            if (source / "1" / name).is_file():
                files[f"{MODEL}/1/{name}"] = (source / "1" / name).read_text(encoding="utf-8")
        recorded = recorded_inputs(spec.release) is not None
        files[f"{MODEL}/config.pbtxt"] = (
            generated_config(spec.release, spec) if recorded else _release_config(source, spec)
        )
    from trtsweep.triton import repository

    repository.check(files)
    return files
