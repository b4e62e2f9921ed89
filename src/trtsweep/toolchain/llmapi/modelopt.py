"""Quantization for TensorRT-LLM's PyTorch flow (1.0 .. 1.2): ModelOpt's hf_ptq.py, and checkpoints that come
quantized already.

The PyTorch flow builds no engine: the LLM API / trtllm-serve load a Hugging Face checkpoint, and a quantized one is
a ModelOpt HF export. The 1.0 .. 1.2 docs (features/quantization) quantize with ModelOpt's ``examples/llm_ptq``
(``huggingface_example.sh``, which runs ``hf_ptq.py``); TensorRT-LLM's own quantize.py writes engine-flow
checkpoints only, up to 1.2. ``modelopt/<release>.json`` records per TensorRT-LLM release, each with its sources:
the ModelOpt release its requirements pin (the example must match the installed ``nvidia-modelopt``), hf_ptq.py's
options at that ModelOpt tag, the ``quant_algo`` each qformat exports, the qformats the PyTorch backend serves and
how ``--dataset`` is loaded.

- Precisions (``PRECISIONS``): bf16/fp16 use the HF checkpoint as it is (no step); fp8, nvfp4, int4_awq, w4a8_awq
  run hf_ptq.py with that ``--qformat``; int8_sq is refused (the PyTorch backend serves no INT8 SmoothQuant; the
  engine flow does). ``--kv_cache_qformat`` is always given, since the tool's default is fp8.
- Pre-quantized checkpoints: ModelOpt writes ``hf_quant_config.json`` (``quantization.quant_algo``,
  ``kv_cache_quant_algo``) and the same into config.json's ``quantization_config`` (``quant_library: modelopt`` in
  0.33; ``quant_method: modelopt`` with ``kv_cache_scheme`` from 0.35). TensorRT-LLM 1.0 .. 1.2
  (``tensorrt_llm/_torch/model_config.py``) take ModelOpt quantization from hf_quant_config.json only; their
  config.json reader knows other producers (fp8 block scales, mxfp4).
- The user's prompts: hf_ptq.py takes only dataset names, and ``datasets.load_dataset`` loads a local directory at
  the name's path relative to the working directory instead of the Hub. The tool therefore runs in the calibration
  set's root (``env -C <root>``, so the path is in the argv) with ``--dataset pg19``: ``pg19/train.jsonl``
  (calibration.LAYOUT) and ``pg19/README.md``, the dataset card declaring the config ModelOpt 0.35+ ask for.
- The export directory is keyed by its inputs like the engine flow's checkpoints (artifacts.directory).
"""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from trtsweep.common.fileio import atomic_write_text
from trtsweep.errors import TrtsweepError
from trtsweep.toolchain import artifacts, calibration, commands, versions

TOOL = "hf_ptq.py"
# trtsweep precision -> hf_ptq.py --qformat (None: the HF checkpoint is served as it is)
PRECISIONS: dict[str, str | None] = {
    "bf16": None, "fp16": None, "fp8": "fp8", "nvfp4": "nvfp4", "int4_awq": "int4_awq", "w4a8_awq": "w4a8_awq",
    "int8_sq": "int8_sq",
}  # fmt: skip
KV_QFORMAT: dict[str | None, str] = {None: "none", "fp8": "fp8"}
KV_ALGO: dict[str | None, str | None] = {None: None, "fp8": "FP8"}  # kv_cache_quant_algo ModelOpt writes
PATH_FLAGS = ("--pyt_ckpt_path", "--export_path")
HF_QUANT_CONFIG = "hf_quant_config.json"
# the local dataset's card: one config, the default (0.33 names none), named as 0.35+ ask for it
DATASET_CARD = """---
configs:
- config_name: v1.0
  default: true
  data_files:
  - split: train
    path: train.jsonl
---
"""


