"""SLO capacity search (`llm-perf --search slo`): the largest load whose measured level meets every SLO.

The SLO has the keys and meanings of a sweep's `slo:` (trtsweep.sweep.slo): `ttft_p99_ms`, `tpot_p99_ms`,
`e2e_p99_ms` are upper bounds on the level summary's p99 (ms), `min_success_rate` a lower bound on succeeded /
requests. A number the level did not measure does not meet its limit.

The search measures the synchronous level (concurrency 1, or the rate `maximum / 64`), then the saturating one
(`maximum`), then bisects between the highest level that met the SLO and the lowest that did not until the two
are adjacent (concurrency) or within 5% (request rate: geometric bisection), or the level budget is spent.
With a `hint` (an earlier, shorter search's capacity and the level above it that failed: a configuration search's
later round) it measures the hint's two levels first; when they bracket the capacity again the search is done in
two levels; else it goes on as above (down to the synchronous level when the hinted capacity misses now).
`bound` says how far the capacity found can be trusted: "tight" (the next level up failed), "open" (the budget
ran out, or the saturating level met the SLO: the maximum was not enough), "none" (not even the first level met
it: no capacity).

`EarlyStop` ends a level as soon as it can no longer meet a latency limit or the success rate.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from trtsweep.errors import TrtsweepError

# SLO key -> (the level summary's latency entry, whose p99 it bounds; its name in messages)
LIMITS = {
    "ttft_p99_ms": ("ttft_ms", "TTFT p99"),
    "tpot_p99_ms": ("tpot_ms", "TPOT p99"),
    "e2e_p99_ms": ("e2e_ms", "E2E p99"),
}
SUCCESS_RATE = "min_success_rate"
KEYS = (*LIMITS, SUCCESS_RATE)
VARIABLES = ("concurrency", "request_rate")
QUANTILE = 0.99
RATE_RESOLUTION = 0.05  # request rate: the search is tight once the failed rate is within 5% above the met one
LOWEST_RATE_DIVISOR = 64  # request rate: the synchronous level is maximum / 64
# latencies a request's end already tells (TTFT from its first chunk, E2E from its end): SLO key -> metric
EARLY = {"ttft_p99_ms": "ttft", "e2e_p99_ms": "e2e"}


def check_slo(slo: dict[str, float]) -> dict[str, float]:
    """`slo` if every key is known and every value in range; TrtsweepError naming the first that is not."""
    for key, value in slo.items():
        if key not in KEYS:
            raise TrtsweepError(f"unknown SLO key {key!r} (known: {', '.join(KEYS)})")
        if not (0 <= value <= 1 if key == SUCCESS_RATE else value >= 0) or math.isnan(value):
            bounds = "between 0 and 1" if key == SUCCESS_RATE else ">= 0 (ms)"
            raise TrtsweepError(f"SLO {key} must be {bounds}, got {value:g}")
    return slo


def _ms(value: float) -> str:
    return f"{value:.0f}" if abs(value) >= 100 else f"{value:.3g}"


def misses(slo: dict[str, float], summary: dict[str, Any]) -> list[str]:
    """What the level `summary` misses of `slo`, one phrase each ("TTFT p99 1523 ms > 1000 ms"); [] when it meets
    every limit."""
    out = []
    for key, limit in slo.items():
        if key == SUCCESS_RATE:
            requests = summary.get("requests") or 0
            rate = summary.get("succeeded", 0) / requests if requests else None
            if rate is None:
                out.append(f"success rate not measured (no request; limit {limit:g})")
            elif rate < limit:
                out.append(f"success rate {rate:.4g} < {limit:g}")
            continue
        metric, label = LIMITS[key]
        p99 = (summary.get(metric) or {}).get("p99")
        if p99 is None:
            out.append(f"{label} not measured (limit {_ms(limit)} ms)")
        elif p99 > limit:
            out.append(f"{label} {_ms(p99)} ms > {_ms(limit)} ms")
    return out


def judged(slo: dict[str, float], summary: dict[str, Any]) -> list[str]:
    """Each latency limit's measured p99 with its 95% confidence interval (trtsweep.perf.stats) against the limit:
    "TTFT p99 812 ms (95% CI 700-950) <= 1000 ms"; a p99 with fewer than 10 samples beyond it says so (its interval
    is then the level's min-max)."""
    out = []
    for key, limit in slo.items():
        if key not in LIMITS or (stats := summary.get(LIMITS[key][0]) or {}).get("p99") is None:
            continue
        p99, interval = stats["p99"], (stats.get("ci95") or {}).get("p99")
        ci = f" (95% CI {_ms(interval[0])}-{_ms(interval[1])})" if interval else ""
        thin = any(w.startswith("p99 ") for w in stats.get("warnings", []))
        few = ", few samples beyond the p99: the CI is the level's range" if thin else ""
        out.append(f"{LIMITS[key][1]} {_ms(p99)} ms{ci} {'<=' if p99 <= limit else '>'} {_ms(limit)} ms{few}")
    return out


@dataclass(frozen=True)
class SearchSpec:
    """What to search: the load `variable`, the SLO, the saturating end `maximum` and the level budget."""

    variable: str = "concurrency"
    slo: dict[str, float] = field(default_factory=dict)
    maximum: float = 64
    max_levels: int = 8
    hint: tuple[float, float] | None = None  # (met, failed): an earlier search's capacity and the level that failed

    def __post_init__(self) -> None:
        if self.variable not in VARIABLES:
            raise TrtsweepError(f"--search-variable must be one of {', '.join(VARIABLES)}, got {self.variable!r}")
        check_slo(self.slo)
        if self.variable == "concurrency" and not (self.maximum >= 1 and float(self.maximum).is_integer()):
            raise TrtsweepError(f"--search-max: the highest concurrency must be an integer >= 1, got {self.maximum:g}")
        if not 0 < self.maximum < math.inf:
            raise TrtsweepError(f"--search-max: the highest request rate must be > 0 req/s, got {self.maximum:g}")
        if self.max_levels < 2:
            raise TrtsweepError(f"--search-max-levels must be >= 2 (the synchronous and saturating levels), got "
                                f"{self.max_levels}")  # fmt: skip
        if self.hint is not None:
            met, failed = self.hint
            whole = self.variable != "concurrency" or (float(met).is_integer() and float(failed).is_integer())
            if not (self.lowest <= met < failed <= self.maximum and whole):
                raise TrtsweepError(f"--search-hint: expected MET,FAILED with {self.lowest:g} <= MET < FAILED <= "
                                    f"--search-max {self.maximum:g}{'' if whole else ' (whole numbers)'}, got "
                                    f"{met:g},{failed:g}")  # fmt: skip

    @property
    def first(self) -> float:
        """The first level measured: the hint's capacity, else the synchronous level."""
        return self.hint[0] if self.hint is not None else self.lowest

    @property
    def lowest(self) -> float:
        """The synchronous level: concurrency 1, or the rate maximum / 64."""
        return 1 if self.variable == "concurrency" else self.maximum / LOWEST_RATE_DIVISOR

    def tight(self, met: float, failed: float) -> bool:
        """Whether nothing worth measuring lies between a level that met the SLO and a higher one that failed."""
        if self.variable == "concurrency":
            return failed - met <= 1
        return failed / met - 1 <= RATE_RESOLUTION + 1e-9

    def middle(self, met: float, failed: float) -> float:
        """The next level between them: the integer midpoint, or the geometric mean of the rates (4 digits)."""
        if self.variable == "concurrency":
            return (int(met) + int(failed)) // 2
        return float(f"{math.sqrt(met * failed):.4g}")


@dataclass(frozen=True)
class Step:
    """One measured level of the search."""

    value: float
    met: bool
    misses: list[str]
    stopped_early: str | None
    request_throughput: float | None
    output_token_throughput: float | None
    judged: list[str] = field(default_factory=list)  # each latency limit: its p99, 95% CI and the limit

    def as_dict(self) -> dict[str, Any]:
        return {"value": self.value, "met": self.met, "misses": self.misses, "stopped_early": self.stopped_early,
                "request_throughput": self.request_throughput,
                "output_token_throughput": self.output_token_throughput, "judged": self.judged}  # fmt: skip


class Search:
    """The bisection's state: `next_value()` is the level to measure next (None: done), `record()` takes its
    summary, `as_dict()` is the export's `search` object."""

    def __init__(self, spec: SearchSpec) -> None:
        self.spec = spec
        self.steps: list[Step] = []

    def next_value(self) -> float | None:
        if not self.steps:
            return self.spec.first
        if len(self.steps) >= self.spec.max_levels:
            return None
        measured = {s.value for s in self.steps}
        failed = self._lowest_failed()
        met = self._highest_met_below(failed)
        if met is None:  # nothing met (below the lowest failure): the synchronous level, unless it was measured
            lowest = self.spec.lowest
            return lowest if lowest not in measured else None
        if failed is None:  # every level met: the hint's failed level, then the saturating one (both met: open)
            upward = (self.spec.hint[1], self.spec.maximum) if self.spec.hint is not None else (self.spec.maximum,)
            return next((v for v in upward if v > met and v not in measured), None)
        return None if self.spec.tight(met, failed) else self.spec.middle(met, failed)

    def record(self, value: float, summary: dict[str, Any], stopped_early: str | None) -> Step:
        missed = misses(self.spec.slo, summary)
        step = Step(value, not missed and stopped_early is None, missed, stopped_early,
                    summary.get("request_throughput"), summary.get("output_token_throughput"),
                    judged(self.spec.slo, summary))  # fmt: skip
        self.steps.append(step)
        return step

    def _lowest_failed(self) -> float | None:
        return min((s.value for s in self.steps if not s.met), default=None)

    def _highest_met_below(self, failed: float | None) -> float | None:
        return max((s.value for s in self.steps if s.met and (failed is None or s.value < failed)), default=None)

    def capacity(self) -> Step | None:
        """The highest level that met the SLO below the lowest that failed; None when none did."""
        best = self._highest_met_below(self._lowest_failed())
        return None if best is None else next(s for s in self.steps if s.value == best)

    def bound(self) -> str:
        best, failed = self.capacity(), self._lowest_failed()
        if best is None:
            return "none"
        return "tight" if failed is not None and self.spec.tight(best.value, failed) else "open"

    def label(self, value: float) -> str:
        return f"concurrency {value:g}" if self.spec.variable == "concurrency" else f"rate {value:g}/s"

    def lines(self) -> list[str]:
        """The console's account: one line per step, then the capacity and its bound."""
        out = []
        for i, step in enumerate(self.steps, 1):
            verdict = "met the SLO" if step.met else "missed: " + "; ".join(step.misses or ["-"])
            early = f" (stopped early: {step.stopped_early})" if step.stopped_early else ""
            measured = f" [{'; '.join(step.judged)}]" if step.judged else ""
            out.append(f"search step {i}: {self.label(step.value)}: {verdict}{early}{measured}")
        best = self.capacity()
        if best is None:
            out.append("capacity: none (bound none): no level met the SLO")
        else:
            rate, tokens = best.request_throughput, best.output_token_throughput
            measured = f"{rate:.2f} req/s" if rate is not None else "- req/s"
            measured += f", {tokens:.1f} output tok/s" if tokens is not None else ""
            out.append(f"capacity: {self.label(best.value)} (bound {self.bound()}): {measured}")
        return out

    def as_dict(self) -> dict[str, Any]:
        best = self.capacity()
        capacity = None
        if best is not None:
            capacity = {"value": best.value,
                        "concurrency": int(best.value) if self.spec.variable == "concurrency" else None,
                        "request_rate": best.request_throughput,
                        "output_token_throughput": best.output_token_throughput}  # fmt: skip
        return {"variable": self.spec.variable, "slo": dict(self.spec.slo), "levels": [s.as_dict() for s in self.steps],
                "capacity": capacity, "bound": self.bound(), "budget_levels": self.spec.max_levels}  # fmt: skip


def sure_misses(requests: int) -> int:
    """How many of a level's `requests` latency samples over a limit make its p99 (linear interpolation between
    closest ranks, as trtsweep.perf.stats computes it) exceed that limit whatever the rest are: from this count on,
    even the lower of the two ranks the p99 interpolates between is over it. Fewer samples (failed requests) only
    lower the count needed, so it holds for any level of at most `requests`."""
    return requests - math.floor(QUANTILE * (requests - 1))


class EarlyStop:
    """Counts a level's measured requests over the TTFT / E2E limits, and its failures, as they end; `reason` says
    why the level can no longer meet the SLO (None while it still can). A level of unknown size (`requests` None:
    a closed loop for --duration) is never stopped."""

    def __init__(self, slo: dict[str, float], requests: int | None) -> None:
        self.limits = {EARLY[key]: (limit / 1e3, LIMITS[key][1], limit) for key, limit in slo.items() if key in EARLY}
        self.min_rate = slo.get(SUCCESS_RATE)
        self.requests = requests
        self.over: Counter[str] = Counter()
        self.failed = 0
        self.reason: str | None = None

    def stopped(self) -> bool:
        return self.reason is not None

    def add(self, ok: bool, latencies: dict[str, float | None]) -> None:
        """One measured request: whether it succeeded and its latencies in seconds ("ttft", "e2e"; None unknown)."""
        if self.reason is not None or self.requests is None:
            return
        if not ok:
            self.failed += 1
            if self.min_rate is not None and self.requests - self.failed < self.min_rate * self.requests - 1e-9:
                self.reason = (f"{self.failed} of {self.requests} requests failed: the success rate cannot reach "
                               f"{self.min_rate:g}")  # fmt: skip
            return
        for name, (limit_s, label, limit_ms) in self.limits.items():
            value = latencies.get(name)
            if value is not None and value > limit_s:
                self.over[name] += 1
                if self.over[name] >= sure_misses(self.requests):
                    self.reason = (f"{self.over[name]} of {self.requests} requests over the {label} limit of "
                                   f"{_ms(limit_ms)} ms: the level cannot meet it")  # fmt: skip
                    return
