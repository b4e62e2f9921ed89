"""One benchmark run: prepare requests from the data set, run every level (or the levels an SLO capacity search
picks, one after another), export as it goes.

This is the library entry point shared by the `llm-perf` CLI and the `trtsweep_llm_perf` Ansible module.
"""

from __future__ import annotations

import asyncio
import itertools
import signal
import sys
import tempfile
import time
from collections.abc import Callable
from contextlib import ExitStack
from functools import partial
from pathlib import Path
from typing import Any

import aiohttp

from trtsweep.errors import TrtsweepError
from trtsweep.perf import export, server_metrics
from trtsweep.perf.accuracy import Scoring, usable_reference
from trtsweep.perf.conversations import ConversationRun, ConversationStats, load_conversations, turn_records
from trtsweep.perf.dataset import Record, load_jsonl, synthetic
from trtsweep.perf.levels import BenchmarkConfig, LevelReport
from trtsweep.perf.metrics import LevelStats, TokenCount, request_metrics
from trtsweep.perf.protocols import Protocol, make_protocol
from trtsweep.perf.protocols.base import PreparedRequest, RequestResult
from trtsweep.perf.runner import ClientHealth, Level, describe, request_order, run_level
from trtsweep.perf.search import EarlyStop, Search
from trtsweep.perf.spool import RequestLog, Spool
from trtsweep.perf.telemetry import Sampler, nvml_sampler
from trtsweep.perf.tokenizer import Tokenizer
from trtsweep.perf.tokenizer import load as load_tokenizer
from trtsweep.perf.workers import Outcome, Pool, cores, level_workers, outcome
from trtsweep.perf.workloads import load_trace, trace_order, trace_records, with_shared_prefix

DEFAULT_MAX_TOKENS = 128
SCORE_BATCH = 8192  # requests read back from the spool and scored together (in parallel when many)
IDENTITY_PHASES = {"before": "before the first request", "after": "after the last request"}


class IdentityCheck:
    """--expect-server-id: the server's metadata must name the expected id before a level's first request and
    after its last one; otherwise the level fails (and the run stops) with `error`."""

    def __init__(self, protocol: Protocol, expected: str) -> None:
        self.protocol, self.expected = protocol, expected
        self.seen: dict[str, str | None] = {}
        self.error: str | None = None

    async def check(self, phase: str, label: str) -> bool:
        """Ask the server for its id `phase` ("before" or "after") the level `label`; False on a mismatch."""
        where = f"{IDENTITY_PHASES[phase]} of {label}"
        try:
            actual: str | None = await self.protocol.server_id()
        except Exception as exc:  # whatever the cause, the server no longer identifies itself
            actual = None
            self.error = (
                f"the server at {self.protocol.endpoint.url} no longer answers server metadata {where}: {describe(exc)}"
            )
        else:
            if actual != self.expected:
                self.error = (
                    f"the server at {self.protocol.endpoint.url} is {actual!r}, not the expected "
                    f"{self.expected!r} (--expect-server-id), {where}: its numbers are not this server's"
                )
        self.seen[phase] = actual
        return self.error is None

    def summary(self) -> dict[str, Any]:
        return {"expected": self.expected, **self.seen, **({"error": self.error} if self.error else {})}


def prepare(records: list[Record], config: BenchmarkConfig, tokenizer: Tokenizer | None) -> list[PreparedRequest]:
    requests = []
    for record in records:
        chat_endpoint = config.protocol == "openai" and config.endpoint.openai_endpoint == "chat"
        if config.chat_template or (chat_endpoint and tokenizer is not None):
            # OpenAI chat endpoints template server-side; the local rendering only counts input tokens
            if tokenizer is None:
                raise TrtsweepError("--chat-template needs --tokenizer-path")
            prompt = tokenizer.chat(record.as_messages())
        elif record.input is not None:
            prompt = record.input
        elif chat_endpoint:  # messages go as they are; no tokenizer, so no input token count either
            prompt = "\n".join(m["content"] for m in record.as_messages())
        else:
            raise TrtsweepError(f"record {record.index + 1} has only 'messages': use --chat-template")
        budget = output_budget(record, config, tokenizer)
        requests.append(PreparedRequest(record.index, prompt, budget, record.as_messages(), record.prefix_tokens))
    return requests


