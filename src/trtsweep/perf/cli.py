"""`llm-perf`: benchmark an LLM server with your own prompts (see docs/llm-perf.md)."""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
from pathlib import Path
from typing import Any

from trtsweep.common.gpus import Gpu
from trtsweep.errors import TrtsweepError
from trtsweep.perf import export
from trtsweep.perf.benchmark import BenchmarkConfig, LevelReport, run
from trtsweep.perf.conversations import HISTORIES, ConversationSpec
from trtsweep.perf.dataset import (
    DEFAULT_OUTPUT,
    DEFAULT_PROMPTS,
    LENGTH_FORMS,
    Lengths,
    SyntheticSpec,
    parse_lengths,
)
from trtsweep.perf.protocols import Endpoint
from trtsweep.perf.runner import Level
from trtsweep.perf.search import VARIABLES, Search, SearchSpec, check_slo
from trtsweep.perf.telemetry import parse_gpus
from trtsweep.perf.workloads import DEFAULT_BLOCK_SIZE, FORMATS, TraceSpec


def int_list(text: str) -> list[int]:
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from exc
    if not values or any(v < 1 for v in values):
        raise argparse.ArgumentTypeError(f"expected positive integers, got {text!r}")
    return values


def count(minimum: int) -> Any:
    """An argparse type: an integer >= `minimum`."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from exc
        if value < minimum:
            raise argparse.ArgumentTypeError(f"expected an integer >= {minimum}, got {text!r}")
        return value

    return parse


def gpu_indices(text: str) -> list[Gpu]:
    """An argparse type: --gpu-telemetry's GPU indices or UUIDs."""
    try:
        return parse_gpus(text)
    except TrtsweepError as exc:
        raise argparse.ArgumentTypeError(str(exc).removeprefix("--gpu-telemetry: ")) from exc


def process_ids(text: str) -> list[int]:
    """An argparse type: --gpu-owner-pids's process ids ("1234,5678")."""
    try:
        pids = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        pids = []
    if not pids or any(pid <= 0 for pid in pids):
        raise argparse.ArgumentTypeError(f"expected process ids like 1234,5678; got {text!r}")
    return pids


def seconds(zero_allowed: bool) -> Any:
    """An argparse type: a number of seconds > 0 (>= 0 when `zero_allowed`)."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(f"expected a number of seconds, got {text!r}") from exc
        if not value >= 0 or value == float("inf") or (value == 0 and not zero_allowed):
            raise argparse.ArgumentTypeError(
                f"expected a number of seconds {'>=' if zero_allowed else '>'} 0, got {text!r}"
            )
        return value

    return parse


def float_list(text: str) -> list[float]:
    try:
        values = [float(v) for v in text.split(",") if v.strip()]
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"expected comma-separated numbers, got {text!r}") from exc
    if not values or any(v <= 0 for v in values):
        raise argparse.ArgumentTypeError(f"expected positive numbers, got {text!r}")
    return values


UNITS = {"ms": 1e-3, "s": 1.0, "us": 1e-6}


def slo_spec(text: str) -> dict[str, float]:
    """ "ttft=500ms,tpot=50ms,e2e=2s" -> seconds per metric."""
    out = {}
    for item in filter(None, (p.strip() for p in text.split(","))):
        name, _, value = item.partition("=")
        match = re.fullmatch(r"([0-9.]+)\s*(ms|s|us)?", value.strip())
        if name not in ("ttft", "tpot", "e2e") or not match:
            raise argparse.ArgumentTypeError(f"expected ttft|tpot|e2e=<number>[ms|s|us], got {item!r}")
        out[name] = float(match.group(1)) * UNITS[match.group(2) or "ms"]
    return out


def search_slo(text: str) -> dict[str, float]:
    """ "ttft_p99_ms=1000,min_success_rate=0.99" -> the SLO as a sweep's `slo:` writes it."""
    out = {}
    for item in filter(None, (p.strip() for p in text.split(","))):
        key, _, value = item.partition("=")
        try:
            out[key.strip()] = float(value)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected key=number, got {item!r}") from None
    try:
        return check_slo(out)
    except TrtsweepError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def hint(text: str) -> tuple[float, float]:
    """ "24,25" -> (24.0, 25.0): --search-hint's two levels (checked against the search by SearchSpec)."""
    values = float_list(text)
    if len(values) != 2:
        raise argparse.ArgumentTypeError(f"expected MET,FAILED (two numbers), got {text!r}")
    return values[0], values[1]


