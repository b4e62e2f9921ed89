"""The llm-perf command line for a benchmark's parameters: one mapping, used by the trtsweep_llm_perf module and by the
lane runner (trtsweep.lane) that runs a sweep's points on their host."""

from __future__ import annotations

import json
import sys
from typing import Any

from trtsweep.perf.search import KEYS as SEARCH_LIMITS  # the slo keys a search judges each level by

# option -> llm-perf flag; the benchmark runs as its own process (torch and Ansible's module runtime do
# not share a process well, and a separate process keeps the measurement free of Ansible's overhead).
FLAGS = {
    "url": "--url",
    "protocol": "--protocol",
    "endpoint": "--endpoint",
    "model": "--model",
    "input_data": "--input-data",
    "tokenizer_path": "--tokenizer-path",
    "export_file": "--profile-export-file",
    "num_requests": "--num-requests",
    "warmup_requests": "--warmup-requests",
    "max_tokens": "--max-tokens",
    "seed": "--seed",
    "connect_timeout": "--connect-timeout",
    "request_timeout": "--request-timeout",
    "stall_timeout": "--stall-timeout",
    "expect_server_id": "--expect-server-id",
    "scorer": "--scorer",
    "server_metrics_url": "--server-metrics-url",
}


def _number(value: Any) -> str:
    """A number as llm-perf's flags take it: 64.0 -> 64, 0.99 -> 0.99."""
    value = float(value)
    return str(int(value)) if value.is_integer() else repr(value)


def search_flags(search: dict[str, Any]) -> list[str]:
    """llm-perf's capacity search flags for the `search` option (ValueError without a limit to judge by)."""
    slo = search.get("slo") or {}
    limits = [f"{key}={_number(slo[key])}" for key in SEARCH_LIMITS if slo.get(key) is not None]
    if not limits:
        raise ValueError(f"search.slo needs at least one of {', '.join(SEARCH_LIMITS)}, got {slo!r}")
    argv = ["--search", search.get("search") or "slo", "--search-variable", search["variable"]]
    argv += ["--search-slo", ",".join(limits), "--search-max", _number(search["max"])]
    if search.get("max_levels") is not None:
        argv += ["--search-max-levels", str(search["max_levels"])]
    if search.get("hint"):  # a configuration search's later round: the earlier round's capacity and failed level
        argv += ["--search-hint", ",".join(_number(v) for v in search["hint"])]
    return argv


def trace_flags(trace: dict[str, Any]) -> list[str]:
    """llm-perf's trace replay flags for the `trace` option: {path, format, speed (a number or a list), block_size}."""
    speeds = trace.get("speed", 1)
    argv = ["--trace", str(trace["path"]), "--trace-format", trace.get("format") or "auto"]
    argv += ["--replay-speed", ",".join(_number(s) for s in (speeds if isinstance(speeds, list) else [speeds]))]
    if trace.get("block_size") is not None:
        argv += ["--trace-block-size", str(trace["block_size"])]
    return argv


def conversation_flags(conversations: dict[str, Any]) -> list[str]:
    """llm-perf's conversation flags for the `conversations` option: {path, history, think_time_ms,
    think_time_std_ms}."""
    argv = ["--conversations", str(conversations["path"]), "--history", conversations.get("history") or "served"]
    mean, std = conversations.get("think_time_ms") or 0, conversations.get("think_time_std_ms") or 0
    return [*argv, "--think-time-ms", f"{_number(mean)},{_number(std)}"]


def synthetic_flags(synthetic: dict[str, Any]) -> list[str]:
    """llm-perf's synthetic prompt flags for the `synthetic` option: {input, output, lengths_from, count}."""
    flags = {"input": "--synthetic-input-tokens", "output": "--synthetic-output-tokens",
             "lengths_from": "--synthetic-lengths-from", "count": "--num-prompts"}  # fmt: skip
    return [arg for key, flag in flags.items() if synthetic.get(key) is not None for arg in (flag, str(synthetic[key]))]


def command(params: dict[str, Any]) -> list[str]:
    argv = [sys.executable, "-m", "trtsweep.perf.cli"]
    for option, flag in FLAGS.items():
        if params.get(option) is not None:
            argv += [flag, str(params[option])]
    if params.get("gpu_telemetry"):  # the point's GPUs, sampled through NVML during each level
        argv += ["--gpu-telemetry", ",".join(str(g) for g in params["gpu_telemetry"])]
        if params.get("gpu_owner_pids"):  # the servers' process roots: anything else on the GPUs is named
            argv += ["--gpu-owner-pids", ",".join(str(p) for p in params["gpu_owner_pids"])]
    if params.get("shared_prefix"):
        prefix = params["shared_prefix"]
        argv += ["--shared-prefix-count", str(prefix["count"]), "--shared-prefix-tokens", str(prefix["tokens"])]
    if params.get("conversations"):
        argv += conversation_flags(params["conversations"])
    if params.get("synthetic"):
        argv += synthetic_flags(params["synthetic"])
    if params.get("search"):  # the search picks its levels: llm-perf refuses a --concurrency list beside it
        argv += search_flags(params["search"])
    elif params.get("trace"):  # a replay's levels are its speeds
        argv += trace_flags(params["trace"])
    else:
        argv += ["--concurrency", ",".join(str(c) for c in params["concurrency"])]
    argv.append("--streaming" if params["streaming"] else "--no-streaming")
    if params["chat_template"]:
        argv.append("--chat-template")
    if params["extra_inputs"]:
        argv += ["--extra-inputs-json", json.dumps(params["extra_inputs"], sort_keys=True)]
    return argv
