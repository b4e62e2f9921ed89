"""The `predicted` strategy's inputs at plan time: AIConfigurator's prediction for each configuration of the sweep.

What it is asked (trtsweep.search.predict): the model's config.json (`search.model_dirs[<model name>]` on the
controller, else config.json alone fetched from the Hub into its cache), the GPU type of the hosts that can take
the configuration (their nvidia-smi names, or the inventory's `trtsweep_gpus`), the point's ISL / OSL (its engine
limits), its precision, TP / PP, max batch size and KV-cache dtype, and the sweep's SLO limits; of the PyTorch
flow's axes, a disaggregated point's workers (asked as AIConfigurator's `serving_mode: disagg`, its shape pinned),
attention DP, the MoE layout and the speculative variant (trtsweep.search.predict says which it predicts), so that
the predicted strategy ranks aggregated and disaggregated configurations together and measures the best of both.
The predictions are made once per sweep and settings: `results/<sweep>/predictions.json` holds them, with what
they were asked and the data each was made from (`database`: the tool and its version, the backend, the database
version and why that one: the sweep's TensorRT-LLM release where the tool has a database of it, else its default,
said so; trtsweep.search.predict.database), so later rounds, the report and a rerun read the same ones.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from trtsweep.common.fileio import atomic_write_text, read_json
from trtsweep.errors import TrtsweepError
from trtsweep.search import predict
from trtsweep.sweep.paths import sweep_path
from trtsweep.sweep.slo import search_limits

PREDICTIONS = "predictions.json"


def model_dir(model: dict[str, Any], given: dict[str, str], base_dir: Path) -> Path:
    """Where the model's config.json is on the controller."""
    if model["name"] in given:
        return sweep_path(given[model["name"]], base_dir)
    from huggingface_hub import hf_hub_download

    try:
        return Path(hf_hub_download(model["repo_id"], "config.json", revision=model.get("revision"))).parent
    except Exception as exc:  # any failure of the Hub is the same one-line error
        raise TrtsweepError(f"search.model_dirs: no directory for model {model['name']!r} and its config.json could "
                            f"not be fetched from the Hub ({type(exc).__name__}: {exc})") from None  # fmt: skip


def axes(point: dict[str, Any]) -> dict[str, Any]:
    """What the tool is asked of the PyTorch flow's axes: the workers of a disaggregated point (its context and
    generation roles), attention DP, the MoE layout, the speculative variant; only those the point has (a sweep
    without them asks as before)."""
    out = {key: point[key] for key in ("attention_dp", "moe_ep", "moe_tp", "speculative") if key in point}
    if "disaggregated" in point:
        out["disaggregated"] = {role: dict(point["disaggregated"][role]) for role in predict.ROLES}
    return out


def highest(point: dict[str, Any]) -> dict[str, int]:
    """The highest concurrency the sweep measures the point at (its levels' top, a load search's max), as
    `max_concurrency`; nothing for a trace or conversations replay (their load is the recording's)."""
    bench = point.get("benchmark") or {}
    levels = list(bench.get("concurrency") or []) + ([bench["load"]["max"]] if bench.get("load") else [])
    return {"max_concurrency": int(max(levels))} if levels else {}


def gpu_system(point: dict[str, Any], hosts: dict[str, dict[str, Any]]) -> str | None:
    """The AIConfigurator system of the first GPU, of a host with enough GPUs, that it has a database for."""
    for facts in hosts.values():
        gpus = facts.get("gpus") or []
        if len(gpus) >= point["resources"]["gpus"]:
            for gpu in gpus:
                if (system := predict.system_for_gpu(str(gpu.get("name", "")))) is not None:
                    return system
    return None


def predictions(
    grid: list[dict[str, Any]], search: dict[str, Any], slo: dict[str, Any] | None, hosts: dict[str, dict[str, Any]],
    results_dir: Path, base_dir: Path,
) -> dict[str, dict[str, Any]]:  # fmt: skip
    """Config id -> its prediction (Prediction.to_dict()), made once for these inputs and kept in predictions.json."""
    limits = search_limits(slo)
    asked = []
    for point in grid:
        system = gpu_system(point, hosts)
        asked.append({"id": point["id"], "precision": point["precision"], "tp": point["tp"], "pp": point["pp"],
                      "max_batch_size": point["max_batch_size"], "isl": point["max_input_len"],
                      "osl": point["max_output_len"], "kv_cache_dtype": point["trtllm"].get("kv_cache_dtype"),
                      "system": system, "model": point["model"]["name"], **axes(point), **highest(point)})  # fmt: skip
    key = hashlib.sha256(json.dumps([asked, limits, search.get("predictor")], sort_keys=True).encode()).hexdigest()
    saved = results_dir / PREDICTIONS
    kept = read_json(saved) or {}
    if kept.get("key") == key:
        return kept["predictions"]
    out: dict[str, dict[str, Any]] = {}
    groups: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    unknown = predict.Prediction(False, "no host that fits it has a GPU AIConfigurator knows").to_dict()
    for entry in asked:
        if entry["system"] is None:
            out[entry["id"]] = unknown
            continue
        groups.setdefault((entry["model"], entry["system"], entry["isl"], entry["osl"]), []).append(entry)
    models = {p["model"]["name"]: p["model"] for p in grid}
    executable = search.get("predictor") or "aiconfigurator"
    release = next((p["trtllm"].get("version") for p in grid if p["trtllm"].get("version")), None)
    # each system's database: the sweep's release where the tool has one, else its default (said so)
    databases = {system: predict.database(executable, system, release) for _, system, _, _ in groups}
    for (name, system, isl, osl), entries in groups.items():
        where = model_dir(models[name], search.get("model_dirs") or {}, base_dir)
        made = predict.predict(
            entries,
            model_dir=where,
            system=system,
            isl=isl,
            osl=osl,
            slo=limits,
            version=databases[system].version,
            workdir=results_dir / ".predict",
            executable=executable,
        )
        out |= {config: {**p.to_dict(), "database": databases[system].to_dict()} for config, p in made.items()}
    kept = {"key": key, "asked": asked, "slo": limits, "predictions": out,
            "databases": {system: db.to_dict() for system, db in databases.items()}}  # fmt: skip
    atomic_write_text(saved, json.dumps(kept, indent=1) + "\n")
    return out


def scores(made: dict[str, dict[str, Any]]) -> dict[str, float | None]:
    """Config id -> predicted output tok/s per GPU at the SLOs (None: not predicted, measured as in grid)."""
    return {config: p.get("tokens_per_s_per_gpu") if p.get("supported") else None for config, p in made.items()}