def positive(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"expected a number > 0, got {text!r}")
    return value


def lengths(text: str) -> Lengths:
    """An argparse type: a token-length distribution (dataset.LENGTH_FORMS)."""
    try:
        return parse_lengths(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def think_time(text: str) -> tuple[float, float]:
    """ "MEAN[,STD]" milliseconds, both >= 0."""
    try:
        values = [float(v) for v in text.split(",")]
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"expected MEAN[,STD] milliseconds, got {text!r}") from exc
    if len(values) not in (1, 2) or not all(0 <= v < float("inf") for v in values):
        raise argparse.ArgumentTypeError(f"expected MEAN>=0[,STD>=0] milliseconds, got {text!r}")
    return values[0], values[1] if len(values) == 2 else 0.0


IGNORE_EOS_END_ID = 1 << 20  # never produced: generation runs to max_tokens (as SGLang's trt backend does)


def _value(text: str) -> Any:
    lowered = text.lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    for cast in (int, float):
        try:
            return cast(text)
        except ValueError:
            pass
    return text


def extra_inputs(text: str) -> dict[str, Any]:
    out = {}
    for item in filter(None, (p.strip() for p in text.split(","))):
        name, sep, value = item.partition(":")
        if not sep or not name:
            raise argparse.ArgumentTypeError(f"expected name:value pairs, got {item!r}")
        out[name] = _value(value)
    return out


