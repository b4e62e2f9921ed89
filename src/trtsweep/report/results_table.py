"""`results/<sweep>/results.{csv,json}`: one row per (point, load level) with everything a comparison needs.

Each row joins what the controller fetched for the point: its settings (`point.json`), where and with what it ran
(`status.json`, `repository.json`, the server log's version line) and the level's summary
(`llm_perf.summary.json`): every latency percentile, token throughput (total, per GPU, per user), tokens per
request, success, errors by class and abandoned requests by cause, accuracy, the server's request count and queue /
compute time per request (deltas of its metrics over the level), and goodput under the sweep's SLOs (counted from
the per-request rows, `llm_perf.requests.jsonl`). A value nobody measured is empty, never 0.

`kv_reused_blocks` and `kv_hit_rate` are TensorRT-LLM's own KV-cache block reuse over the level (the summary's
`server_metrics.kv_reuse`, trtsweep.perf.server_metrics): blocks matched and reused, and reused / (reused + missed).
Empty where the server gave none: the hf backend, or Triton's hit rate (its metrics have no missed count).

A point measured by a capacity search (the sweep's `benchmark.load`: llm-perf --search slo, the summary's `search`
object) has its capacity on each of its rows, since it is the point's, not a level's: `capacity_rps` (the request
rate of the highest load within the SLOs), `capacity_concurrency` (its concurrency, empty when the search raised
the request rate), `capacity_out_tok_s_per_gpu` (its output tok/s per GPU), `capacity_levels` (levels the search
measured) and `capacity_bound` (tight: the next load up missed the SLOs | open: the search's max met them, so the
capacity is at least that | none: no load measured met them, and the capacity columns are empty). A point without a
search has them all empty.

The workload is a setting (`workload`: "prompts", "prompts, N shared prefixes of T tokens", "synthetic prompts,
input DIST, output DIST" or "synthetic prompts, lengths from <file>", "trace <file>[, format]" or
"conversations <file>, served|recorded history")
and, per level, `replay_speed` (a trace replay's level: its time scale; empty otherwise) and `prefix_share` (tokens of
prefixes shared with other requests / input tokens; empty without a shared-prefix or trace workload).

A point of a search over configurations (the sweep's `search:`, trtsweep.search) says its round
(`search_round`) and the share of the benchmark's requests per level it measured (`search_fidelity`: below 1, a
screening measurement, never an answer; empty without a search).

What the point's GPUs did during each level (llm-perf --gpu-telemetry, trtsweep.perf.telemetry; empty for a CPU
point or a host without NVML): `gpu_name`, `gpu_util_pct`, `gpu_mem_peak_mb`, `gpu_power_w` (the point's GPUs
together, mean), `gpu_energy_j`, `gpu_sm_clock_mhz` and `out_tok_per_joule` (output tokens/s over that power).

The PyTorch flow's axes (trtsweep.sweep.pytorch_axes; empty for a sweep without them): `speculative` (the variant's
name, "none" without), `attention_dp`, `moe_ep`; per level, from trtllm-serve's iteration stats (specDecodingStats,
trtsweep.perf.server_metrics.spec_decoding), `acceptance_rate` (accepted / drafted tokens) and `acceptance_length`
(tokens a drafted request gains a step; empty where the server reports none: no speculative decoding, or Triton).
Beside them the client's own measures (trtsweep.perf.metrics): `tokens_per_chunk` (a streamed request's tokens per
decoding step after the first: 1.0 for a server that streams a chunk per step without speculative decoding, more
with it) and `accepted_tokens` (output tokens less chunks over the level: drafted tokens accepted, as the client
counts them), with the server's `server_accepted_tokens`; `acceptance_check` says what they say together
(trtsweep.report.acceptance): the server's number missing where its release does not report that decoding type, or
the two counts disagreeing. `server_metrics_scope` says what the server's iteration-stat columns cover where it is
not every request: rank 0's executor with attention DP (about 1/tp of the requests), a disaggregated point's first
generation worker.
`disaggregated` is a disaggregated point's workers (trtsweep.sweep.disaggregated: its label, `c1x1-g2x1`; empty for
an aggregated point).

`gpus` (and `gpu_ids`) are the GPUs the point's servers use, every worker's: the first `resources.gpus` (tp x pp;
a disaggregated point's every context and generation worker) of those its lane holds (an exclusive lane holds all of
its host's), so tokens/s per GPU divides by the GPUs the point took; a point that does not say (a record of an
earlier run) counts every GPU of its lane.

Three columns say whether a row's numbers can be trusted at all: `point_status` (the point's status record: only an
"ok" point's levels are candidates for the verdict), `server_identity_error` (llm-perf's --expect-server-id check
found another server, or none, before or after the level: its numbers are not the point's server's) and `gpu_shared`
(another process on the point's GPUs during the level, named: llm-perf --gpu-owner-pids, trtsweep.perf.telemetry).
"""

