"""Summary statistics of latency samples, with honest tails.

* mean, sample standard deviation (ddof=1; 0.0 for fewer than two samples), min, max;
* percentiles p50/p90/p95/p99 by linear interpolation between closest ranks (numpy's default);
* for p90/p95/p99 a distribution-free 95% confidence interval from order statistics: the ranks l <= u
  with P(l <= B < u) >= 0.95 for B ~ Binomial(n, q), searched exactly and symmetrically around n*q;
* a warning for each tail percentile that rests on fewer than 10 samples beyond it (n * (1 - q) < 10),
  in which case the interval is widened to (min, max).
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

PERCENTILES = {"p50": 0.50, "p90": 0.90, "p95": 0.95, "p99": 0.99}
TAILS = ("p90", "p95", "p99")
MIN_BEYOND = 10
CONFIDENCE = 0.95


def percentile(ordered: Sequence[float], q: float) -> float:
    """Linear interpolation between closest ranks of an ascending sequence."""
    pos = (len(ordered) - 1) * q
    lo = math.floor(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def _binom_pmf(n: int, q: float) -> Callable[[int], float]:
    """P(B = k) for B ~ Binomial(n, q), in log space so large n does not overflow; evaluated only where the
    interval search looks (about sqrt(n) ranks around n*q), never for all n + 1."""
    base = math.lgamma(n + 1)
    log_q, log_1q = math.log(q), math.log1p(-q)
    return lambda k: math.exp(base - math.lgamma(k + 1) - math.lgamma(n - k + 1) + k * log_q + (n - k) * log_1q)


def quantile_ci(ordered: Sequence[float], q: float) -> tuple[float, float] | None:
    """Order-statistic 95% interval for the q-quantile, or None when it cannot be bounded."""
    n = len(ordered)
    pmf = _binom_pmf(n, q)
    lo = hi = min(max(round(n * q), 0), n)
    mass = pmf(lo)
    while mass < CONFIDENCE:
        if lo == 0 and hi == n:
            return None
        left = pmf(lo - 1) if lo > 0 else -1.0
        right = pmf(hi + 1) if hi < n else -1.0
        if left >= right:
            lo -= 1
            mass += left
        else:
            hi += 1
            mass += right
    # B counts samples below the quantile: the interval is [X_(lo), X_(hi+1)] in 1-based order statistics
    if lo < 1 or hi + 1 > n:
        return None
    return ordered[lo - 1], ordered[hi]


@dataclass(frozen=True)
class Summary:
    count: int
    mean: float
    std: float
    min: float
    max: float
    p50: float
    p90: float
    p95: float
    p99: float
    ci: dict[str, tuple[float, float]] = field(default_factory=dict)
    warnings: tuple[str, ...] = ()

    def as_dict(self, scale: float = 1.0) -> dict[str, Any]:
        out: dict[str, Any] = {"count": self.count}
        for key in ("mean", "std", "min", "max", *PERCENTILES):
            out[key] = getattr(self, key) * scale
        out["ci95"] = {k: [lo * scale, hi * scale] for k, (lo, hi) in self.ci.items()}
        if self.warnings:
            out["warnings"] = list(self.warnings)
        return out


def summarize(values: Sequence[float] | array[float]) -> Summary | None:
    """Summary of `values` (None when empty). Sorted as one float64 numpy array (8 bytes a sample: a level's
    millions of inter-chunk gaps never become Python floats)."""
    if not len(values):
        return None
    ordered = np.sort(np.asarray(values, dtype=np.float64))
    n = len(ordered)
    mean = float(ordered.mean())
    std = float(ordered.std(ddof=1)) if n > 1 else 0.0
    pct = {name: float(percentile(ordered, q)) for name, q in PERCENTILES.items()}
    ci: dict[str, tuple[float, float]] = {}
    warnings = []
    for name in TAILS:
        q = PERCENTILES[name]
        beyond = round(n * (1 - q), 9)  # 100 * (1 - 0.9) is 9.999999999999998 in floating point
        interval = quantile_ci(ordered, q)
        if beyond < MIN_BEYOND or interval is None:
            need = math.ceil(round(MIN_BEYOND / (1 - q), 9))
            warnings.append(f"{name} rests on {int(beyond)} samples beyond it (n={n}); needs n >= {need}")
            interval = (ordered[0], ordered[-1])
        ci[name] = (float(interval[0]), float(interval[1]))
    return Summary(n, mean, std, float(ordered[0]), float(ordered[-1]), ci=ci, warnings=tuple(warnings), **pct)