def extra_inputs_json(text: str) -> dict[str, Any]:
    """A JSON object of input name -> a scalar or a non-empty list of scalars of one type."""
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"not JSON: {exc}") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError(f"expected a JSON object of input name -> value, got {text!r}")
    for name, item in value.items():
        items = item if isinstance(item, list) else [item]
        scalars = all(isinstance(i, str | int | float | bool) for i in items)
        if not items or not scalars or len({type(i) for i in items}) > 1:
            raise argparse.ArgumentTypeError(f"{name}: expected a scalar or a non-empty list of one type, got {item!r}")
    return value


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="llm-perf",
        description=__doc__,
        epilog="llm-perf selftest --help: how far this machine's client can be trusted",
    )
    p.add_argument("-u", "--url", default="localhost:8001", help="server address, e.g. localhost:8001 (gRPC)")
    p.add_argument("-i", "--protocol", default="grpc", help="grpc or http (Triton), or openai")
    p.add_argument(
        "--endpoint",
        choices=["chat", "completions"],
        default="chat",
        help="openai: /v1/chat/completions (messages) or /v1/completions (prompt)",
    )
    p.add_argument("-m", "--model", required=True, help="Triton model name, e.g. ensemble")
    load = p.add_mutually_exclusive_group()
    load.add_argument("--concurrency", type=int_list, help="closed-loop concurrency levels, e.g. 1,4,8 (default 1)")
    load.add_argument("--request-rate", type=float_list, help="open-loop request rates per second, e.g. 2,4,8")
    p.add_argument(
        "--arrival",
        choices=["poisson", "constant", "gamma"],
        default="poisson",
        help="open loop: arrival process (gamma shape = --burstiness)",
    )
    p.add_argument("--burstiness", type=float, default=1.0, help="open loop, gamma arrivals: <1 burstier, >1 smoother")
    p.add_argument("--max-concurrency", type=int, help="open loop: cap on requests in flight")
    p.add_argument("--duration", type=float, help="seconds per level instead of --num-requests")
    p.add_argument(
        "--search", choices=["slo"],
        help="slo: instead of listed levels, search the largest load whose level meets every --search-slo limit "
        "(the synchronous level, the saturating one, then bisection); the result is the summary's 'search' object",
    )  # fmt: skip
    p.add_argument("--search-variable", choices=VARIABLES, help="--search: the load to search (default concurrency)")
    p.add_argument(
        "--search-slo", type=search_slo, metavar="KEY=VALUE,...",
        help="--search: limits a level must meet, keys of a sweep's slo: ttft_p99_ms, tpot_p99_ms, e2e_p99_ms "
        "(p99 upper bounds, ms), min_success_rate (succeeded / requests), e.g. ttft_p99_ms=1000,min_success_rate=0.99",
    )  # fmt: skip
    p.add_argument(
        "--search-max", type=positive, metavar="N",
        help="--search: the saturating end, the highest concurrency (default 64) or request rate (req/s; required) "
        "to try; a request-rate search starts at N/64",
    )  # fmt: skip
    p.add_argument("--search-max-levels", type=count(2), metavar="N", help="--search: levels to measure at most "
                   "(default 8)")  # fmt: skip
    p.add_argument("--search-hint", type=hint, metavar="MET,FAILED", help="--search: an earlier search's "
                   "capacity and the level above it that failed, measured first (two levels if they still bracket "
                   "it)")  # fmt: skip
    p.add_argument("--slo", type=slo_spec, default={}, help="goodput SLOs, e.g. ttft=500ms,tpot=50ms,e2e=2s")
    p.add_argument("--input-data", type=Path, help="jsonl prompts ({'input': ..., 'output': ...})")
    p.add_argument("--synthetic-input-tokens", type=lengths, metavar="DIST", help="no --input-data: prompt tokens "
                   f"of synthetic prompts, DIST: {LENGTH_FORMS}")  # fmt: skip
    p.add_argument("--synthetic-output-tokens", type=lengths, metavar="DIST", help="their output tokens (default "
                   f"{DEFAULT_OUTPUT})")  # fmt: skip
    p.add_argument("--synthetic-lengths-from", type=Path, metavar="FILE", help="synthetic prompts with the (input, "
                   "output) token counts of this prompts file's records ({'input': ..., 'output': ...}), drawn with "
                   "--seed; instead of --synthetic-input-tokens")  # fmt: skip
    p.add_argument("--num-prompts", type=count(1), help=f"synthetic prompts to generate (default {DEFAULT_PROMPTS}; "
                   "with --synthetic-lengths-from, one per record)")  # fmt: skip
    p.add_argument(
        "--shared-prefix-count", type=count(1), metavar="N",
        help="N prefixes shared by the requests (record i gets prefix i mod N before its own text; chat records as "
        "their system message); needs --shared-prefix-tokens and --tokenizer-path",
    )  # fmt: skip
    p.add_argument("--shared-prefix-tokens", type=count(1), metavar="T",
                   help="tokens of each shared prefix, with the model's tokenizer")  # fmt: skip
    p.add_argument(
        "--trace", type=Path, metavar="FILE",
        help="replay a trace instead of levels: Mooncake JSON lines {timestamp (ms), input_length, output_length, "
        "hash_ids} or an Azure LLM inference CSV (TIMESTAMP, ContextTokens, GeneratedTokens); needs --tokenizer-path",
    )  # fmt: skip
    p.add_argument("--trace-format", choices=FORMATS, default="auto",
                   help="--trace: auto (.csv: azure, else mooncake), mooncake or azure")  # fmt: skip
    p.add_argument(
        "--replay-speed", type=float_list, metavar="X[,Y...]",
        help="--trace: time scale, a level each (2: twice as fast, 0.5: half; default 1, the trace's own times)",
    )  # fmt: skip
    p.add_argument("--trace-block-size", type=count(1), metavar="TOKENS",
                   help=f"--trace mooncake: tokens per hash id (default {DEFAULT_BLOCK_SIZE})")  # fmt: skip
    p.add_argument(
        "--conversations", type=Path, metavar="FILE",
        help="multi-turn conversations instead of prompts, JSON lines: {conversation: [{user, reference}, ...], "
        "system} or {messages: [...]}; each turn sent with its history after the answer before it; --concurrency: "
        "conversations in flight; --num-requests / --warmup-requests: conversations per level",
    )  # fmt: skip
    p.add_argument("--history", choices=HISTORIES,
                   help="--conversations: the answers in a turn's history, the server's own (served, the default) or "
                   "the recorded references (recorded)")  # fmt: skip
    p.add_argument("--think-time-ms", type=think_time, metavar="MEAN[,STD]",
                   help="--conversations: delay between a turn's answer and the next turn, normal (clipped at 0), "
                   "drawn per conversation with --seed (default 0)")  # fmt: skip
    p.add_argument(
        "--ignore-eos",
        action="store_true",
        help="generate the full budget: end_id out of vocabulary (Triton), ignore_eos (OpenAI servers)",
    )
    p.add_argument("--tokenizer-path", help="HF tokenizer (directory or repo id) for token counts")
    p.add_argument("--profile-export-file", type=Path, help="JSON export of every request (+ .csv, .summary.json)")
    p.add_argument("--num-requests", type=count(1), help="measured requests per level (default: one per record)")
    p.add_argument("--warmup-requests", type=count(0), default=1, help="requests per level excluded from the numbers")
    p.add_argument("--max-tokens", type=count(1), help="fixed output budget (default: reference token count)")
    p.add_argument("--streaming", action=argparse.BooleanOptionalAction, default=True)
    p.add_argument("--chat-template", action="store_true", help="wrap inputs with the tokenizer's chat template")
    p.add_argument("--extra-inputs", type=extra_inputs, default={}, help="extra request inputs, e.g. top_k:1")
    p.add_argument(
        "--extra-inputs-json", type=extra_inputs_json, default={}, metavar="JSON",
        help="extra request inputs as a JSON object, lists included, over --extra-inputs, e.g. "
        "'{\"stop_words\": [\" France\"], \"embedding_bias_words\": [\"Paris\"], \"embedding_bias_weights\": [-5.0]}'",
    )  # fmt: skip
    p.add_argument("--scorer", help="extra accuracy scorer 'module:function' (prediction, reference) -> float")
    p.add_argument(
        "--server-metrics-url",
        help="server metrics of each level: a Prometheus endpoint scraped before/after it, e.g. "
        "http://localhost:8002/metrics (Triton), or trtllm-serve's /metrics (JSON iteration stats, read during it)",
    )
    p.add_argument(
        "--gpu-telemetry", type=gpu_indices, default=[], metavar="GPUS",
        help="GPUs of this host (nvidia-smi indices, e.g. 0,1, or UUIDs) sampled through NVML during each level: "
        "utilization, peak memory, power, energy, SM clock (the summary's gpu_telemetry; none without NVML, said once)",
    )  # fmt: skip
    p.add_argument(
        "--gpu-telemetry-interval", type=seconds(False), default=0.5, metavar="S", help="seconds between GPU samples"
    )
    p.add_argument(
        "--gpu-owner-pids", type=process_ids, default=[], metavar="PIDS",
        help="with --gpu-telemetry: the servers' process roots (e.g. 1234); any other compute process seen on the GPUs "
        "during a level is named in its gpu_telemetry.foreign_processes (the level was measured on shared GPUs)",
    )  # fmt: skip
    p.add_argument("--seed", type=int, default=0, help="seed of the request order")
    p.add_argument(
        "--workers", type=count(1), metavar="N",
        help="processes that send each level, each with its own event loop and connections (default: what the load "
        "needs, at most the cores less one; 1: this process alone)",
    )  # fmt: skip
    p.add_argument("--connect-timeout", type=seconds(False), default=10.0, help="seconds to reach the server")
    p.add_argument("--request-timeout", type=seconds(False), default=600.0, help="seconds per request")
    p.add_argument(
        "--expect-server-id",
        metavar="ID",
        help="the server id the server must report before the first and after the last request of every level "
        "(grpc/http: Triton's tritonserver --id; openai: the first model id of GET /v1/models); otherwise that "
        "level fails and llm-perf exits non-zero",
    )
    p.add_argument(
        "--stall-timeout", type=seconds(True), default=60.0,
        help="streaming: seconds to wait for the next chunk (the first included) before the request fails as a "
        "timeout; 0 turns it off",
    )  # fmt: skip
    return p