def output_budget(record: Record, config: BenchmarkConfig, tokenizer: Tokenizer | None) -> int:
    """A request's output budget: --max-tokens, else the record's max_tokens, else its reference's token count, else
    DEFAULT_MAX_TOKENS."""
    if config.max_tokens is not None:
        return config.max_tokens
    if record.max_tokens is not None:
        return record.max_tokens
    if record.reference is not None and tokenizer is not None:
        return max(1, tokenizer.count(record.reference))
    return DEFAULT_MAX_TOKENS


def conversation_run(config: BenchmarkConfig, tokenizer: Tokenizer | None) -> tuple[ConversationRun, list[Record]]:
    """--conversations: the run that sends them, and one record per turn (flat, conversation after conversation)."""
    assert config.conversations is not None
    conversations = load_conversations(config.conversations.path, config.conversations.history)
    records = turn_records(conversations)
    chat = config.protocol == "openai" and config.endpoint.openai_endpoint == "chat"
    budgets = [output_budget(record, config, tokenizer) for record in records]
    render = tokenizer.chat if tokenizer is not None else None
    return ConversationRun(conversations, budgets, config.conversations, config.seed, render, chat), records


def load_records(config: BenchmarkConfig, tokenizer: Tokenizer | None) -> tuple[list[Record], list[float] | None]:
    """The data set's records, with their shared prefixes; a trace's also its rows' times (None otherwise)."""
    if config.trace is not None:
        if tokenizer is None:
            raise TrtsweepError("--trace makes prompts of the trace's token lengths: give --tokenizer-path")
        rows = load_trace(config.trace)
        return trace_records(rows, tokenizer, config.trace.block_size, config.seed), [r.time_s for r in rows]
    if config.input_data is not None:
        records = load_jsonl(config.input_data)
    elif config.synthetic is not None and tokenizer is not None:
        records = synthetic(tokenizer, *config.synthetic, seed=config.seed)
    else:
        raise TrtsweepError("give --input-data, or synthetic prompts (--synthetic-input-tokens) with --tokenizer-path")
    if config.shared_prefix is not None:
        if tokenizer is None:
            raise TrtsweepError("--shared-prefix-tokens counts the model's tokens: give --tokenizer-path")
        records = with_shared_prefix(records, tokenizer, *config.shared_prefix, seed=config.seed)
    return records, None


class PrefixShare:
    """A level's shared-prefix tokens over its input tokens, both counted by the tokenizer that made the prefixes
    (successful measured requests): how much of what was sent a prefix cache could have held. Each prompt is counted
    once per run (`counts`, by record), whatever the server reports."""

    def __init__(self, count: TokenCount, counts: dict[int, int]) -> None:
        self.count, self.counts = count, counts
        self.prefix = self.input = 0

    def add(self, result: RequestResult, request: PreparedRequest) -> None:
        if result.ok and not result.warmup:
            if request.record_index not in self.counts:
                self.counts[request.record_index] = self.count(request.prompt)
            self.prefix += request.prefix_tokens
            self.input += self.counts[request.record_index]

    def summary(self) -> dict[str, Any]:
        return {"prefix_tokens_total": self.prefix, "prefix_share": self.prefix / self.input if self.input else None}


def gpu_sampler(config: BenchmarkConfig) -> Sampler | None:
    """The sampler of --gpu-telemetry's GPUs (None without any; without NVML it says so once and measures on)."""
    if not config.gpu_telemetry:
        return None
    sampler, why = nvml_sampler(config.gpu_telemetry, config.gpu_telemetry_interval_s, config.gpu_owner_pids)
    if sampler is None:
        print(f"llm-perf: no GPU telemetry: {why}", file=sys.stderr, flush=True)
    return sampler


