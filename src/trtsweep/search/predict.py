"""The `predicted` strategy's predictor: NVIDIA AIConfigurator, run offline as its own CLI, never imported.

AIConfigurator (``aiconfigurator==0.12.0``, ``REQUIREMENT``) predicts a TensorRT-LLM deployment from a performance
database per GPU type (``h100_sxm``, ...) and database version; it needs only the model's ``config.json``. It
needs numpy>=2 where trtsweep pins numpy<2, so it lives in a venv of its own and `predict` is given its
``bin/aiconfigurator`` (``executable``; its successor ``aisimulate`` keeps the same command).

Each configuration is one aggregated (in-flight batching) experiment of ``aiconfigurator cli exp``: its TP and PP
fixed, its GEMM and KV cache quantization modes from our precision (``GEMM_MODES``, ``KV_CACHE_MODES``). The tool
sweeps batch sizes and writes the Pareto frontier of its predictions to ``pareto.csv``; the prediction is that
file's row with the most output tokens/s per GPU whose batch size is <= the configuration's ``max_batch_size``
and whose TTFT, TPOT and request latency are within the SLO's ``ttft_p99_ms``, ``tpot_p99_ms``, ``e2e_p99_ms``
(the tool predicts steady-state values, not p99s: the limits are applied to them as they are). With PP the tool
keeps PP micro-batches of ``bs`` in flight: its concurrency is ``bs`` x PP.

A disaggregated configuration (the config's ``disaggregated``: ``context`` / ``generation`` ``{tp, pp, instances}``,
point["disaggregated"]) is one ``serving_mode: disagg`` experiment of the same command, its shape pinned: the
prefill (context) and decode (generation) workers' ``*_tp_candidates`` / ``*_pp_candidates`` /
``*_num_gpu_candidates`` fixed, at most ``instances`` workers of each role (``max_prefill_workers``,
``max_decode_workers``) and a replica of exactly their GPUs (``num_gpu_per_replica``, ``total_gpus``): the tool's
rate matching then has one worker count per role to give (p x prefill GPUs + d x decode GPUs = the sum, p and d at
most the instances). ``decode_max_batch_size`` is the configuration's ``max_batch_size``. Its ``pareto.csv`` rows
name the workers (``(p)tp``, ``(p)pp``, ``(p)workers``, ``(d)tp``, ``(d)pp``, ``(d)workers``, ``(d)bs``; the tool's
``replicas`` is ``total_gpus // num_total_gpus``, computed for its printed table only, 1 here); the prediction is
the row of exactly the configuration's workers with the most tokens/s per GPU whose ``(d)bs`` is <= its
``max_batch_size`` within the SLO, the row's workers kept in ``Prediction.disaggregated``.

The other axes of the PyTorch flow: attention DP is the tool's ``dp`` (attention tp 1, dp = the point's tp; the
tool models it for MoE models only: on a dense model it is not predicted); a ``moe`` entry pins
``*_moe_tp_candidates`` / ``*_moe_ep_candidates`` (its ``backend`` is not modelled: the tool's ``moe_backend`` names
SGLang/vLLM kernels); speculative decoding is not predicted (the tool models MTP only, from ``nextn`` and
``nextn_accepted``, the accepted draft tokens per step, which it never infers and which is what the sweep measures).
Sources (the ``aiconfigurator==0.12.0`` wheel): ``aiconfigurator/sdk/task_v2.py`` (the Task's fields),
``aiconfigurator/sdk/sweep.py`` (``_rate_match_dict``: the disagg columns; ``sweep_disagg``: the worker matching),
``aiconfigurator_core/sdk/utils.py`` (``enumerate_parallel_config``: dp only for MoE models, trtllm never dp and tp >
1 together), ``aiconfigurator/cli/report_and_save.py`` (replicas), ``aiconfigurator/sdk/speculative.py``.

A configuration the tool cannot predict is unsupported, with the reason: a precision without a mode, or the
tool's own error line (an architecture it does not know, a quantization mode its database lacks for the GPU,
TP that does not divide the heads, no data for the model's shapes). Runs are cached in ``workdir`` by a hash
of their inputs (the task, config.json, the executable's path).
"""

from __future__ import annotations

import csv
import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import yaml

from trtsweep.errors import TrtsweepError

