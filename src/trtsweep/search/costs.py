"""What a round point costs in GPU-seconds before it runs: the search's budget and `trtsweep plan`'s estimates.

A point costs its load (every stage before the benchmark: download, build, serve...) plus its capacity search:
levels x requests per level x seconds per request, times its GPUs. Levels: a full search measures up to the load's
`max_levels`; one that starts from an earlier capacity (`--search-hint`) about HINTED_LEVELS. A screening point
measures its share of the requests per level, at least MIN_SCREENING_REQUESTS.

The seconds come from a `Basis`: the search's own outcomes so far (the mean load, and benchmark seconds per measured
request, of its points that recorded them), else the basis the search started from (this sweep's earlier records
when it began, else the defaults LOAD_S and REQUEST_S), which its ledger keeps so that a rerun prices alike.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import Any

LOAD_S = 120.0  # a point's stages before its benchmark, without earlier records
REQUEST_S = 1.0  # seconds per measured request (closed loop, at the levels' concurrencies), without records
HINTED_LEVELS = 3
MIN_SCREENING_REQUESTS = 8  # a screening level's requests at least (a p99 of fewer says little)


@dataclass(frozen=True)
class Basis:
    """Seconds a point spends before its benchmark (`load_s`) and per measured request (`request_s`), and where
    they come from (`source`, said by the plan and the report)."""

    load_s: float = LOAD_S
    request_s: float = REQUEST_S
    source: str = f"defaults: {LOAD_S:.0f} s before the benchmark, {REQUEST_S:.1f} s per request (no earlier results)"

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, value: dict[str, Any] | None) -> Basis:
        return cls(**value) if value else cls()


@dataclass(frozen=True)
class Size:
    """What one configuration's full measurement is: its GPUs, its requests per level, its capacity search's levels."""

    gpus: int = 1
    requests: int = 1
    levels: int = 8

    def requests_at(self, fidelity: float) -> int:
        """A level's requests at `fidelity` of the benchmark's (a screening level at least MIN_SCREENING_REQUESTS)."""
        return self.requests if fidelity >= 1 else max(MIN_SCREENING_REQUESTS, round(self.requests * fidelity))


def measured(samples: Iterable[tuple[float, float, int]], fallback: Basis, what: str) -> Basis:
    """The basis learned from (load seconds, benchmark seconds, measured requests) samples; `fallback` without any."""
    kept = [(load, bench / requests) for load, bench, requests in samples if requests > 0]
    if not kept:
        return fallback
    load_s = sum(k[0] for k in kept) / len(kept)
    request_s = sum(k[1] for k in kept) / len(kept)
    source = f"from {len(kept)} {what}: {load_s:.0f} s before the benchmark, {request_s:.2f} s per request"
    return Basis(load_s, request_s, source)


def point_s(size: Size, basis: Basis, fidelity: float, hinted: bool) -> float:
    """GPU-seconds of one point: (load + levels x requests x seconds per request) x GPUs."""
    levels = min(size.levels, HINTED_LEVELS) if hinted else size.levels
    return max(1, size.gpus) * (basis.load_s + levels * size.requests_at(fidelity) * basis.request_s)