@dataclass(frozen=True)
class QuantizeSpec:
    """One quantization. ``model_dir``: the HF checkpoint (named in the key by ``model_id``/``model_revision``, else
    by its resolved path); ``tool_dir``: ModelOpt's checkout, whose ``examples/llm_ptq/hf_ptq.py`` runs with
    ``python``; ``export_dir``: where the HF export goes (not part of the key); ``calib``: the user's prompts from
    `prepare_calibration` (None: the tool's default dataset with ``calib_size`` samples, None for its default);
    ``batch_size``: None lets the tool size it; ``extra_flags``: further options, as in the engine flow."""

    precision: str
    model_dir: str
    tool_dir: str
    export_dir: str = ""
    python: str = "python3"
    kv_cache_dtype: str | None = None
    model_id: str | None = None
    model_revision: str | None = None
    calib: calibration.CalibrationSet | None = None
    calib_size: int | None = None
    batch_size: int | None = None
    trust_remote_code: bool = False
    extra_flags: Mapping[str, Any] = field(default_factory=dict)


@functools.cache
def releases() -> dict[str, dict[str, Any]]:
    """release (major.minor) -> its record, for every modelopt/<release>.json."""
    found = {}
    for entry in (resources.files("trtsweep.toolchain.llmapi") / "modelopt").iterdir():
        if entry.name.endswith(".json"):
            data = json.loads(entry.read_text(encoding="utf-8"))
            found[data["release"]] = data
    return dict(sorted(found.items(), key=lambda item: _version(item[0])))


def _version(release: str) -> versions.Version:
    major, minor = release.split(".")
    return int(major), int(minor)


def record(release: str) -> dict[str, Any]:
    """The release's record; one that is ``same_as`` another release is that release's record."""
    known = releases()
    if release not in known:
        raise TrtsweepError(f"TensorRT-LLM {release} has no ModelOpt table in trtsweep; known: {', '.join(known)}")
    entry = known[release]
    return record(entry["same_as"]) if "same_as" in entry else entry


@functools.cache
def table(release: str) -> versions.Table:
    """hf_ptq.py's options for the release (false: a switch; true: takes a value; a list: one of these)."""
    tool = record(release)["tools"][TOOL]
    flags = {name: versions.Flag(spec is not False, tuple(spec) if isinstance(spec, list) else None)
             for name, spec in tool["flags"].items()}  # fmt: skip
    same_as = releases()[release].get("same_as")
    source = tool["source"] + (f" (taken as for TensorRT-LLM {same_as})" if same_as else "")
    return versions.Table(_version(release), flags, source, tool["pinned"] and not same_as)


def _label(release: str) -> str:
    return f"{TOOL} (ModelOpt {record(release)['modelopt']['version']})"


def validate(release: str, args: Sequence[str]) -> None:
    """Every option in ``args`` is one the release's hf_ptq.py has, with a value it accepts; required ones are there."""
    commands.validate(_label(release), table(release), _version(release), args)
    for flag in record(release)["tools"][TOOL]["required"]:
        if flag not in args:
            raise TrtsweepError(f"{_label(release)} needs {flag} (TensorRT-LLM {release})")


def _positive(name: str, value: Any) -> str:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise TrtsweepError(f"{name}: expected a positive integer, got {value!r}")
    return str(value)


def _qformat(release: str, precision: str) -> str | None:
    """The precision's --qformat (None: no quantization), or a one-line error when the PyTorch flow has none."""
    if precision not in PRECISIONS:
        raise TrtsweepError(f"precision {precision!r}: the PyTorch flow takes one of {', '.join(PRECISIONS)}")
    qformat = PRECISIONS[precision]
    if qformat is not None and qformat not in record(release)["pytorch_qformats"]:
        raise TrtsweepError(
            f"precision {precision}: TensorRT-LLM {release}'s PyTorch backend serves no {qformat} checkpoint (ModelOpt "
            "exports it for the engine flow only); use flow: engine for it"
        )
    return qformat


def _kv(kv_cache_dtype: str | None) -> None:
    if kv_cache_dtype not in KV_QFORMAT:
        raise TrtsweepError(f"kv_cache_dtype {kv_cache_dtype!r}: the PyTorch flow quantizes the KV cache to fp8 only")