REQUIREMENT = "aiconfigurator==0.12.0"
EXPERIMENT = "trtsweep"
RUN_TIMEOUT_S = 600
REASON_CHARS = 300
# nvidia-smi GPU name (upper case) -> AIConfigurator system, first match wins; only systems whose database has
# TensorRT-LLM data (h100_pcie, a100_pcie, l4, a30 have none in 0.12.0; tests check each entry is there).
SYSTEMS = (
    (re.compile(r"GB300"), "gb300"),
    (re.compile(r"GB200"), "gb200"),
    (re.compile(r"B300"), "b300_sxm"),
    (re.compile(r"B200"), "b200_sxm"),
    (re.compile(r"H200(?!.*NVL)"), "h200_sxm"),
    (re.compile(r"H100(?!.*(PCIE|NVL))"), "h100_sxm"),
    (re.compile(r"A100(?!.*PCIE)"), "a100_sxm"),
    (re.compile(r"L40S"), "l40s"),
    (re.compile(r"RTX PRO 6000.*SERVER"), "rtx_pro_6000_server"),
)
# our precision -> AIConfigurator's GEMM quant mode; fp16 is modelled as bfloat16 (same kernels' speed, no fp16
# mode); ModelOpt's fp8 has static per-tensor activation scales (fp8_static); AWQ is INT4 weights, 16-bit
# activations (int4_wo); w4a8_awq has no mode (w4afp8 is for MoE layers only).
GEMM_MODES = {
    "fp16": "bfloat16", "bf16": "bfloat16", "fp8": "fp8_static", "int8_wo": "int8_wo", "int4_wo": "int4_wo",
    "int4_awq": "int4_wo", "int8_sq": "sq", "nvfp4": "nvfp4",
}  # fmt: skip
KV_CACHE_MODES = {None: "bfloat16", "int8": "int8", "fp8": "fp8"}
# trtsweep SLO key -> pareto.csv column it bounds (ms)
LIMIT_COLUMNS = {"ttft_p99_ms": "ttft", "tpot_p99_ms": "tpot", "e2e_p99_ms": "request_latency"}
COLUMNS = ("bs", "concurrency", "request_rate", "ttft", "tpot", "request_latency", "tokens/s/gpu")
# a disaggregated run's pareto.csv (sdk/sweep.py _rate_match_dict): its batch is the decode workers' (d)bs
DISAGG_COLUMNS = tuple(f"({side}){key}" for side in "pd" for key in ("tp", "dp", "pp", "workers", "bs")) + COLUMNS[1:]
ROLES = {"context": "prefill", "generation": "decode"}  # our role -> the tool's
CONFIG_FIELDS = ("id", "precision", "tp", "pp", "max_batch_size")
EXPERIMENT_ERROR = re.compile(rf"experiment '?{EXPERIMENT}'?(?: failed)?: (.+)", re.IGNORECASE)
EXCEPTION_LINE = re.compile(r"^([\w.]*(?:Error|Exception)\w*: .+)")
ERROR_LOG = re.compile(r"\[E\] \[[^\]]*\] (.+)")


@dataclass(frozen=True)
class Prediction:
    """AIConfigurator's answer for one configuration. `supported` False: `reason` says why (measure it as in grid).
    Supported with `reason`: no batch size meets the SLO (tokens 0). Numbers are None where the tool gave none."""

    supported: bool
    reason: str | None = None
    tokens_per_s_per_gpu: float | None = None
    concurrency: int | None = None
    request_rate: float | None = None
    ttft_ms: float | None = None
    tpot_ms: float | None = None
    # a disaggregated configuration's predicted row: role -> {tp, dp, pp, workers, bs} (the tool's (p)/(d) columns)
    disaggregated: dict[str, dict[str, int]] | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Database:
    """The performance data a prediction reads: the tool (name and version), its backend and the database version
    asked for (None where the tool could not be asked), and how that version was chosen."""

    tool: str
    backend: str
    version: str | None
    note: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


# the tool's own Python (beside its executable, in its venv) lists its databases and their versions
_DATABASES = """
import importlib.metadata as m, json, sys
from aiconfigurator_core.sdk.perf_database import get_latest_database_version, get_supported_databases
tool = None
for dist in ("aisimulate", "aiconfigurator"):
    try:
        tool = f"{dist} {m.version(dist)}"
        break
    except m.PackageNotFoundError:
        continue
system = sys.argv[1]
print(json.dumps({"tool": tool, "versions": get_supported_databases().get(system, {}).get("trtllm", []),
                  "latest": get_latest_database_version(system, "trtllm")}))
"""