# --search's options (argparse dest) -> SearchSpec fields
SEARCH_OPTIONS = {"search_variable": "variable", "search_slo": "slo", "search_max": "maximum",
                  "search_max_levels": "max_levels", "search_hint": "hint"}  # fmt: skip


def progress_line(level: Level, count: int, conversations: bool) -> str:
    """The live count of a level: its requests so far of all it sends; with --conversations a level's size counts
    conversations and each request is one turn, so turns so far of that many conversations."""
    size = level.warmup_requests + level.num_requests if not level.duration_s else None
    if conversations:
        return f"{level.label}: {count} turns" + (f" of {size} conversations" if size is not None else "")
    return f"{level.label}: {count}/{size if size is not None else '?'} requests"


def search_from_args(args: argparse.Namespace) -> SearchSpec | None:
    """--search and its options as the search's spec (None without --search); TrtsweepError for options that
    mean nothing together."""
    given = {dest: getattr(args, dest) for dest in SEARCH_OPTIONS if getattr(args, dest) is not None}
    if args.search is None:
        if given:
            flags = ", ".join("--" + dest.replace("_", "-") for dest in given)
            raise TrtsweepError(f"{flags}: only with --search slo")
        return None
    spec = {SEARCH_OPTIONS[dest]: value for dest, value in given.items()}
    if spec.get("variable") == "request_rate" and "maximum" not in spec:
        raise TrtsweepError("--search-variable request_rate needs --search-max (the highest request rate to try)")
    if spec.get("variable", "concurrency") == "concurrency" and spec.get("maximum", 0.5).is_integer():
        spec["maximum"] = int(spec["maximum"])  # a concurrency: 8, not 8.0, in the exports
        if spec.get("hint") and all(v.is_integer() for v in spec["hint"]):
            spec["hint"] = tuple(int(v) for v in spec["hint"])
    return SearchSpec(**spec)