from __future__ import annotations

import csv
import io
import json
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from trtsweep.common.fileio import atomic_write_text, read_json
from trtsweep.report import acceptance
from trtsweep.sweep import disaggregated
from trtsweep.sweep.slo import ACCURACY_METRICS

LATENCIES = ("ttft", "tpot", "icl", "e2e")
STATS = ("mean", "p50", "p90", "p95", "p99")
# config: the point's configuration whatever flow and server measure it (the id less its flow/server part)
SETTINGS = ("model", "model_revision", "backend", "flow", "server", "config", "precision", "tp", "pp", "world_size",
            "max_batch_size", "max_input_len", "max_output_len", "streaming", "protocol", "workload", "speculative",
            "attention_dp", "moe_ep", "disaggregated")  # fmt: skip
# not copied from point.json as they are
OWN = ("model", "model_revision", "protocol", "flow", "server", "config", "workload", "disaggregated")
WHERE = ("host", "gpus", "gpu_ids", "slurm_step", "run_id", "settings_hash", "trtsweep", "trtsweep_build",
         "tensorrt_llm", "triton")  # fmt: skip
TRUST = ("point_status", "server_identity_error", "gpu_shared")
LOAD = ("concurrency", "replay_speed", "requests", "succeeded", "failed", "success_rate", "errors", "abandoned")
THROUGHPUT = ("request_throughput", "output_token_throughput", "input_token_throughput", "output_tok_s_per_gpu",
              "input_tok_s_per_gpu", "output_tok_s_per_user", "output_tokens_mean", "input_tokens_mean", "prefix_share",
              "goodput", "good_fraction", "window_s")  # fmt: skip
# what the point's GPUs did during the level (the summary's gpu_telemetry, trtsweep.perf.telemetry); empty without
TELEMETRY = ("gpu_name", "gpu_util_pct", "gpu_mem_peak_mb", "gpu_power_w", "gpu_energy_j", "gpu_sm_clock_mhz",
             "out_tok_per_joule")  # fmt: skip
CAPACITY = ("capacity_rps", "capacity_concurrency", "capacity_out_tok_s_per_gpu", "capacity_levels", "capacity_bound")
CSV_FILE, JSON_FILE = "results.csv", "results.json"
SEARCH = ("search_round", "search_fidelity")  # a search's round point: its round, its share of the requests per level
ACCURACY = ACCURACY_METRICS  # every score an SLO may judge by is a column
COLUMNS = ("point", *SETTINGS, *WHERE, *TRUST, *LOAD, *THROUGHPUT, *TELEMETRY, *CAPACITY, *SEARCH,
           *(f"{m}_{s}_ms" for m in LATENCIES for s in STATS), *ACCURACY, "accuracy_n",
           "server_requests", "server_queue_ms", "server_compute_ms", "server_batch_mean",
           "server_kv_used_max", "kv_reused_blocks", "kv_hit_rate", "acceptance_rate", "acceptance_length",
           "tokens_per_chunk", "accepted_tokens", "server_accepted_tokens", "acceptance_check",
           "server_metrics_scope")  # fmt: skip
SLO_LATENCIES = {"ttft_p99_ms": "ttft_ms", "tpot_p99_ms": "tpot_ms", "e2e_p99_ms": "e2e_ms"}
_VERSION = re.compile(r"^\|\s*server_version\s*\|\s*(\S+)", re.MULTILINE)