def options(release: str, spec: QuantizeSpec) -> list[str]:
    """hf_ptq.py's options without the paths (what the export depends on), checked against the release."""
    qformat = _qformat(release, spec.precision)
    if qformat is None:
        raise TrtsweepError(f"precision {spec.precision}: the HF checkpoint is served as it is; nothing to quantize")
    _kv(spec.kv_cache_dtype)
    entry = record(release)
    flags = ["--qformat", qformat, "--kv_cache_qformat", KV_QFORMAT[spec.kv_cache_dtype], *entry["export_flags"]]
    if spec.calib is not None:
        flags += ["--dataset", entry["calibration"]["dataset"], "--calib_size", _positive("calib", spec.calib.records)]
    elif spec.calib_size is not None:
        flags += ["--calib_size", _positive("calib_size", spec.calib_size)]
    if spec.batch_size is not None:
        flags += ["--batch_size", _positive("batch_size", spec.batch_size)]
    if spec.trust_remote_code:
        flags.append("--trust_remote_code")
    generated = [*PATH_FLAGS, *(a for a in flags if a.startswith("--"))]
    flags += commands.extra_args(_label(release), table(release), spec.extra_flags, generated)
    commands.validate(_label(release), table(release), _version(release), flags)
    return flags


def command(release: str, spec: QuantizeSpec) -> list[str]:
    """``[env -C <calibration root>] python <tool_dir>/examples/llm_ptq/hf_ptq.py --pyt_ckpt_path .. --export_path ..
    <options>``, paths made absolute (the tool may run in another directory)."""
    if not spec.export_dir:
        raise TrtsweepError("export_dir: where the quantized HF checkpoint goes is not set")
    flags = options(release, spec)
    paths = ["--pyt_ckpt_path", os.path.abspath(spec.model_dir), "--export_path", os.path.abspath(spec.export_dir)]
    validate(release, [*paths, *flags])
    argv = [spec.python, os.path.join(os.path.abspath(spec.tool_dir), record(release)["script"]), *paths, *flags]
    return ["env", "-C", os.path.abspath(spec.calib.root), *argv] if spec.calib is not None else argv


def inputs(release: str, spec: QuantizeSpec) -> dict[str, Any]:
    """What the export depends on: model (its id, else its resolved directory) and revision, precision, KV cache,
    calibration content, tool releases and options (the calibration size among them); no other path."""
    return {
        "kind": "modelopt-hf", "trtllm_release": release, "modelopt": record(release)["modelopt"]["version"],
        "model": spec.model_id or str(Path(spec.model_dir).resolve()), "revision": spec.model_revision,
        "precision": spec.precision, "kv_cache_dtype": spec.kv_cache_dtype,
        "calibration": spec.calib.sha256 if spec.calib else None, "options": options(release, spec),
    }  # fmt: skip


def output_key(release: str, spec: QuantizeSpec) -> str:
    """The content key of the export (artifacts.key of `inputs`)."""
    return artifacts.key(inputs(release, spec))


def output_dir(cache_dir: Path, release: str, spec: QuantizeSpec) -> Path:
    """``<cache_dir>/checkpoints/modelopt-<precision>[-kv<dtype>]-<key>``, beside the engine flow's checkpoints."""
    kv = f"-kv{spec.kv_cache_dtype}" if spec.kv_cache_dtype else ""
    return artifacts.directory(cache_dir, "checkpoints", f"modelopt-{spec.precision}{kv}", inputs(release, spec))


def prepare_calibration(prompts: Path, cache_dir: Path, size: int | None = None, *, write: bool = True,
                        ) -> calibration.CalibrationSet:  # fmt: skip
    """calibration.prepare, plus the dataset card hf_ptq.py's dataset loader needs (``write=False``: plan only)."""
    calib = calibration.prepare(prompts, cache_dir, size, write=write)
    card = calib.directory(TOOL) / "README.md"
    if write and (not card.is_file() or card.read_text(encoding="utf-8") != DATASET_CARD):
        atomic_write_text(card, DATASET_CARD)
    return calib


