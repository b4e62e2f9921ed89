"""What a benchmark is asked to run (`BenchmarkConfig`: endpoint, data, load levels) and what each level gives
back (`LevelReport`): the types that the run (benchmark.py) and its result files (export.py) share."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from trtsweep.common.gpus import Gpu
from trtsweep.errors import TrtsweepError
from trtsweep.perf.conversations import ConversationSpec
from trtsweep.perf.dataset import SyntheticSpec
from trtsweep.perf.protocols import Endpoint
from trtsweep.perf.runner import TRACE, Level
from trtsweep.perf.search import SearchSpec
from trtsweep.perf.spool import RequestLog, Spool
from trtsweep.perf.workloads import TraceSpec


@dataclass
class BenchmarkConfig:
    endpoint: Endpoint
    protocol: str
    input_data: Path | None
    concurrency: list[int] = field(default_factory=list)
    request_rate: list[float] = field(default_factory=list)
    arrival: str = "poisson"
    burstiness: float = 1.0
    max_concurrency: int | None = None
    duration_s: float | None = None
    slo: dict[str, float] = field(default_factory=dict)
    tokenizer_path: str | None = None
    num_requests: int | None = None
    warmup_requests: int = 1
    max_tokens: int | None = None
    chat_template: bool = False
    seed: int = 0
    export_file: Path | None = None
    scorer: str | None = None
    server_metrics_url: str | None = None
    # --gpu-telemetry: the GPUs (NVML indices or UUIDs) sampled during each level, every gpu_telemetry_interval_s
    gpu_telemetry: list[Gpu] = field(default_factory=list)
    gpu_telemetry_interval_s: float = 0.5
    # --gpu-owner-pids: the servers' process roots; any other process on those GPUs during a level is named
    gpu_owner_pids: list[int] = field(default_factory=list)
    # synthetic prompts: their count and token lengths (distributions, or a prompts file's pairs)
    synthetic: SyntheticSpec | None = None
    # Triton protocols: the server id (`--id`) the server must report before and after every level
    expect_server_id: str | None = None
    # --search slo: the levels are chosen one by one by the SLO capacity search (`level`), not listed
    search: SearchSpec | None = None
    # worker processes per level (--workers; trtsweep.perf.workers): None chooses by the load, 1 is this process
    workers: int | None = None
    # --shared-prefix-count / --shared-prefix-tokens: (prefixes, tokens each) before every record's own text
    shared_prefix: tuple[int, int] | None = None
    # --trace: replay a trace's requests at its own times, a level per replay speed (trtsweep.perf.workloads)
    trace: TraceSpec | None = None
    # --conversations: multi-turn conversations, each turn after the answer before it (trtsweep.perf.conversations)
    conversations: ConversationSpec | None = None

    def levels(self, per_level: int, times: list[float] | None = None) -> list[Level]:
        """The load levels in order: every concurrency, then every request rate ([] for a search, whose levels
        come one at a time from `level`); a trace replay's: one per speed, of the trace's `times` (its first
        `per_level` rows)."""
        if self.trace is not None:
            return self._replays(per_level, times or [0.0])
        if self.conversations is not None:
            self._conversation_checks()
        if self.search is not None and (self.concurrency or self.request_rate):
            raise TrtsweepError("--search chooses the levels itself: give no --concurrency or --request-rate list")
        if self.search is None and bool(self.concurrency) == bool(self.request_rate):
            raise TrtsweepError("give either --concurrency or --request-rate levels (one of them)")
        if any(c < 1 for c in self.concurrency):
            raise TrtsweepError(f"--concurrency must be positive integers, got {self.concurrency}")
        if self.num_requests is not None and self.num_requests < 1:
            raise TrtsweepError(f"--num-requests must be a positive integer, got {self.num_requests}")
        if self.workers is not None and self.workers < 1:
            raise TrtsweepError(f"--workers must be a positive integer, got {self.workers}")
        if self.warmup_requests < 0:
            raise TrtsweepError(f"--warmup-requests must be >= 0, got {self.warmup_requests}")
        if self.concurrency:
            return [self.level("concurrency", c, per_level) for c in self.concurrency]
        return [self.level("request_rate", r, per_level) for r in self.request_rate]

    def _replays(self, per_level: int, times: list[float]) -> list[Level]:
        assert self.trace is not None
        if self.search is not None or self.concurrency or self.request_rate:
            raise TrtsweepError("--trace replays the trace's times: give no --concurrency, --request-rate or --search")
        if self.input_data is not None or self.synthetic is not None:
            raise TrtsweepError("--trace makes its own prompts: give no --input-data or --synthetic-* prompts")
        if self.conversations is not None:
            raise TrtsweepError("--conversations: not with --trace (a replay sends the trace's requests)")
        if self.shared_prefix is not None:
            raise TrtsweepError("--shared-prefix-*: not with --trace (a Mooncake trace's hash ids are its prefixes)")
        if self.warmup_requests < 0 or (self.num_requests is not None and self.num_requests < 1):
            raise TrtsweepError("--num-requests must be >= 1 and --warmup-requests >= 0")
        if any(speed <= 0 for speed in self.trace.speeds):
            raise TrtsweepError(f"--replay-speed must be > 0, got {list(self.trace.speeds)}")
        count = min(per_level, len(times))
        out = []
        for speed in self.trace.speeds:
            offsets = tuple(t / speed for t in times[:count])
            rate = (count - 1) / offsets[-1] if count > 1 and offsets[-1] > 0 else 1.0  # the mean, for labels
            out.append(Level(num_requests=count, request_rate=rate, arrival=TRACE, replay_speed=speed, offsets=offsets,
                             warmup_requests=self.warmup_requests, duration_s=self.duration_s,
                             max_concurrency=self.max_concurrency))  # fmt: skip
        return out

    def _conversation_checks(self) -> None:
        """What --conversations cannot go with, refused in one line each."""
        if self.request_rate or self.search is not None:
            raise TrtsweepError("--conversations runs closed loop: give --concurrency levels, no --request-rate or "
                                "--search")  # fmt: skip
        if self.input_data is not None or self.synthetic is not None or self.shared_prefix is not None:
            raise TrtsweepError("--conversations sends the conversations' turns: give no --input-data, "
                                "synthetic prompts (--synthetic-*) or --shared-prefix-*")  # fmt: skip
        if self.workers is not None and self.workers > 1:
            raise TrtsweepError(f"--workers {self.workers}: conversations are sent from llm-perf's own process "
                                "(each turn waits for the answer before it); give --workers 1 or none")  # fmt: skip

    def level(self, variable: str, value: float, per_level: int) -> Level:
        """The level of concurrency `value` or request rate `value` (`variable`), with this run's other options."""
        common = {"num_requests": per_level, "warmup_requests": self.warmup_requests, "duration_s": self.duration_s}
        if variable == "concurrency":
            return Level(concurrency=int(value), **common)
        return Level(request_rate=value, arrival=self.arrival, burstiness=self.burstiness,
                     max_concurrency=self.max_concurrency, **common)  # fmt: skip

    def as_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["input_data"] = str(self.input_data) if self.input_data else None
        out["export_file"] = str(self.export_file) if self.export_file else None
        if self.trace is not None:
            out["trace"] = {**out["trace"], "path": str(self.trace.path), "format": self.trace.resolved_format()}
        if self.conversations is not None:
            out["conversations"] = {**out["conversations"], "path": str(self.conversations.path)}
        if self.synthetic is not None:
            out["synthetic"] = self.synthetic.as_dict()
        return out

    def length_source(self) -> str | None:
        """Where synthetic prompts' lengths came from (`length_source` in the exports); None for other prompts."""
        return self.synthetic.source() if self.synthetic is not None and self.input_data is None else None


@dataclass
class LevelReport:
    """One level: its requests go to a spool on disk as they finish (`count` so far); once the level ends, its
    summary, and its request rows in the run's request log (`rows()`, read back from disk)."""

    level: Level
    spool: Spool
    count: int = 0
    summary: dict[str, Any] = field(default_factory=dict)
    log: RequestLog | None = None
    index: int = -1

    def rows(self) -> Iterator[dict[str, Any]]:
        """The level's request rows as exported (the request log must still exist: give an export file)."""
        if self.log is None:
            raise TrtsweepError(f"{self.level.label} has not been processed yet")
        return self.log.rows(self.index)