def cell(value: Any) -> str:
    """How a value is written in results.csv, and shown in the report's tables (the same text)."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float):
        return f"{value:.6g}"
    return str(value)


def _triton_version(log: Path) -> str | None:
    try:
        with log.open(encoding="utf-8", errors="replace") as handle:
            match = _VERSION.search(handle.read(200_000))
    except OSError:
        return None
    return match.group(1) if match else None


def _good(requests_file: Path, level: int, slo: dict[str, float]) -> int | None:
    """Measured requests of a level that succeeded within every latency SLO (None without the request rows)."""
    limits = {column: slo[key] for key, column in SLO_LATENCIES.items() if key in slo}
    if not requests_file.is_file():
        return None
    good = 0
    with requests_file.open(encoding="utf-8") as handle:
        for line in handle:
            row = json.loads(line)
            if row.get("level") != level or row.get("warmup") or row.get("error"):
                continue
            good += all(row.get(column) is not None and row[column] <= limit for column, limit in limits.items())
    return good


def workload(benchmark: dict[str, Any]) -> str:
    """What the point's requests were: its prompts file or synthetic prompts (with shared prefixes), a trace replay,
    or conversations."""
    trace, prefix, talks = benchmark.get("trace"), benchmark.get("shared_prefix"), benchmark.get("conversations")
    if talks:
        return f"conversations {Path(talks['path']).name}, {talks.get('history', 'served')} history"
    if trace:
        kind = f", {trace['format']}" if trace.get("format", "auto") != "auto" else ""
        return f"trace {Path(trace['path']).name}{kind}"
    made = benchmark.get("synthetic")
    base = "prompts"
    if made:
        drawn = f"lengths from {Path(made['lengths_from']).name}" if made.get("lengths_from") else (
            f"input {made['input']}, output {made.get('output') or 'normal:128'}")  # fmt: skip
        base = f"synthetic prompts, {drawn}"
    if prefix:
        return f"{base}, {prefix['count']} shared prefixes of {prefix['tokens']} tokens"
    return base


def point_gpus(point: dict[str, Any], status: dict[str, Any]) -> list[Any]:
    """The GPUs the point's servers used: the first `resources.gpus` of its lane's (all of them where the point
    does not say how many it takes)."""
    placed = list(status.get("gpus") or [])
    needs = (point.get("resources") or {}).get("gpus")
    return placed[:needs] if isinstance(needs, int) and not isinstance(needs, bool) and needs > 0 else placed


def slurm_step(slurm: Any) -> str | None:
    """JOB.STEP of the Slurm step the point ran in (None off Slurm)."""
    if not isinstance(slurm, dict) or not slurm.get("job_id"):
        return None
    return f"{slurm['job_id']}.{slurm.get('step_id')}"


def _point_columns(point_dir: Path, point: dict[str, Any], status: dict[str, Any]) -> dict[str, Any]:
    repo = read_json(point_dir / "repository.json") or {}
    gpus = point_gpus(point, status)
    shape = point.get("disaggregated")
    built = status.get("trtsweep") or {}
    return {
        "point": point_dir.name,
        "model": point.get("model", {}).get("repo_id"),
        "model_revision": repo.get("model_revision") or point.get("model", {}).get("revision"),
        **{key: point.get(key) for key in SETTINGS if key not in OWN},
        # points of runs before the pytorch flow are engine-flow points served by Triton
        "flow": point.get("flow", "engine"),
        "server": point.get("server", "triton"),
        "config": point.get("config", point_dir.name),
        "protocol": "openai" if point.get("server") == "trtllm-serve" else point.get("benchmark", {}).get("protocol"),
        "workload": workload(point.get("benchmark", {})),
        "disaggregated": disaggregated.label(shape) if isinstance(shape, dict) else None,
        "host": status.get("host"),
        "gpus": len(gpus),
        "gpu_ids": ",".join(str(g) for g in gpus),
        "slurm_step": slurm_step(status.get("slurm")),
        "run_id": status.get("run_id"),
        "settings_hash": status.get("settings_hash"),
        "trtsweep": built.get("version"),
        "trtsweep_build": built.get("build"),
        "tensorrt_llm": (point.get("trtllm") or {}).get("version"),
        "triton": _triton_version(point_dir / "triton_server.log"),
        "point_status": status.get("status"),
        "search_round": (point.get("search") or {}).get("round"),
        "search_fidelity": (point.get("search") or {}).get("fidelity"),
    }


def _level_columns(summary: dict[str, Any], gpus: int) -> dict[str, Any]:
    requests = summary.get("requests") or 0
    out: dict[str, Any] = {key: summary.get(key) for key in ("requests", "succeeded", "failed", *THROUGHPUT[:3])}
    out["window_s"] = summary.get("window_s")
    out["prefix_share"] = summary.get("prefix_share")  # shared-prefix tokens / input tokens (workloads only)
    out["server_identity_error"] = (summary.get("server_identity") or {}).get("error")
    out["gpu_shared"] = (summary.get("gpu_telemetry") or {}).get("foreign_processes")
    out["success_rate"] = summary.get("succeeded", 0) / requests if requests else None
    for counts in ("errors", "abandoned"):  # by class / cause: "timeout=2;connection=1"
        out[counts] = ";".join(f"{k}={v}" for k, v in sorted((summary.get(counts) or {}).items()))
    for side in ("output", "input"):  # per GPU: a CPU point (no GPU) is counted per host
        tok_s = summary.get(f"{side}_token_throughput")
        out[f"{side}_tok_s_per_gpu"] = tok_s / max(gpus, 1) if tok_s is not None else None
    tpot = (summary.get("tpot_ms") or {}).get("p50")
    out["output_tok_s_per_user"] = 1000.0 / tpot if tpot else None
    out["output_tokens_mean"] = (summary.get("output_tokens") or {}).get("mean")
    # input tokens are summed over the successful requests, and null without a tokenizer (unknown, never 0)
    input_total, succeeded = summary.get("input_tokens_total"), summary.get("succeeded")
    out["input_tokens_mean"] = input_total / succeeded if input_total is not None and succeeded else None
    for metric in LATENCIES:
        stats = summary.get(f"{metric}_ms") or {}
        out.update({f"{metric}_{s}_ms": stats.get(s) for s in STATS})
    accuracy = summary.get("accuracy") or {}
    out.update({name: accuracy.get(name) for name in ACCURACY})
    out["accuracy_n"] = summary.get("accuracy_n")
    server = summary.get("server_metrics") or {}
    per_model = server.get("per_model") or {}
    model = per_model.get("ensemble") or per_model.get("tensorrt_llm") or {}
    iterations = server.get("iteration_stats") or {}  # trtllm-serve
    # the server's count over the level (a delta, warm-up included)
    out["server_requests"] = model.get("requests", iterations.get("completed_requests"))
    out["server_queue_ms"] = model.get("queue_ms_per_request", iterations.get("queue_ms_per_request"))
    out["server_compute_ms"] = model.get("compute_ms_per_request")
    out["server_batch_mean"] = iterations.get("batch_mean")  # requests scheduled per iteration
    out["server_kv_used_max"] = iterations.get("kv_used_fraction_max")
    # speculative decoding over the level: accepted / drafted tokens, tokens a drafted request gains a step
    out["acceptance_rate"] = iterations.get("acceptance_rate")
    out["acceptance_length"] = iterations.get("acceptance_length")
    out["tokens_per_chunk"] = (summary.get("tokens_per_chunk") or {}).get("mean")  # the client's measures
    out["accepted_tokens"] = summary.get("accepted_tokens")
    out["server_accepted_tokens"] = iterations.get("spec_accepted_tokens")
    kv = server.get("kv_reuse") or {}  # TensorRT-LLM's own block reuse counts over the level (none on the hf backend)
    out["kv_reused_blocks"] = kv.get("kv_reused_blocks")
    out["kv_hit_rate"] = kv.get("kv_hit_rate")
    return out | telemetry_columns(summary)


def telemetry_columns(summary: dict[str, Any]) -> dict[str, Any]:
    """The level's GPU telemetry columns (all None without `gpu_telemetry`: a CPU point, or no NVML on its host);
    `out_tok_per_joule`: output tokens/s over the GPUs' mean power."""
    gpu = summary.get("gpu_telemetry")
    if not isinstance(gpu, dict):
        return dict.fromkeys(TELEMETRY)
    tok_s, power = summary.get("output_token_throughput"), gpu.get("power_w")
    return {
        "gpu_name": "+".join(dict.fromkeys(gpu.get("names") or [])) or None,
        "gpu_util_pct": gpu.get("util_pct"),
        "gpu_mem_peak_mb": gpu.get("memory_used_mb_peak"),
        "gpu_power_w": power,
        "gpu_energy_j": gpu.get("energy_j"),
        "gpu_sm_clock_mhz": gpu.get("sm_clock_mhz"),
        "out_tok_per_joule": tok_s / power if tok_s is not None and power else None,
    }


