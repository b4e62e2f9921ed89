"""Which configurations a search measures in each round, and how long: the decisions of a sweep's `search:`.

A configuration is one point of the sweep's matrix (its grid id); its measurement is a capacity search (the sweep's
`benchmark.load`), whose answer is the output tokens/s per GPU at the highest load within the SLOs. Strategies:

- `grid`: one round, every configuration at the full benchmark.
- `halving` (successive halving): screening steps measure the surviving configurations with a fraction of the
  benchmark's requests per level (`screening`, doubling each step, at most half), keep the best `keep` of them
  (by tokens/s per GPU at capacity) until at most `finalists` are left, which the last step measures at the full
  benchmark. A step after the first starts each capacity search from the step before's capacity and the level
  above it that failed (`--search-hint`: two levels when they still bracket it). A configuration that failed, met
  the SLOs at no load, or is dominated (another kept one has at least its tokens/s per GPU and at most its p99
  latency at capacity on every SLO metric) is dropped whatever its rank.
- `predicted`: AIConfigurator's predictions order the configurations; each round measures the next `batch` of
  them at the full benchmark (configurations it cannot predict in the first round), until the measured best beats
  every remaining prediction by `margin`.

A point lost with its host (its record `lost`: the host went away, not the configuration) is no evidence: its
configuration is measured again, as it was to be, in the next round (a `Task` with `again`); halving judges a step
only once none of its points is lost. The GPU-seconds a lost point held count all the same.

`budget_gpu_minutes` is a ceiling on the whole search: every round, the first included, is trimmed to what the
budget has left after what was spent (costs.point_s per task; halving also keeps what its later steps will need),
the best predicted or screened first (the sweep's order where nothing ranks them); a configuration the budget
leaves out gets a `Drop` saying so. The decisions are a pure function of the outcomes so far (`Strategy.round`
replays the search from round 1), so a resumed sweep takes the same ones. Every configuration not measured at the
full benchmark gets a `Drop` saying when and on what evidence.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from trtsweep.errors import TrtsweepError
from trtsweep.perf.search import LIMITS
from trtsweep.search import costs

STRATEGIES = ("grid", "halving", "predicted")
CHOICES = ("auto", *STRATEGIES)  # auto: the one whose estimate is cheapest (trtsweep.search.estimate.choose)
MAX_SCREENING = 0.5  # a screening round measures at most half the benchmark's requests per level
LATENCIES = tuple(LIMITS)  # the SLO metrics dominance compares: the p99 latency limits

History = dict[int, dict[str, "Outcome"]]


@dataclass(frozen=True)
class Task:
    """One configuration measured in a round: `fidelity` is the fraction of the benchmark's requests per level
    (1: the full benchmark); `hint` the (capacity, failed level) of its last screening; `again`: a measurement
    lost with its host, made again."""

    config: str
    fidelity: float
    hint: tuple[float, float] | None = None
    again: bool = False

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
    lost: bool = False  # its host went away: no evidence about the configuration
    load: float | None = None  # the capacity's level on the search's variable (concurrency, or request rate)
    variable: str = "concurrency"
    load_s: float = 0.0  # seconds of its stages before the benchmark
    benchmark_s: float = 0.0  # seconds of its benchmark
    requests: int = 0  # requests it measured, every level

    def score(self) -> float:
        return self.tokens_per_gpu if self.ok and self.tokens_per_gpu is not None else -1.0

    def hint(self) -> tuple[float, float] | None:
        level = self.load if self.load is not None else self.capacity_concurrency
        if level is None or self.failed_level is None:
            return None
        return (level, self.failed_level)

    def at(self) -> str:
        """Where its capacity is: "concurrency 8", "rate 2.5/s"."""
        level = self.load if self.load is not None else self.capacity_concurrency
        if level is None:
            return "-"
        return f"concurrency {level:g}" if self.variable == "concurrency" else f"rate {level:g}/s"

    def evidence(self) -> str:
        if self.lost:
            return f"point {self.point} lost with its host: {self.cause or 'no cause recorded'}"
        if not self.ok:
            return f"point {self.point} failed: {self.cause or 'no cause recorded'}"
        if self.tokens_per_gpu is None:
            return f"point {self.point}: no load met the SLOs"
        return f"point {self.point}: {self.tokens_per_gpu:.1f} output tok/s/GPU at {self.at()} ({self.bound})"


@dataclass(frozen=True)
class Drop:
    """A configuration not measured further: after which round (0: before the first), and why (with the numbers to
    check it by)."""

    config: str
    round: int
    why: str
    budget: bool = False  # the budget left it unmeasured

    def as_dict(self) -> dict[str, Any]:
        return {"config": self.config, "round": self.round, "why": self.why, "budget": self.budget}


@dataclass(frozen=True)
class SearchSpec:
    """A sweep's `search:` with its defaults (`strategy` auto is resolved before a `Strategy` is made)."""

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
        """The sweep's `search:` (None or no strategy: auto)."""
        spec = cls(**{"strategy": "auto", **(value or {})})
        if spec.strategy not in CHOICES:
            raise TrtsweepError(f"sweep field 'search.strategy': expected one of {', '.join(CHOICES)}, got "
                                f"{spec.strategy!r}")  # fmt: skip
        return spec

    def screening_fidelity(self, number: int) -> float:
        """Screening step `number` (1-based): the fraction of the benchmark's requests per level."""
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