def database(executable: str, system: str, release: str | None) -> Database:
    """The TensorRT-LLM database a prediction for `system` reads: the sweep's `release` (major.minor) where the tool
    has a database of it (its newest), else the tool's default, said so; asked of the tool's own Python."""
    tool = shutil.which(executable)
    python = Path(tool).parent / "python" if tool else None
    try:
        if python is None or not python.exists():
            raise OSError(f"no Python beside {executable}")
        done = subprocess.run([str(python), "-c", _DATABASES, system], capture_output=True, text=True, timeout=120,
                              check=True)  # fmt: skip
        found = json.loads(done.stdout.strip().splitlines()[-1])
    except (OSError, ValueError, IndexError, subprocess.SubprocessError) as exc:
        return Database(executable, "trtllm", None, f"the tool's databases could not be listed ({exc}): its default")
    name, versions, latest = found.get("tool") or executable, list(found.get("versions") or []), found.get("latest")
    wanted = ".".join(str(release).lstrip("v").split(".")[:2]) if release else None
    same = [v for v in versions if wanted and v.split(".")[:2] == wanted.split(".")]
    if same:
        return Database(name, "trtllm", same[-1], f"the sweep's TensorRT-LLM {wanted}")
    said = f"it has no TensorRT-LLM {wanted} database for {system}" if wanted else "the sweep names no release"
    return Database(name, "trtllm", latest, f"{said}: its default, {latest} (has {', '.join(versions) or 'none'})")


def system_for_gpu(name: str) -> str | None:
    """The AIConfigurator system of an nvidia-smi GPU name ("NVIDIA H100 80GB HBM3" -> "h100_sxm"), None if its
    database has no TensorRT-LLM data for that GPU."""
    upper = name.upper()
    return next((system for pattern, system in SYSTEMS if pattern.search(upper)), None)


def quant_modes(precision: str, kv_cache_dtype: str | None) -> tuple[str, str] | str:
    """(GEMM mode, KV cache mode) for AIConfigurator, or why there is none."""
    if precision not in GEMM_MODES:
        return f"precision {precision}: AIConfigurator has no GEMM quantization mode for it"
    if kv_cache_dtype not in KV_CACHE_MODES:
        return f"kv_cache_dtype {kv_cache_dtype}: AIConfigurator has no KV cache quantization mode for it"
    return GEMM_MODES[precision], KV_CACHE_MODES[kv_cache_dtype]


def predict(
    configs: Iterable[dict[str, Any]], *, model_dir: Path, system: str, isl: int, osl: int, slo: dict[str, float],
    version: str | None, workdir: Path, executable: str = "aiconfigurator", database_mode: str = "SILICON",
    jobs: int = 2,
) -> dict[str, Prediction]:  # fmt: skip
    """Configuration id -> its Prediction. `configs`: {"id", "precision", "tp", "pp", "max_batch_size",
    "kv_cache_dtype", "disaggregated", "attention_dp", "moe_tp", "moe_ep", "speculative", "max_concurrency" (each
    optional: the point's fields; max_concurrency the highest the sweep measures it at: a predicted row beyond it is
    not one the sweep can check, e.g. with attention DP, where the tool's batch is a rank's and its best row can lie
    at bs x dp)}; `model_dir` holds config.json; `system` from `system_for_gpu`; `version` the
    performance database version (None: the tool's current one); `database_mode` SILICON (measured data only)
    or HYBRID (also estimates shapes it has not measured); `jobs` tool processes at once."""
    tool = shutil.which(executable)
    if tool is None:
        raise TrtsweepError(
            f"AIConfigurator is not installed: pip install '{REQUIREMENT}' in a venv of its own (it needs numpy>=2, "
            f"trtsweep pins numpy<2) and give its bin/aiconfigurator (executable {executable!r} not found)"
        )
    config_json = model_dir / "config.json"
    if not config_json.is_file():
        raise TrtsweepError(f"{config_json}: not found (AIConfigurator reads the model's shape from config.json)")
    out: dict[str, Prediction] = {}
    tasks: dict[str, tuple[dict[str, Any], list[dict[str, Any]]]] = {}
    moe_model = _is_moe(config_json)
    for config in configs:
        _check(config)
        modes = quant_modes(config["precision"], config.get("kv_cache_dtype"))
        why = modes if isinstance(modes, str) else not_predicted(config, moe_model)
        if why is not None or isinstance(modes, str):
            out[config["id"]] = Prediction(supported=False, reason=why)
            continue
        task = _task(config, modes, model_dir, system, isl, osl, slo, version, database_mode)
        key = _key(task, config_json.read_bytes(), tool)
        tasks.setdefault(key, (task, []))[1].append(config)
    workdir.mkdir(parents=True, exist_ok=True)
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        runs = dict(zip(tasks, pool.map(lambda k: _run(tool, tasks[k][0], workdir / k), tasks), strict=True))
    for key, (_, group) in tasks.items():
        for config in group:
            out[config["id"]] = _prediction(runs[key], config, slo)
    return out