def capacity_columns(search: dict[str, Any] | None, gpus: int) -> dict[str, Any]:
    """The point's capacity columns from its summary's `search` object (all None without one; unknown is None)."""
    if not isinstance(search, dict):
        return dict.fromkeys(CAPACITY)
    capacity = search.get("capacity") or {}
    tok_s = capacity.get("output_token_throughput")
    levels = search.get("levels")
    return {
        "capacity_rps": capacity.get("request_rate"),
        "capacity_concurrency": capacity.get("concurrency"),
        "capacity_out_tok_s_per_gpu": tok_s / max(gpus, 1) if tok_s is not None else None,  # per host without a GPU
        "capacity_levels": len(levels) if isinstance(levels, list) else None,
        "capacity_bound": search.get("bound"),
    }


def metrics_scope(point: dict[str, Any]) -> str | None:
    """What the server columns (iteration stats: batch, queue, KV cache, acceptance) cover where it is not the whole
    point: with attention DP trtllm-serve's /metrics is rank 0's executor, a disaggregated point's is its first
    generation worker's (trtsweep.lane.disagg.metrics_worker); None where they cover every request."""
    shape, tp = point.get("disaggregated"), int(point.get("tp") or 1)
    if isinstance(shape, dict):
        workers = int((shape.get("generation") or {}).get("instances") or 1)
        return (f"generation0 of {workers} generation worker(s), no context worker: its share of the decoding "
                "iterations only")  # fmt: skip
    if point.get("attention_dp") and tp > 1 and point.get("server") == "trtllm-serve":
        return f"rank 0 of {tp} (attention DP): about 1/{tp} of the requests"
    return None