def shared_prefix_from_args(args: argparse.Namespace) -> tuple[int, int] | None:
    """(count, tokens) of --shared-prefix-count / --shared-prefix-tokens, given together (None without)."""
    given = (args.shared_prefix_count, args.shared_prefix_tokens)
    if given == (None, None):
        return None
    if None in given:
        raise TrtsweepError("--shared-prefix-count and --shared-prefix-tokens go together")
    return args.shared_prefix_count, args.shared_prefix_tokens


def trace_from_args(args: argparse.Namespace) -> TraceSpec | None:
    """--trace and its options (TrtsweepError for a trace option without --trace)."""
    options = {"--trace-format": args.trace_format != "auto", "--replay-speed": args.replay_speed is not None,
               "--trace-block-size": args.trace_block_size is not None}  # fmt: skip
    if args.trace is None:
        if any(options.values()):
            raise TrtsweepError(f"{', '.join(f for f, given in options.items() if given)}: only with --trace")
        return None
    return TraceSpec(args.trace, args.trace_format, args.trace_block_size or DEFAULT_BLOCK_SIZE,
                     tuple(args.replay_speed or (1.0,)))  # fmt: skip


def conversations_from_args(args: argparse.Namespace) -> ConversationSpec | None:
    """--conversations and its options (TrtsweepError for one of its options without it)."""
    if args.conversations is None:
        given = [flag for flag, value in (("--history", args.history), ("--think-time-ms", args.think_time_ms))
                 if value is not None]  # fmt: skip
        if given:
            raise TrtsweepError(f"{', '.join(given)}: only with --conversations")
        return None
    return ConversationSpec(args.conversations, args.history or "served", args.think_time_ms or (0.0, 0.0))