def _json(path: Path) -> dict[str, Any] | None:
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise TrtsweepError(f"{path}: not readable JSON ({exc})") from None
    if not isinstance(data, dict):
        raise TrtsweepError(f"{path}: expected a JSON object")
    return data


def _kv_scheme(scheme: Any) -> str | None:
    """config.json's ``kv_cache_scheme``: 'FP8' (ModelOpt 0.33), {'num_bits': 8, 'type': 'float'} for FP8 (0.35+),
    another algorithm's name as a string."""
    if isinstance(scheme, dict):
        return "FP8" if scheme.get("type") == "float" and scheme.get("num_bits") == 8 else None
    return scheme if isinstance(scheme, str) else None


def prequantized(model_dir: Path) -> dict[str, str | None] | None:
    """The ModelOpt quantization ``model_dir`` carries: ``quant_algo``, ``kv_cache_quant_algo`` and the ``source``
    file, from hf_quant_config.json, else from config.json's quantization_config; None when it carries none."""
    hf = _json(model_dir / HF_QUANT_CONFIG)
    if hf is not None:
        quantization = hf.get("quantization")
        if not isinstance(quantization, dict):
            raise TrtsweepError(f"{model_dir / HF_QUANT_CONFIG}: no 'quantization' object")
        found = {"quant_algo": quantization.get("quant_algo"), "kv_cache_quant_algo":
                 quantization.get("kv_cache_quant_algo"), "source": HF_QUANT_CONFIG}  # fmt: skip
    else:
        config = (_json(model_dir / "config.json") or {}).get("quantization_config")
        if not isinstance(config, dict) or "modelopt" not in (config.get("quant_method"), config.get("quant_library")):
            return None
        found = {"quant_algo": config.get("quant_algo"), "source": "config.json",
                 "kv_cache_quant_algo": _kv_scheme(config.get("kv_cache_scheme"))}  # fmt: skip
    return found if found["quant_algo"] or found["kv_cache_quant_algo"] else None


def _quant_algo(release: str, precision: str) -> str | None:
    """The quant_algo ModelOpt's export of the precision carries (None: unquantized)."""
    qformat = PRECISIONS[precision]
    return None if qformat is None else record(release)["quant_algo"][qformat]


def check_prequantized(release: str, model_dir: Path, precision: str,
                       kv_cache_dtype: str | None) -> dict[str, str | None] | None:  # fmt: skip
    """The checkpoint's quantization when it is what the point asks for (serve it as it is), None when it carries none
    (quantize it, or serve it for bf16/fp16); a one-line TrtsweepError when it is something else."""
    _qformat(release, precision)
    _kv(kv_cache_dtype)
    found = prequantized(model_dir)
    if found is None:
        return None
    have = f"{model_dir} is quantized by ModelOpt (quant_algo {found['quant_algo']}, kv_cache_quant_algo "
    have += f"{found['kv_cache_quant_algo']}, in {found['source']})"
    if found["source"] != HF_QUANT_CONFIG:
        raise TrtsweepError(f"{have}, but TensorRT-LLM {release} reads that from {HF_QUANT_CONFIG}, which it lacks")
    wanted = _quant_algo(release, precision)
    if found["quant_algo"] != wanted:
        match = [p for p in PRECISIONS if p != precision and _quant_algo(release, p) == found["quant_algo"]]
        fix = f"set precision {' or '.join(match)} for it" if match else "give the unquantized model"
        raise TrtsweepError(f"{have}; precision {precision} needs {wanted or 'an unquantized checkpoint'}: {fix}")
    kv = found["kv_cache_quant_algo"]
    if kv is not None and kv != KV_ALGO[kv_cache_dtype]:
        raise TrtsweepError(f"{have}; kv_cache_dtype {kv_cache_dtype or 'none'} differs: set it to {kv.lower()}")
    return found
