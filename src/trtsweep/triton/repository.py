"""Generate and check a Triton model repository of the `inflight_batcher_llm` layout.

`render()` turns one dict of repository parameters into files (`<model>/config.pbtxt`, `<model>/1/model.py`)
from the project's Jinja2 templates under `trtsweep/templates/triton/`. `write()` writes only files whose
content changed and reports a unified diff per file. `check()` refuses a repository in which any
placeholder is left, any `config.pbtxt` does not parse with Triton's ModelConfig protobuf schema, or an
ensemble step reads a tensor that nothing produces.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import jinja2

from trtsweep.errors import TrtsweepError
from trtsweep.fileio import atomic_write_text

BACKENDS = ("hf",)
HF_DTYPES = ("float32", "bfloat16", "float16")

DEFAULTS: dict[str, Any] = {
    "backend": "hf",
    "triton_max_batch_size": 8,
    "decoupled_mode": True,
    "max_queue_delay_microseconds": 0,
    "exclude_input_in_output": True,
    "add_special_tokens": False,
    "skip_special_tokens": True,
    "preprocessing_instance_count": 1,
    "postprocessing_instance_count": 1,
    "hf_dtype": "float32",
    "hf_device": "auto",
    "hf_torch_threads": 0,
    "seed_input": "random_seed",
}
REQUIRED = ("engine_dir", "tokenizer_dir")
PLACEHOLDER = re.compile(r"\$\{[^}]*\}|\{\{|\{%")

# model name -> template directory, per backend
MODELS = {
    "hf": {
        "preprocessing": "preprocessing",
        "tensorrt_llm": "tensorrt_llm_hf",
        "postprocessing": "postprocessing",
        "ensemble": "ensemble",
    },
}


def _pbtxt_string(value: object) -> str:
    return str(value).replace("\\", "\\\\").replace('"', '\\"')


def resolve(params: dict[str, Any]) -> dict[str, Any]:
    """Defaults + user parameters, validated; raises TrtsweepError naming the bad field."""
    unknown = set(params) - set(DEFAULTS) - set(REQUIRED)
    if unknown:
        raise TrtsweepError(f"unknown triton repository parameter(s): {', '.join(sorted(unknown))}")
    resolved = {**DEFAULTS, **{k: v for k, v in params.items() if v is not None}}
    for key in REQUIRED:
        if not resolved.get(key):
            raise TrtsweepError(f"triton repository parameter {key!r} is required")
    if resolved["backend"] not in BACKENDS:
        raise TrtsweepError(f"backend {resolved['backend']!r} is not supported; expected one of {BACKENDS}")
    if resolved["hf_dtype"] not in HF_DTYPES:
        raise TrtsweepError(f"hf_dtype {resolved['hf_dtype']!r} is not one of {HF_DTYPES}")
    for key in ("triton_max_batch_size", "preprocessing_instance_count", "postprocessing_instance_count"):
        if not isinstance(resolved[key], int) or resolved[key] < 1:
            raise TrtsweepError(f"{key} must be an integer >= 1, got {resolved[key]!r}")
    if not isinstance(resolved["max_queue_delay_microseconds"], int) or resolved["max_queue_delay_microseconds"] < 0:
        raise TrtsweepError("max_queue_delay_microseconds must be an integer >= 0")
    return resolved


def _environment() -> jinja2.Environment:
    root = resources.files("trtsweep") / "templates" / "triton"
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(root)),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
        autoescape=False,
    )
    env.filters["pbtxt_string"] = _pbtxt_string
    return env


def render(params: dict[str, Any]) -> dict[str, str]:
    """Relative path -> file content for the whole repository."""
    resolved = resolve(params)
    env = _environment()
    root = resources.files("trtsweep") / "templates" / "triton"
    files: dict[str, str] = {}
    for model, template_dir in MODELS[resolved["backend"]].items():
        try:
            files[f"{model}/config.pbtxt"] = env.get_template(f"{template_dir}/config.pbtxt.j2").render(resolved)
        except jinja2.UndefinedError as exc:
            raise TrtsweepError(f"template {template_dir}/config.pbtxt.j2: {exc.message}") from exc
        code = root / template_dir / "model.py"
        if code.is_file():
            files[f"{model}/1/model.py"] = code.read_text(encoding="utf-8")
        else:
            files[f"{model}/1/.keep"] = ""
    check(files)
    return files


@dataclass
class WriteResult:
    changed: list[str]
    diffs: list[dict[str, str]]


def write(files: dict[str, str], out_dir: Path, check_mode: bool = False) -> WriteResult:
    """Write files whose content differs; in check mode only report what would change."""
    changed, diffs = [], []
    for rel, content in sorted(files.items()):
        path = out_dir / rel
        before = path.read_text(encoding="utf-8") if path.is_file() else None
        if before == content:
            continue
        changed.append(rel)
        diffs.append(
            {
                "before_header": str(path) if before is not None else "/dev/null",
                "after_header": str(path),
                "before": before or "",
                "after": content,
            }
        )
        if not check_mode:
            atomic_write_text(path, content)
    return WriteResult(changed, diffs)


def unified_diff(diffs: list[dict[str, str]]) -> str:
    out: list[str] = []
    for d in diffs:
        out.extend(
            difflib.unified_diff(
                d["before"].splitlines(keepends=True),
                d["after"].splitlines(keepends=True),
                d["before_header"],
                d["after_header"],
            )
        )
    return "".join(out)


def _parse(rel: str, text: str) -> Any:
    from google.protobuf import text_format
    from tritonclient.grpc import model_config_pb2

    try:
        return text_format.Parse(text, model_config_pb2.ModelConfig())
    except text_format.ParseError as exc:
        raise TrtsweepError(f"{rel}: not a valid Triton ModelConfig: {exc}") from exc


def check(files: dict[str, str]) -> None:
    """Placeholders, protobuf schema, and ensemble wiring; raises TrtsweepError on the first problem."""
    for rel, text in files.items():
        for lineno, line in enumerate(text.splitlines(), 1):
            if rel.endswith(".pbtxt") and PLACEHOLDER.search(line):
                raise TrtsweepError(f"{rel}:{lineno}: unfilled placeholder: {line.strip()}")
    configs = {rel.split("/")[0]: _parse(rel, text) for rel, text in files.items() if rel.endswith("config.pbtxt")}
    for name, config in configs.items():
        if config.name != name:
            raise TrtsweepError(f"{name}/config.pbtxt: name is {config.name!r}, expected {name!r}")
        if config.platform == "ensemble":
            _check_ensemble(name, config, configs)


def _check_ensemble(name: str, ensemble: Any, configs: dict[str, Any]) -> None:
    available = {t.name for t in ensemble.input}
    for index, step in enumerate(ensemble.ensemble_scheduling.step, 1):
        target = configs.get(step.model_name)
        where = f"{name}/config.pbtxt step {index} ({step.model_name})"
        if target is None:
            raise TrtsweepError(f"{where}: model {step.model_name!r} is not in the repository")
        inputs = {t.name for t in target.input}
        outputs = {t.name for t in target.output}
        for key, value in step.input_map.items():
            if key not in inputs:
                raise TrtsweepError(f"{where}: {step.model_name} has no input {key!r}")
            if value not in available:
                raise TrtsweepError(f"{where}: input {key!r} reads {value!r}, which nothing produces")
        required = {t.name for t in target.input if not t.optional}
        missing = required - set(step.input_map.keys())
        if missing:
            raise TrtsweepError(f"{where}: required input(s) {sorted(missing)} not mapped")
        for key, value in step.output_map.items():
            if key not in outputs:
                raise TrtsweepError(f"{where}: {step.model_name} has no output {key!r}")
            available.add(value)
    for tensor in ensemble.output:
        if tensor.name not in available:
            raise TrtsweepError(f"{name}/config.pbtxt: output {tensor.name!r} is produced by no step")