def synthetic_from_args(args: argparse.Namespace) -> SyntheticSpec | None:
    """Synthetic prompts' count and lengths (None without --synthetic-input-tokens or --synthetic-lengths-from)."""
    if args.synthetic_lengths_from is not None:
        flags = {"--synthetic-input-tokens": args.synthetic_input_tokens,
                 "--synthetic-output-tokens": args.synthetic_output_tokens}  # fmt: skip
        given = [flag for flag, value in flags.items() if value is not None]
        if given:
            raise TrtsweepError(f"{', '.join(given)}: not with --synthetic-lengths-from, which takes both lengths "
                                "from its records")  # fmt: skip
        return SyntheticSpec(args.num_prompts, None, None, args.synthetic_lengths_from)
    if args.synthetic_input_tokens is None:
        return None
    output = args.synthetic_output_tokens or DEFAULT_OUTPUT
    return SyntheticSpec(args.num_prompts, args.synthetic_input_tokens, output)


def config_from_args(args: argparse.Namespace) -> BenchmarkConfig:
    extra = {**args.extra_inputs, **args.extra_inputs_json}
    if args.ignore_eos:
        extra.setdefault(*(("ignore_eos", True) if args.protocol == "openai" else ("end_id", IGNORE_EOS_END_ID)))
    endpoint = Endpoint(
        url=args.url,
        model=args.model,
        streaming=args.streaming,
        connect_timeout_s=args.connect_timeout,
        request_timeout_s=args.request_timeout,
        stall_timeout_s=args.stall_timeout or None,
        extra_inputs=extra,
        openai_endpoint=args.endpoint,
    )
    return BenchmarkConfig(
        endpoint=endpoint,
        protocol=args.protocol,
        input_data=args.input_data,
        concurrency=args.concurrency or ([] if args.request_rate or args.search or args.trace else [1]),
        request_rate=args.request_rate or [],
        arrival=args.arrival,
        burstiness=args.burstiness,
        max_concurrency=args.max_concurrency,
        duration_s=args.duration,
        slo=args.slo,
        tokenizer_path=args.tokenizer_path,
        num_requests=args.num_requests,
        warmup_requests=args.warmup_requests,
        max_tokens=args.max_tokens,
        chat_template=args.chat_template,
        seed=args.seed,
        export_file=args.profile_export_file,
        scorer=args.scorer,
        server_metrics_url=args.server_metrics_url,
        gpu_telemetry=args.gpu_telemetry,
        gpu_telemetry_interval_s=args.gpu_telemetry_interval,
        gpu_owner_pids=args.gpu_owner_pids,
        expect_server_id=args.expect_server_id,
        search=search_from_args(args),
        workers=args.workers,
        shared_prefix=shared_prefix_from_args(args),
        trace=trace_from_args(args),
        conversations=conversations_from_args(args),
        synthetic=synthetic_from_args(args),
    )