def run(
    config: BenchmarkConfig,
    on_level: Callable[[LevelReport], None] | None = None,
    on_result: Callable[[LevelReport], None] | None = None,
    search: Search | None = None,
) -> list[LevelReport]:
    """Run every level, or with `config.search` the levels the SLO search picks (`search`, for a caller that reads
    its outcome; made here when not given); exports are rewritten (atomically) after each level and on interrupt."""
    config.levels(1)  # load options are checked before any file is read
    if config.search is not None and search is None:
        search = Search(config.search)
    tokenizer = load_tokenizer(config.tokenizer_path) if config.tokenizer_path else None
    talks: ConversationRun | None = None
    if config.conversations is not None:
        talks, records = conversation_run(config, tokenizer)
        times = None
        requests = [PreparedRequest(r.index, r.input or "", talks.budgets[r.index]) for r in records]
    else:
        records, times = load_records(config, tokenizer)
        requests = prepare(records, config, tokenizer)
    # a trace is replayed in its own order (from its first row after the warm-up); other data sets shuffled
    order = (
        trace_order(len(requests), config.warmup_requests)
        if times is not None
        else request_order(len(requests), config.seed)
    )
    prefixed = config.shared_prefix is not None or config.trace is not None
    prompt_tokens: dict[int, int] = {}  # record -> its prompt's tokens (the prefix share's denominator)
    count: TokenCount | None = tokenizer.count if tokenizer else None
    scorer = Scoring(config.scorer)
    per_level = config.num_requests or (len(talks.conversations) if talks else len(requests))
    levels = iter(config.levels(per_level, times))
    reports: list[LevelReport] = []
    started = time.time()
    work = ExitStack()
    if config.export_file:
        files = export.paths(config.export_file)
        files["profile"].parent.mkdir(parents=True, exist_ok=True)
    else:  # no export: the spool and request log live in a directory removed at the end of the run
        files = export.paths(Path(work.enter_context(tempfile.TemporaryDirectory(prefix="llm-perf-"))) / "run.json")
    log = RequestLog(files["requests"])
    work.callback(log.close)
    work.callback(scorer.close)
    origin: list[int] = []  # the run's first send (perf_counter ns): the zero of every exported time

    def next_level() -> Level | None:
        if search is None:
            return next(levels, None)
        value = search.next_value()
        return None if value is None else config.level(search.spec.variable, value, per_level)

    def finish(
        report: LevelReport,
        client: dict[str, Any] | None = None,
        server: dict[str, Any] | None = None,
        identity: IdentityCheck | None = None,
        early: EarlyStop | None = None,
        gpu: dict[str, Any] | None = None,
    ) -> None:
        """One pass over the level's spool: per-request metrics and scores into the summary's compact arrays
        and the request log; a search level (`early`: its early stop) becomes the search's next step; then the
        exports."""
        stats = LevelStats(config.slo)
        share = PrefixShare(count, prompt_tokens) if prefixed and count else None
        talked = ConversationStats(lambda c: len(talks.conversations[c].turns)) if talks else None
        if not origin and report.spool.first_sent:
            origin.append(report.spool.first_sent)
        report.log, report.index = log, len(log.ranges)
        log.begin()
        results = iter(report.spool.results())
        while batch := list(itertools.islice(results, SCORE_BATCH)):
            scoring = [i for i, r in enumerate(batch) if r.ok and usable_reference(records[r.record_index].reference)]
            pairs = [(batch[i].text, str(records[batch[i].record_index].reference)) for i in scoring]
            scored = dict(zip(scoring, scorer.map(pairs), strict=True))
            for i, r in enumerate(batch):
                request, record = requests[r.record_index], records[r.record_index]
                # a conversation's turn was sent with its history: its prompt is the one sent in this level (counted
                # for an answered turn only: a failed one has no numbers, and a turn not sent no prompt)
                prompt = request.prompt
                if talks and count and r.ok and r.server_input_tokens is None:
                    prompt = talks.prompt(r.seq)
                m = request_metrics(r, prompt, record.reference, count, scored=scored.get(i))
                stats.add(r, m)
                if share:
                    share.add(r, request)
                row = export.request_row(report.index, r, m, request.max_tokens, origin[0] if origin else 0)
                if talks and talked:
                    sent = talks.sent[r.seq]
                    talked.add(r, sent)
                    row.update(export.turn_columns(talks.conversations[sent.conversation].id, sent))
                log.write(row)
        log.end()
        report.spool.remove()
        report.summary = stats.summary()
        if share:
            report.summary.update(share.summary())
        if talked:
            report.summary["conversations"] = talked.summary()
            report.summary["not_sent"] = talked.unsent()
        if client is not None:
            report.summary["client"] = client
        if server is not None:
            report.summary["server_metrics"] = server
        if gpu is not None:
            report.summary["gpu_telemetry"] = gpu
        if identity is not None:
            report.summary["server_identity"] = identity.summary()
            if identity.error:
                report.summary["error"] = identity.error
        if search is not None and early is not None:
            if early.reason:
                report.summary["stopped_early"] = early.reason
            variable = search.spec.variable
            search.record(getattr(report.level, variable), report.summary, early.reason)
        if config.export_file:
            export.write_all(config.export_file, config, reports, records, log, started,
                             search.as_dict() if search else None)  # fmt: skip

    def record(report: LevelReport, early: EarlyStop | None, result: RequestResult) -> None:
        report.spool.add(result)
        tally(report, early, outcome(result))

    def tally(report: LevelReport, early: EarlyStop | None, done: Outcome) -> None:
        """A request finished (in this process or a worker's): count it, and a search level may stop early."""
        report.count += 1
        if early is not None and not done.warmup:
            early.add(done.ok, {"ttft": done.ttft, "e2e": done.e2e})
        if on_result:
            on_result(report)

    async def main() -> None:
        protocol = make_protocol(config.protocol, config.endpoint)
        await protocol.start()
        session = aiohttp.ClientSession() if config.server_metrics_url else None
        pool = Pool(config.protocol, config.endpoint, requests, order)
        metrics: server_metrics.LevelMetrics | None = None  # the level before's: where its KV-cache counts ended
        sampler = gpu_sampler(config)
        try:
            while (level := next_level()) is not None:
                report = LevelReport(level, Spool(files["spool"]))
                reports.append(report)
                identity = IdentityCheck(protocol, config.expect_server_id) if config.expect_server_id else None
                if identity and not await identity.check("before", level.label):
                    finish(report, identity=identity)
                    raise TrtsweepError(str(identity.error))
                url = config.server_metrics_url
                metrics = server_metrics.LevelMetrics(session, url, metrics) if session and url else None
                if metrics:
                    await metrics.start()
                if sampler:
                    sampler.start()
                early = EarlyStop(search.spec.slo, level.planned_requests) if search else None
                stop = early.stopped if early else lambda: False
                workers = 1 if talks else level_workers(level, config.workers, cores())
                async with ClientHealth() as health:
                    if talks:
                        await talks.run_level(protocol, level, partial(record, report, early), stop)
                    elif workers == 1:
                        await run_level(protocol, requests, level, config.seed, partial(record, report, early), stop,
                                        order)  # fmt: skip
                    else:
                        await pool.run_level(level, workers, report.spool, partial(tally, report, early), stop, health,
                                             config.seed)  # fmt: skip
                if metrics:  # a server may count a request a moment after its final response left
                    await asyncio.sleep(server_metrics.SETTLE_S)
                server = await metrics.finish() if metrics else None
                gpu = sampler.stop() if sampler else None
                if identity:
                    await identity.check("after", level.label)
                finish(report, health.summary(report.count), server, identity, early, gpu)
                if identity and identity.error:  # the level's numbers are written, marked with the error
                    raise TrtsweepError(identity.error)
                if on_level:
                    on_level(report)
        finally:
            pool.close()
            await protocol.close()
            if session:
                await session.close()

    with work:
        try:
            run_interruptibly(main())
        except KeyboardInterrupt:
            if reports and not reports[-1].summary:
                finish(reports[-1])
            raise
    return reports


def run_interruptibly(coro: Any) -> None:
    """asyncio.run(coro), where Ctrl-C (SIGINT) always ends it with KeyboardInterrupt. asyncio.run (3.11+) turns
    SIGINT into a cancellation of the main task and raises KeyboardInterrupt only if the task ends cancelled: a
    cancellation swallowed on the way (a client library's call that catches it) loses the Ctrl-C and the run goes on
    to its last request (seen once under CI's load: 100 of 100 requests measured, exit 0, after a Ctrl-C in the
    third second). Here SIGINT raises KeyboardInterrupt where it lands, as before 3.11, and a run that ends after
    one raises it anyway."""
    interrupted = False

    def on_sigint(signum: int, frame: object) -> None:
        nonlocal interrupted
        interrupted = True
        raise KeyboardInterrupt

    try:
        previous = signal.signal(signal.SIGINT, on_sigint)
    except ValueError:  # not the main thread: asyncio.run's own handling
        asyncio.run(coro)
        return
    try:
        asyncio.run(coro)
    finally:
        signal.signal(signal.SIGINT, previous)
    if interrupted:
        raise KeyboardInterrupt