def collect(results_dir: Path, slo: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """One row per (point, level) of every point with a benchmark summary, by point id then concurrency."""
    rows = []
    for summary_file in sorted(results_dir.glob("*/llm_perf.summary.json")):
        point_dir = summary_file.parent
        data = read_json(summary_file) or {}
        point = read_json(point_dir / "point.json") or {}
        status = read_json(point_dir / "status.json") or {}
        base = _point_columns(point_dir, point, status)
        base |= capacity_columns(data.get("search"), base["gpus"])
        for index, level in enumerate(data.get("levels", [])):
            summary = level.get("summary", {})
            row = {**base, "concurrency": level.get("concurrency"), "replay_speed": level.get("replay_speed"),
                   **_level_columns(summary, base["gpus"])}  # fmt: skip
            row["acceptance_check"] = acceptance.check(point, row)
            row["server_metrics_scope"] = metrics_scope(point)
            if slo and summary.get("window_s"):
                good = _good(point_dir / "llm_perf.requests.jsonl", index, slo)
                row["goodput"] = good / summary["window_s"] if good is not None else None
                row["good_fraction"] = good / summary["requests"] if good is not None and summary["requests"] else None
            rows.append({column: row.get(column) for column in COLUMNS})
    return rows


def write(results_dir: Path, rows: Iterable[dict[str, Any]]) -> None:
    rows = list(rows)
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(COLUMNS)
    writer.writerows([cell(row[c]) for c in COLUMNS] for row in rows)
    atomic_write_text(results_dir / CSV_FILE, buffer.getvalue())
    atomic_write_text(results_dir / JSON_FILE, json.dumps({"columns": COLUMNS, "rows": rows}, indent=1) + "\n")
