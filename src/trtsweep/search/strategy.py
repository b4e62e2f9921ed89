"""Which configurations a search measures in each round, and how long: the decisions of a sweep's `search:`.

A configuration is one point of the sweep's matrix (its grid id); its measurement is a capacity search (the sweep's
`benchmark.load`), whose answer is the output tokens/s per GPU at the highest load within the SLOs. Strategies:

- `grid`: one round, every configuration at the full benchmark.
- `halving` (successive halving): screening rounds measure the surviving configurations with a fraction of the
  benchmark's requests per level (`screening`, doubling each round, at most half), keep the best `keep` of them
  (by tokens/s per GPU at capacity) until at most `finalists` are left, which the last round measures at the full
  benchmark. A round after the first starts each capacity search from the round before's capacity and the level
  above it that failed (`--search-hint`: two levels when they still bracket it). A configuration that failed, met
  the SLOs at no load, or is dominated (another kept one has at least its tokens/s per GPU and at most its p99
  latency at capacity on every SLO metric) is dropped whatever its rank.
- `predicted`: AIConfigurator's predictions order the configurations; each round measures the next `batch` of
  them at the full benchmark (configurations it cannot predict in the first round), until the measured best beats
  every remaining prediction by `margin`.

Every strategy stops starting rounds once the GPU-minutes spent reach `budget_gpu_minutes`. The decisions are a
pure function of the outcomes so far (`Strategy.round`), so a resumed sweep takes the same ones. Every configuration
not measured at the full benchmark gets a `Drop` saying when and on what evidence.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from trtsweep.errors import TrtsweepError
from trtsweep.perf.search import LIMITS

STRATEGIES = ("grid", "halving", "predicted")
MAX_SCREENING = 0.5  # a screening round measures at most half the benchmark's requests per level
LATENCIES = tuple(LIMITS)  # the SLO metrics dominance compares: the p99 latency limits


@dataclass(frozen=True)
class Task:
    """One configuration measured in a round: `fidelity` is the fraction of the benchmark's requests per level
    (1: the full benchmark); `hint` the (capacity, failed level) of its last screening."""

    config: str
    fidelity: float
    hint: tuple[float, float] | None = None

    @property
    def screening(self) -> bool:
        return self.fidelity < 1


@dataclass(frozen=True)
class Outcome:
    """What one round measured of one configuration (from its round point's record and rows)."""

    config: str
    round: int
    point: str
    ok: bool
    cause: str | None = None  # why not ok
    tokens_per_gpu: float | None = None  # output tok/s per GPU at capacity (None: no load met the SLOs)
    capacity_rps: float | None = None
    capacity_concurrency: float | None = None
    failed_level: float | None = None  # the lowest level above the capacity that missed the SLOs
    bound: str | None = None
    levels: int = 0
    latency: dict[str, float | None] = field(default_factory=dict)  # p99 at capacity, by SLO key
    gpu_s: float = 0.0  # GPU-seconds the point held its GPUs
    fidelity: float = 1.0

    def score(self) -> float:
        return self.tokens_per_gpu if self.ok and self.tokens_per_gpu is not None else -1.0

    def hint(self) -> tuple[float, float] | None:
        if self.capacity_concurrency is None or self.failed_level is None:
            return None
        return (self.capacity_concurrency, self.failed_level)

    def evidence(self) -> str:
        if not self.ok:
            return f"point {self.point} failed: {self.cause or 'no cause recorded'}"
        if self.tokens_per_gpu is None:
            return f"point {self.point}: no load met the SLOs"
        load = f"concurrency {self.capacity_concurrency:g}" if self.capacity_concurrency is not None else "-"
        return f"point {self.point}: {self.tokens_per_gpu:.1f} output tok/s/GPU at {load} ({self.bound})"


@dataclass(frozen=True)
class Drop:
    """A configuration not measured further: after which round, and why (with the numbers to check it by)."""

    config: str
    round: int
    why: str

    def as_dict(self) -> dict[str, Any]:
        return {"config": self.config, "round": self.round, "why": self.why}


@dataclass(frozen=True)
class SearchSpec:
    """A sweep's `search:` with its defaults."""

    strategy: str = "grid"
    keep: float = 0.5
    finalists: int = 2
    screening: float = 0.125
    margin: float = 0.1
    batch: int | None = None
    budget_gpu_minutes: float | None = None
    predictor: str = "aiconfigurator"
    model_dirs: dict[str, str] | None = None

    @classmethod
    def from_sweep(cls, value: dict[str, Any] | None) -> SearchSpec:
        spec = cls(**(value or {}))
        if spec.strategy not in STRATEGIES:
            raise TrtsweepError(f"sweep field 'search.strategy': expected one of {', '.join(STRATEGIES)}, got "
                                f"{spec.strategy!r}")  # fmt: skip
        return spec

    def screening_fidelity(self, number: int) -> float:
        """Screening round `number` (1-based): the fraction of the benchmark's requests per level."""
        return min(self.screening * 2 ** (number - 1), MAX_SCREENING)


def dominates(a: Outcome, b: Outcome) -> bool:
    """Whether `a` is at least as good as `b` on tokens/s per GPU and on every p99 latency both measured, and
    better on one of them."""
    if a.tokens_per_gpu is None or b.tokens_per_gpu is None:
        return False
    pairs = [(a.latency.get(k), b.latency.get(k)) for k in LATENCIES]
    pairs = [(x, y) for x, y in pairs if x is not None and y is not None]
    if not pairs or a.tokens_per_gpu < b.tokens_per_gpu or any(x > y for x, y in pairs):
        return False
    return a.tokens_per_gpu > b.tokens_per_gpu or any(x < y for x, y in pairs)


def spent_minutes(history: dict[int, dict[str, Outcome]]) -> float:
    return sum(o.gpu_s for outcomes in history.values() for o in outcomes.values()) / 60.0


class Strategy:
    """The rounds of one search over `configs` (grid ids in the sweep's order). `predictions`: config -> predicted
    output tok/s per GPU (None: the predictor cannot predict it), for `predicted`; `batch`: configurations measured
    per round when the spec gives none (the fleet's lanes)."""

    def __init__(self, spec: SearchSpec, configs: list[str], predictions: dict[str, float | None] | None = None,
                 batch: int = 1) -> None:  # fmt: skip
        self.spec, self.configs = spec, list(configs)
        self.predictions = predictions or {}
        self.batch = max(1, spec.batch or batch)
        if spec.strategy == "predicted" and predictions is None:
            raise TrtsweepError("search strategy predicted: no predictions were made")

    def round(self, number: int, history: dict[int, dict[str, Outcome]]) -> tuple[list[Task], list[Drop]]:
        """Round `number`'s tasks (empty: the search is over) and the configurations dropped after the round before,
        given the outcomes of the rounds before it (`history`: round -> config -> outcome)."""
        if self.spec.strategy == "grid":
            return ([Task(c, 1.0) for c in self.configs] if number == 1 else []), []
        tasks, drops = (self._halving if self.spec.strategy == "halving" else self._predicted)(number, history)
        budget, spent = self.spec.budget_gpu_minutes, spent_minutes(history)
        if number > 1 and budget is not None and spent >= budget:
            why = f"not measured further: {spent:.1f} of the budget's {budget:g} GPU-minutes were spent"
            return [], [*drops, *(Drop(t.config, number - 1, why) for t in tasks)]
        return tasks, drops

    # -- halving ---------------------------------------------------------------------------------------------------
    def _kept(self, count: int) -> int:
        """How many of `count` screened configurations go on: `keep` of them, at least the finalists, and at least
        one fewer (a round always narrows)."""
        return min(count - 1, max(self.spec.finalists, math.ceil(count * self.spec.keep)))

    def survivors(self, number: int) -> int:
        """How many configurations round `number` measures when none is dropped early."""
        count = len(self.configs)
        for _ in range(number - 1):
            count = self._kept(count) if count > self.spec.finalists else 0
        return count

    def screening_rounds(self) -> int:
        rounds, count = 0, len(self.configs)
        while count > self.spec.finalists:
            rounds, count = rounds + 1, self._kept(count)
        return rounds

    def _halving(self, number: int, history: dict[int, dict[str, Outcome]]) -> tuple[list[Task], list[Drop]]:
        last = history.get(number - 1, {})
        if number == 1:
            alive, drops = list(self.configs), []
        elif any(o.fidelity >= 1 for o in last.values()) or not last:  # the full round was the last
            return [], []
        else:
            alive, drops = self._select(number - 1, last, self.survivors(number))
        # screening while more than the finalists are left (drops of the dominated may leave fewer early)
        screening = number <= self.screening_rounds() and len(alive) > self.spec.finalists
        fidelity = self.spec.screening_fidelity(number) if screening else 1.0
        return [Task(c, fidelity, last[c].hint() if c in last else None) for c in alive], drops

    def _select(self, number: int, outcomes: dict[str, Outcome], keep: int) -> tuple[list[str], list[Drop]]:
        """The configurations of round `number` kept for the next: the `keep` best that measured a capacity and are
        not dominated by another kept one; a drop for each of the others."""
        ranked = sorted(outcomes.values(), key=lambda o: (-o.score(), self.configs.index(o.config)))
        drops, kept = [], []
        for rank, outcome in enumerate(ranked, 1):
            if not outcome.ok or outcome.tokens_per_gpu is None:
                drops.append(Drop(outcome.config, number, outcome.evidence()))
            elif len(kept) >= keep:
                cutoff = kept[-1]
                drops.append(Drop(outcome.config, number, f"rank {rank} of {len(ranked)} (keeping {keep}): "
                                  f"{outcome.evidence()}; the last kept, {cutoff.config}: "
                                  f"{cutoff.tokens_per_gpu:.1f} tok/s/GPU"))  # fmt: skip
            elif (better := next((k for k in kept if dominates(k, outcome)), None)) is not None:
                why = (f"dominated by {better.config} ({better.evidence()}; p99 {_latencies(better)}): "
                       f"{outcome.evidence()}; p99 {_latencies(outcome)}")  # fmt: skip
                drops.append(Drop(outcome.config, number, why))
            else:
                kept.append(outcome)
        order = {o.config for o in kept}
        return [c for c in self.configs if c in order], drops

    # -- predicted -------------------------------------------------------------------------------------------------
    def _predicted(self, number: int, history: dict[int, dict[str, Outcome]]) -> tuple[list[Task], list[Drop]]:
        measured = {c for outcomes in history.values() for c in outcomes}
        ranked = sorted((c for c in self.configs if self.predictions.get(c) is not None and c not in measured),
                        key=lambda c: (-float(self.predictions[c] or 0), self.configs.index(c)))  # fmt: skip
        if number == 1:
            unsupported = [c for c in self.configs if self.predictions.get(c) is None]
            return [Task(c, 1.0) for c in [*unsupported, *ranked[: self.batch]]], []
        scores = [o for outcomes in history.values() for o in outcomes.values() if o.tokens_per_gpu is not None]
        best = max(scores, key=lambda o: o.score(), default=None)
        if not ranked:
            return [], []
        top = float(self.predictions[ranked[0]] or 0)
        if best is not None and best.score() >= top * (1 + self.spec.margin):
            drops = [Drop(c, number - 1, f"not measured: predicted {float(self.predictions[c] or 0):.1f} tok/s/GPU; "
                          f"the measured best, {best.evidence()}, beats every remaining prediction by more than "
                          f"{self.spec.margin:.0%}") for c in ranked]  # fmt: skip
            return [], drops
        return [Task(c, 1.0) for c in ranked[: self.batch]], []


def _latencies(outcome: Outcome) -> str:
    parts = [f"{k.split('_')[0].upper()} {v:.0f} ms" for k in LATENCIES if (v := outcome.latency.get(k)) is not None]
    return ", ".join(parts) or "-"


def answer(history: dict[int, dict[str, Outcome]]) -> Outcome | None:
    """The best configuration measured at the full benchmark: the most output tok/s per GPU at capacity."""
    full = [o for outcomes in history.values() for o in outcomes.values() if o.fidelity >= 1 and o.score() >= 0]
    return max(full, key=lambda o: o.score(), default=None)