def selftest(argv: list[str]) -> int:
    from trtsweep.perf import selftest as st

    p = argparse.ArgumentParser(prog="llm-perf selftest", description=st.__doc__)
    p.add_argument("--concurrency", type=int_list, default=[1, 8, 64, 256], help="capacity levels")
    p.add_argument("--duration", type=float, default=3.0, help="seconds per capacity level")
    args = p.parse_args(argv)
    try:
        print(st.main(args.concurrency, args.duration))
    except TrtsweepError as exc:
        print(f"llm-perf: error: {exc}", file=sys.stderr)
        return 2
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["selftest"]:
        return selftest(argv[1:])
    args = parser().parse_args(argv)
    rows: list[dict[str, Any]] = []

    def show(report: LevelReport) -> None:
        # the console table labels a rate level by its rate, which the CSV row does not carry
        rows.append({**export.headline(export.level_info(report.level), report.summary),
                     "request_rate": report.level.request_rate, "replay_speed": report.level.replay_speed})  # fmt: skip
        summary = report.summary
        print(f"\r{report.level.label}: {summary.get('succeeded', 0)}/{summary.get('requests', 0)} ok", file=sys.stderr)
        if summary.get("stopped_early"):
            print(f"llm-perf: {report.level.label}: stopped early: {summary['stopped_early']}", file=sys.stderr)
        for warning in summary.get("warnings", []):
            print(f"llm-perf: warning: {report.level.label}: {warning}", file=sys.stderr)
        abandoned = summary.get("abandoned") or {}
        if abandoned:
            causes = ", ".join(f"{n} {cause}" for cause, n in sorted(abandoned.items()))
            print(f"llm-perf: {report.level.label}: {sum(abandoned.values())} requests abandoned ({causes}),"
                  " each cancelled on the wire (gRPC cancel / closed HTTP stream)", file=sys.stderr)  # fmt: skip
        unsent = summary.get("not_sent") or {}
        if unsent:
            causes = ", ".join(f"{n} after a {cause}" for cause, n in sorted(unsent.items()))
            print(f"llm-perf: {report.level.label}: {sum(unsent.values())} turns not sent ({causes}): an earlier turn"
                  " of their conversation failed; counted as failed requests", file=sys.stderr)  # fmt: skip
        records = summary.get("accuracy_records", {})
        if records.get("empty_reference") or records.get("scorer_failed"):
            print(f"llm-perf: {report.level.label}: accuracy over {records.get('scored', 0)} requests; left out:"
                  f" {records.get('empty_reference', 0)} with an empty reference; scorer failed on"
                  f" {records.get('scorer_failed', 0)} (see scorer_error in the profile)", file=sys.stderr)  # fmt: skip

    last = [0.0]

    def progress(report: LevelReport) -> None:  # a live count, on a terminal only
        now = time.monotonic()
        if now - last[0] > 0.1:
            last[0] = now
            line = progress_line(report.level, report.count, config.conversations is not None)
            print(f"\r{line}", end="", file=sys.stderr, flush=True)

    search: Search | None = None
    try:
        config = config_from_args(args)
        search = Search(config.search) if config.search else None
        reports = run(config, show, progress if sys.stderr.isatty() else None, search)
        # a search's higher levels may fail entirely (a finding); its first level must measure something
        checked = reports[:1] if search else reports
        empty = export.unmeasured([{**export.level_info(r.level), "summary": r.summary} for r in checked])
        if empty:
            print(f"llm-perf: error: {empty}; what was measured is written", file=sys.stderr)
            return 3
    except TrtsweepError as exc:
        print(f"llm-perf: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("llm-perf: interrupted; partial results written", file=sys.stderr)
        return 130
    finally:
        if rows:
            print(export.table(rows))
        for line in search.lines() if search is not None and search.steps else ():
            print(line)
    return 0


def entry() -> int:
    """The llm-perf command, a process of its own. Its tokenizer needs no transformers where the model has a
    tokenizer.json (perf/tokenizer.py); for one without, torch is hidden from transformers first (it imports torch
    wherever it is installed; a tokenizer needs none of it: seconds of CPU a benchmark), and its advice that PyTorch
    was not found with it."""
    sys.modules.setdefault("torch", None)
    os.environ.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")
    return main()


if __name__ == "__main__":
    sys.exit(entry())