def spent_minutes(history: History) -> float:
    """GPU-minutes the points held, lost ones included."""
    return sum(o.gpu_s for outcomes in history.values() for o in outcomes.values()) / 60.0


def learned(history: History, basis: costs.Basis) -> costs.Basis:
    """The cost basis from the search's own measured points so far (`basis` without any)."""
    samples = ((o.load_s, o.benchmark_s, o.requests) for r in history.values() for o in r.values() if not o.lost)
    return costs.measured(samples, basis, "points of this search")


@dataclass
class _State:
    """What a replay of the search carries from round to round (Strategy.round)."""

    over: bool = False
    out: set[str] = field(default_factory=set)  # dropped, for whatever reason: never measured again
    step: dict[str, Outcome] = field(default_factory=dict)  # halving: the current step's outcomes
    step_no: int = 0
    retrying: bool = False  # halving: the last round measured again what the step lost
    hints: dict[str, tuple[float, float] | None] = field(default_factory=dict)  # the hint each config was last given


Rest = Callable[[list[Task]], float]  # GPU-seconds the rounds after this one need when it measures these tasks


def _nothing_after(tasks: list[Task]) -> float:
    return 0.0


class Strategy:
    """The rounds of one search over `configs` (grid ids in the sweep's order). `predictions`: config -> predicted
    output tok/s per GPU (None: the predictor cannot predict it), for `predicted`; `batch`: configurations measured
    per round when the spec gives none (the fleet's lanes, as the search's ledger recorded them); `sizes`: what each
    configuration's full measurement is, and `basis` the seconds it starts from (costs), for the budget."""

    def __init__(self, spec: SearchSpec, configs: list[str], predictions: dict[str, float | None] | None = None,
                 batch: int = 1, sizes: dict[str, costs.Size] | None = None,
                 basis: costs.Basis | None = None) -> None:  # fmt: skip
        if spec.strategy not in STRATEGIES:
            raise TrtsweepError(f"search strategy {spec.strategy!r}: resolve auto before the rounds")
        self.spec, self.configs = spec, list(configs)
        self.predictions = predictions or {}
        self.batch = max(1, spec.batch or batch)
        self.sizes, self.basis = sizes or {}, basis or costs.Basis()
        if spec.strategy == "predicted" and predictions is None:
            raise TrtsweepError("search strategy predicted: no predictions were made")

    def round(self, number: int, history: History) -> tuple[list[Task], list[Drop]]:
        """Round `number`'s tasks (empty: the search is over) and the configurations dropped after the round before,
        given the outcomes of the rounds before it (`history`: round -> config -> outcome)."""
        state, step = _State(), {"grid": self._grid, "halving": self._halving, "predicted": self._predicted}
        tasks: list[Task] = []
        drops: list[Drop] = []
        for current in range(1, number + 1):
            before = {r: o for r, o in history.items() if r < current}
            tasks, drops = ([], []) if state.over else step[self.spec.strategy](current, before, state)
            state.over = state.over or not tasks
            state.out |= {d.config for d in drops}
            state.hints |= {t.config: t.hint for t in tasks}
        return tasks, drops

    # -- the budget ------------------------------------------------------------------------------------------------
    def cost_s(self, task: Task, before: History) -> float:
        """GPU-seconds `task` is expected to take (learned from the rounds `before` it)."""
        return self._price(task.config, task.fidelity, task.hint is not None, before)

    def _price(self, config: str, fidelity: float, hinted: bool, before: History) -> float:
        return costs.point_s(self.sizes.get(config, costs.Size()), learned(before, self.basis), fidelity, hinted)

    def _trim(self, current: int, candidates: list[Task], before: History,
              rest: Rest = _nothing_after) -> tuple[list[Task], list[Drop]]:  # fmt: skip
        """The longest prefix of `candidates` (the best first) whose cost, with what the rounds after it need
        (`rest`), fits what the budget has left; a drop for each of the others."""
        budget = self.spec.budget_gpu_minutes
        if budget is None or not candidates:
            return candidates, []
        spent = spent_minutes(before)
        prices = [self.cost_s(t, before) for t in candidates]
        fit = len(candidates)
        while fit and sum(prices[:fit]) + rest(candidates[:fit]) > (budget - spent) * 60:
            fit -= 1
        return candidates[:fit], [Drop(t.config, current - 1, self._over_budget(current, spent, fit, len(candidates),
                                                                                 price), budget=True)
                                  for t, price in zip(candidates[fit:], prices[fit:], strict=True)]  # fmt: skip

    def _over_budget(self, current: int, spent: float, fit: int, asked: int, price: float) -> str:
        return (f"not measured: within the budget ({self.spec.budget_gpu_minutes:g} GPU-minutes, {spent:.1f} spent) "
                f"round {current} could measure {fit} of its {asked} configurations, the best first; this one would "
                f"have cost about {price / 60:.1f} GPU-minutes")  # fmt: skip

    def _budget_drops(self, current: int, configs: list[str], before: History) -> list[Drop]:
        """Drops for configurations still in the search when the budget ends it."""
        spent = spent_minutes(before)
        why = (f"not measured: the budget ({self.spec.budget_gpu_minutes:g} GPU-minutes, {spent:.1f} spent) ended "
               f"the search before round {current}")  # fmt: skip
        return [Drop(c, current - 1, why, budget=True) for c in configs]

    # -- grid ------------------------------------------------------------------------------------------------------
    def _grid(self, current: int, before: History, state: _State) -> tuple[list[Task], list[Drop]]:
        if current == 1:
            return self._trim(current, [Task(c, 1.0) for c in self.configs], before)
        lost = [c for c, o in before.get(current - 1, {}).items() if o.lost and c not in state.out]
        return self._trim(current, [Task(c, 1.0, again=True) for c in lost], before)

    # -- halving ---------------------------------------------------------------------------------------------------
    def _kept(self, count: int) -> int:
        """How many of `count` screened configurations go on: `keep` of them, at least the finalists, and at least
        one fewer (a round always narrows)."""
        return min(count - 1, max(self.spec.finalists, math.ceil(count * self.spec.keep)))

    def survivors(self, number: int) -> int:
        """How many configurations step `number` measures when none is dropped early."""
        count = len(self.configs)
        for _ in range(number - 1):
            count = self._kept(count) if count > self.spec.finalists else 0
        return count

    def screening_rounds(self) -> int:
        rounds, count = 0, len(self.configs)
        while count > self.spec.finalists:
            rounds, count = rounds + 1, self._kept(count)
        return rounds

    def _fidelity(self, step_no: int, alive: int) -> float:
        """Step `step_no`'s share of the requests: screening while more than the finalists are left (drops of the
        dominated may leave fewer early, and then the finalists' step comes sooner)."""
        screening = step_no <= self.screening_rounds() and alive > self.spec.finalists
        return self.spec.screening_fidelity(step_no) if screening else 1.0

    def _after(self, step_no: int, fidelity: float, count: int, configs: list[str], before: History) -> float:
        """GPU-seconds of the steps after step `step_no` (measuring `count` at `fidelity`), none dropped early."""
        total = 0.0
        while fidelity < 1 and count:
            count = self._kept(count) if count > self.spec.finalists else count
            step_no += 1
            fidelity = self._fidelity(step_no, count)
            prices = [self._price(c, fidelity, True, before) for c in configs]
            total += count * sum(prices) / len(prices)
        return total

    def schedule_s(self, count: int) -> float:
        """GPU-seconds of every step when the first `count` configurations start it and none is dropped early."""
        fidelity = self._fidelity(1, count)
        first = sum(self._price(c, fidelity, False, {}) for c in self.configs[:count])
        return first + self._after(1, fidelity, count, self.configs[:count], {})

    def _halving(self, current: int, before: History, state: _State) -> tuple[list[Task], list[Drop]]:
        if current == 1:
            state.step_no, fidelity = 1, self._fidelity(1, len(self.configs))
            tasks, drops = self._trim(current, [Task(c, fidelity) for c in self.configs], before,
                                      self._rest(1, fidelity, 0, before))  # fmt: skip
            if 0 < len(tasks) <= self.spec.finalists < len(self.configs):  # the budget leaves only finalists
                return self._trim(current, [Task(c, 1.0) for c in self.configs], before)
            return tasks, drops
        last = before.get(current - 1, {})
        if not last:
            return [], []
        state.step = {**state.step, **last} if state.retrying else dict(last)
        lost = [c for c in self.configs if c in state.step and state.step[c].lost]
        state.retrying = bool(lost)
        if lost:  # the step is judged once every configuration of it was measured: the lost ones again first
            fidelity = state.step[lost[0]].fidelity
            measured = len(state.step) - len(lost)
            again = [Task(c, fidelity, state.hints.get(c), again=True) for c in lost]
            tasks, drops = self._trim(current, again, before, self._rest(state.step_no, fidelity, measured, before))
            if tasks:
                return tasks, drops
            state.step, state.retrying = {c: o for c, o in state.step.items() if not o.lost}, False
            return self._next_step(current, before, state, drops)
        return self._next_step(current, before, state, [])

    def _rest(self, step_no: int, fidelity: float, measured: int, before: History) -> Rest:
        """What the steps after this round need when it measures `tasks` (and `measured` of its step already were)."""

        def rest(tasks: list[Task]) -> float:
            configs = [t.config for t in tasks] or self.configs
            return self._after(step_no, fidelity, measured + len(tasks), configs, before)

        return rest

    def _next_step(self, current: int, before: History, state: _State,
                   drops: list[Drop]) -> tuple[list[Task], list[Drop]]:  # fmt: skip
        if not state.step or any(o.fidelity >= 1 for o in state.step.values()):  # the full step was the last
            return [], drops
        count = len(state.step)
        kept, dropped = self._select(current - 1, state.step, count if count <= self.spec.finalists else
                                     self._kept(count))  # fmt: skip
        state.step_no += 1
        fidelity = self._fidelity(state.step_no, len(kept))
        candidates = [Task(c, fidelity, state.step[c].hint()) for c in kept]
        tasks, trimmed = self._trim(current, candidates, before, self._rest(state.step_no, fidelity, 0, before))
        return tasks, [*drops, *dropped, *trimmed]

    def _select(self, number: int, outcomes: dict[str, Outcome], keep: int) -> tuple[list[str], list[Drop]]:
        """The configurations of a step kept for the next, best first: the `keep` best that measured a capacity and
        are not dominated by another kept one; a drop (after round `number`) for each of the others."""
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
        return [o.config for o in kept], drops

    # -- predicted -------------------------------------------------------------------------------------------------
    def _ranked(self) -> list[str]:
        return sorted((c for c in self.configs if self.predictions.get(c) is not None),
                      key=lambda c: (-float(self.predictions[c] or 0), self.configs.index(c)))  # fmt: skip

    def _predicted(self, current: int, before: History, state: _State) -> tuple[list[Task], list[Drop]]:
        outcomes = [o for r in before.values() for o in r.values()]
        measured = {o.config for o in outcomes if not o.lost}
        lost = {o.config for o in outcomes if o.lost}
        remaining = [c for c in self._ranked() if c not in measured and c not in state.out]
        if current == 1:  # the predicted best, then what the predictor cannot rank (measured as in grid)
            unpredicted = [c for c in self.configs if self.predictions.get(c) is None]
            first = [Task(c, 1.0) for c in [*remaining[: self.batch], *unpredicted]]
            return self._within(current, first, remaining[self.batch :], before, state)
        again = [c for c in self.configs if self.predictions.get(c) is None and c in lost and c not in measured
                 and c not in state.out]  # fmt: skip
        drops: list[Drop] = []
        best = max((o for o in outcomes if o.tokens_per_gpu is not None), key=lambda o: o.score(), default=None)
        if remaining and best is not None and best.score() >= self._top(remaining) * (1 + self.spec.margin):
            drops = [Drop(c, current - 1, f"not measured: predicted {float(self.predictions[c] or 0):.1f} tok/s/GPU; "
                          f"the measured best, {best.evidence()}, beats every remaining prediction by more than "
                          f"{self.spec.margin:.0%}") for c in remaining]  # fmt: skip
            remaining = []
        take = remaining[: max(0, self.batch - len(again))]
        candidates = [Task(c, 1.0, again=c in lost) for c in [*again, *take]]
        tasks, more = self._within(current, candidates, remaining[len(take) :], before, state)
        return tasks, [*drops, *more]

    def _top(self, remaining: list[str]) -> float:
        return float(self.predictions[remaining[0]] or 0)

    def _within(self, current: int, candidates: list[Task], waiting: list[str], before: History,
                state: _State) -> tuple[list[Task], list[Drop]]:  # fmt: skip
        """`candidates` trimmed to the budget; when none fits, the configurations `waiting` for a later round are
        left unmeasured too."""
        tasks, drops = self._trim(current, candidates, before)
        if not tasks and candidates:
            drops += self._budget_drops(current, waiting, before)
        return tasks, drops


def _latencies(outcome: Outcome) -> str:
    parts = [f"{k.split('_')[0].upper()} {v:.0f} ms" for k in LATENCIES if (v := outcome.latency.get(k)) is not None]
    return ", ".join(parts) or "-"


def answer(history: History) -> Outcome | None:
    """The best configuration measured at the full benchmark: the most output tok/s per GPU at capacity."""
    full = [o for outcomes in history.values() for o in outcomes.values() if o.fidelity >= 1 and o.score() >= 0]
    return max(full, key=lambda o: o.score(), default=None)