def _check(config: dict[str, Any]) -> None:
    for field in CONFIG_FIELDS:
        if field not in config:
            raise TrtsweepError(f"configuration {config.get('id', '?')}: no {field!r} (expected {CONFIG_FIELDS})")


def _is_moe(config_json: Path) -> bool:
    """Whether the model's config.json names routed experts (the tool models attention DP for those only)."""
    from trtsweep.sweep.pytorch_axes import experts

    try:
        config = json.loads(config_json.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(config, dict) and experts(config) is not None


def not_predicted(config: dict[str, Any], moe_model: bool) -> str | None:
    """Why the tool cannot predict what the configuration measures (None: it can)."""
    speculative = config.get("speculative")
    if speculative not in (None, "none"):
        return (f"speculative decoding ({speculative}): not predicted (AIConfigurator 0.12 models MTP only, from "
                "nextn and nextn_accepted, the accepted draft tokens per step it never infers: what the sweep "
                "measures)")  # fmt: skip
    if config.get("attention_dp") and not moe_model:
        return "attention DP on a dense model: not predicted (AIConfigurator 0.12 models attention DP for MoE models)"
    return None


def _parallel(prefix: str, tp: int, pp: int, config: dict[str, Any]) -> dict[str, Any]:
    """One role's search space pinned to the configuration: attention DP is the tool's dp (attention tp 1), a MoE
    entry its moe tp / ep."""
    attention_tp, dp = (1, tp) if config.get("attention_dp") else (tp, 1)
    out: dict[str, Any] = {f"{prefix}num_gpu_candidates": [tp * pp], f"{prefix}tp_candidates": [attention_tp],
                           f"{prefix}pp_candidates": [pp], f"{prefix}dp_candidates": [dp]}  # fmt: skip
    if config.get("moe_ep") is not None:
        out[f"{prefix}moe_tp_candidates"] = [config.get("moe_tp", 1)]
        out[f"{prefix}moe_ep_candidates"] = [config["moe_ep"]]
    return out


def _task(
    config: dict[str, Any], modes: tuple[str, str], model_dir: Path, system: str, isl: int, osl: int,
    slo: dict[str, float], version: str | None, database_mode: str,
) -> dict[str, Any]:  # fmt: skip
    """One experiment of `aiconfigurator cli exp` (its flat task schema) fixed to this configuration: aggregated,
    or disaggregated with its workers' shape."""
    task: dict[str, Any] = {"database_mode": database_mode, "isl": isl, "osl": osl}
    shape = config.get("disaggregated")
    if shape is None:
        task |= {"serving_mode": "agg", "total_gpus": config["tp"] * config["pp"]}
        roles = {"": (config["tp"], config["pp"])}
    else:
        gpus = sum(shape[r]["instances"] * shape[r]["tp"] * shape[r]["pp"] for r in ROLES)
        task |= {"serving_mode": "disagg", "total_gpus": gpus, "num_gpu_per_replica": [gpus],
                 "max_gpu_per_replica": gpus, "max_prefill_workers": shape["context"]["instances"],
                 "max_decode_workers": shape["generation"]["instances"],
                 "decode_max_batch_size": config["max_batch_size"]}  # fmt: skip
        roles = {f"{ROLES[r]}_": (shape[r]["tp"], shape[r]["pp"]) for r in ROLES}
    for prefix, (tp, pp) in roles.items():
        task |= {f"{prefix}model_path": str(model_dir.resolve()), f"{prefix}system_name": system,
                 f"{prefix}backend_name": "trtllm", f"{prefix}gemm_quant_mode": modes[0],
                 f"{prefix}kvcache_quant_mode": modes[1]}  # fmt: skip
        task |= _parallel(prefix or "agg_", tp, pp, config)
        if version is not None:
            task[f"{prefix}backend_version"] = version
    for key, field in (("ttft_p99_ms", "ttft"), ("tpot_p99_ms", "tpot")):
        if key in slo:
            task[field] = float(slo[key])
    return task


def _key(task: dict[str, Any], config_json: bytes, tool: str) -> str:
    digest = hashlib.sha256(json.dumps([task, tool], sort_keys=True).encode() + config_json)
    return digest.hexdigest()[:20]


def _run(tool: str, task: dict[str, Any], dest: Path) -> Path | str:
    """The run's pareto.csv, or the tool's error line; cached in `dest` (a directory renamed into place whole)."""
    if not dest.is_dir():
        tmp = Path(tempfile.mkdtemp(prefix=f"{dest.name}.", dir=dest.parent))
        _execute(tool, task, tmp)
        try:
            tmp.rename(dest)
        except OSError:  # another run put it in place first
            shutil.rmtree(tmp)
    found = sorted(dest.glob(f"out/*/{EXPERIMENT}/pareto.csv"))
    return found[0] if found else (dest / "error.txt").read_text()


def _execute(tool: str, task: dict[str, Any], where: Path) -> None:
    spec = where / "task.yaml"
    spec.write_text(yaml.safe_dump({"exps": [EXPERIMENT], EXPERIMENT: task}, sort_keys=False))
    command = [tool, "cli", "exp", "--yaml-path", str(spec), "--save-dir", str(where / "out"), "--top-n", "1"]
    env = {**os.environ, "MPLBACKEND": "Agg"}
    try:
        proc = subprocess.run(command, capture_output=True, text=True, timeout=RUN_TIMEOUT_S, env=env, check=False)
    except subprocess.TimeoutExpired:
        (where / "error.txt").write_text(f"AIConfigurator ran past {RUN_TIMEOUT_S} s")
        return
    output = proc.stdout + proc.stderr
    (where / "tool.log").write_text(output)
    if not list(where.glob(f"out/*/{EXPERIMENT}/pareto.csv")):
        (where / "error.txt").write_text(_error_line(output, proc.returncode))


def _error_line(output: str, returncode: int) -> str:
    """The tool's own reason: its line about the experiment, else the last exception, else its last error."""
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    for pattern in (EXPERIMENT_ERROR, EXCEPTION_LINE, ERROR_LOG):
        found = [match.group(1) for line in lines if (match := pattern.search(line))]
        if found:
            reason = found[-1]
            return reason if len(reason) <= REASON_CHARS else reason[: REASON_CHARS - 3] + "..."
    return f"AIConfigurator exited {returncode} without a result"


def _prediction(run: Path | str, config: dict[str, Any], slo: dict[str, float]) -> Prediction:
    if isinstance(run, str):
        return Prediction(supported=False, reason=run)
    with run.open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    shape = config.get("disaggregated")
    columns, batch = (COLUMNS, "bs") if shape is None else (DISAGG_COLUMNS, "(d)bs")
    missing = [column for column in columns if rows and column not in rows[0]]
    if missing:
        return Prediction(supported=False, reason=f"{run.name}: no column {missing[0]!r} (AIConfigurator 0.12 format)")
    limit, most = config["max_batch_size"], config.get("max_concurrency")
    met = [row for row in rows if _whole(row[batch]) <= limit and _meets(row, slo) and _shaped(row, shape)
           and (most is None or _whole(row["concurrency"]) <= most)]  # fmt: skip
    if not met:
        reason = f"no batch size <= {limit}" + (f" at a concurrency <= {most}" if most is not None else "")
        reason += " is predicted to meet the SLO"
        return Prediction(supported=True, reason=reason, tokens_per_s_per_gpu=0.0)
    best = max(met, key=lambda row: (float(row["tokens/s/gpu"]), -float(row["concurrency"])))
    workers = None if shape is None else {role: _worker(best, side) for role, side in ROLES.items()}
    return Prediction(
        supported=True, tokens_per_s_per_gpu=float(best["tokens/s/gpu"]), concurrency=_whole(best["concurrency"]),
        request_rate=float(best["request_rate"]), ttft_ms=float(best["ttft"]), tpot_ms=float(best["tpot"]),
        disaggregated=workers,
    )  # fmt: skip


def _whole(value: str) -> int:
    return int(float(value))


def _shaped(row: dict[str, str], shape: dict[str, Any] | None) -> bool:
    """A disaggregated row of exactly the configuration's workers (every row of an aggregated run): each role's
    ranks (the tool's tp x dp), pp and worker count."""
    if shape is None:
        return True
    for role, side in ROLES.items():
        ours, tool = shape[role], _worker(row, side)
        if (tool["tp"] * tool["dp"], tool["pp"], tool["workers"]) != (ours["tp"], ours["pp"], ours["instances"]):
            return False
    return True


def _worker(row: dict[str, str], side: str) -> dict[str, int]:
    """A role's columns of a disaggregated row: (p)tp, (p)dp, (p)pp, (p)workers, (p)bs (or (d)...)."""
    return {key: _whole(row[f"({side[0]}){key}"]) for key in ("tp", "dp", "pp", "workers", "bs")}


def _meets(row: dict[str, str], slo: dict[str, float]) -> bool:
    return all(float(row[column]) <= slo[key] for key, column in LIMIT_COLUMNS.items() if key in slo)
