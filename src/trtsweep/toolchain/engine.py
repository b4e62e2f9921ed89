"""Checking what the tools wrote against what was asked, and recording a build into a point's results.

Checkpoint ``config.json`` (convert_checkpoint.py / quantize.py): ``mapping.{tp_size,pp_size,world_size}``
and one ``rank<N>.safetensors`` per rank.

Engine ``config.json`` (``EngineConfig``/``Engine.save`` since 0.8): ``{"version", "pretrained_config":
{..., "mapping": {"world_size", "tp_size", "pp_size", ...}}, "build_config": {"max_batch_size",
"max_input_len", "max_seq_len" (0.11+; "max_output_len" before), "plugin_config": {...}, ...}}`` and one
``rank<N>.engine`` per rank.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from trtsweep.common.fileio import atomic_write_text
from trtsweep.errors import TrtsweepError


def _config(directory: Path, what: str) -> dict[str, Any]:
    try:
        config = json.loads((directory / "config.json").read_text(encoding="utf-8"))
    except OSError:
        raise TrtsweepError(f"{what} {directory} has no config.json") from None
    except ValueError:
        raise TrtsweepError(f"{what} {directory}: config.json is not valid JSON") from None
    if not isinstance(config, dict):
        raise TrtsweepError(f"{what} {directory}: config.json is not a JSON object")
    return config


def _compare(what: str, directory: Path, asked: Mapping[str, Any], found: Mapping[str, Any]) -> None:
    wrong = [f"{k} {found.get(k)!r} (asked {v!r})" for k, v in asked.items() if found.get(k) != v]
    if wrong:
        raise TrtsweepError(f"{what} {directory} does not match the request: {', '.join(wrong)}")


def _mapping(config: Mapping[str, Any]) -> dict[str, Any]:
    mapping = config.get("mapping")
    return mapping if isinstance(mapping, dict) else {}


def _parallel(tp: int, pp: int) -> dict[str, int]:
    return {"tp_size": tp, "pp_size": pp, "world_size": tp * pp}


def check_checkpoint(directory: Path, tp: int, pp: int) -> dict[str, Any]:
    """The checkpoint's TP/PP and rank files match; returns its dtype and quantization."""
    config = _config(directory, "checkpoint")
    _compare("checkpoint", directory, _parallel(tp, pp), _mapping(config))
    ranks = sorted(directory.glob("rank*.safetensors"))
    if len(ranks) != tp * pp:
        raise TrtsweepError(f"checkpoint {directory} has {len(ranks)} rank*.safetensors files, expected {tp * pp}")
    return {"dtype": config.get("dtype"), "quantization": config.get("quantization")}


def check_engine(directory: Path, tp: int, pp: int, max_batch_size: int, max_input_len: int, max_seq_len: int) -> dict:
    """The engine matches the request (parallelism from the pretrained config's mapping, limits from the
    build config); returns its version, rank count and total size of its ``*.engine`` files."""
    config = _config(directory, "engine")
    pretrained = config.get("pretrained_config")
    build = config.get("build_config")
    if not isinstance(pretrained, dict) or not isinstance(build, dict):
        raise TrtsweepError(f"engine {directory}: config.json has no pretrained_config / build_config")
    _compare("engine", directory, _parallel(tp, pp), _mapping(pretrained))
    limits: dict[str, int] = {"max_batch_size": max_batch_size, "max_input_len": max_input_len}
    if "max_seq_len" in build:
        limits["max_seq_len"] = max_seq_len
    else:
        limits["max_output_len"] = max_seq_len - max_input_len
    _compare("engine", directory, limits, build)
    engines = sorted(directory.glob("*.engine"))
    if len(engines) != tp * pp:
        raise TrtsweepError(f"engine {directory} has {len(engines)} *.engine files, expected {tp * pp}")
    return {
        "trtllm_version": config.get("version"),
        "ranks": len(engines),
        "engine_size_bytes": sum(p.stat().st_size for p in engines),
    }


def record(results_dir: Path, name: str, entry: Mapping[str, Any], log_file: Path | None) -> None:
    """``<results_dir>/<name>.json`` (command, timings, sizes, reuse) and the tool's log as ``<name>.log``."""
    atomic_write_text(results_dir / f"{name}.json", json.dumps(entry, indent=2, ensure_ascii=False) + "\n")
    if log_file is not None and log_file.is_file():
        shutil.copyfile(log_file, results_dir / f"{name}.log")
