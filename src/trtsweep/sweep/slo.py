"""The sweep's service-level objectives: the `slo:` mapping of a sweep file, checked at plan time.

A sweep file may carry

    slo:
      ttft_p99_ms: 1000        # time to first token, 99th percentile
      tpot_p99_ms: 100         # time per output token (AIPerf's ITL), 99th percentile
      e2e_p99_ms: 20000        # end-to-end latency, 99th percentile
      min_success_rate: 0.99   # succeeded / requests of the level
      max_accuracy_drop: 0.05  # accuracy_metric may fall at most this far below the same model at the sweep's
                               # highest precision (at the same concurrency)
      min_accuracy: 0.2        # and never below this
      accuracy_metric: rougeL  # default rougeL
      target_request_rate: 300 # req/s to serve: not a per-row limit; the report sizes each configuration with a
                               # capacity (benchmark.load) in replicas and GPUs (trtsweep.report.sizing)

The report's verdict (trtsweep.report.verdict) judges the measured rows by it. A capacity search
(`benchmark.load`) judges each level it measures by the latency and success limits (SEARCH_LIMITS, `search_limits`).
"""

from __future__ import annotations

from typing import Any

from trtsweep.perf import search
from trtsweep.sweep.schema import ACCURACY_METRICS, SEARCH_LIMITS, Slo, validate_section

LIMITS = {key: label for key, (_, label) in search.LIMITS.items()}  # the p99 latency limits and their labels
KEYS = set(Slo.model_fields)
__all__ = ["ACCURACY_METRICS", "KEYS", "LIMITS", "SEARCH_LIMITS", "check", "search_limits"]


def check(slo: Any) -> dict[str, Any]:
    """The sweep's `slo:` mapping, validated against the schema's `Slo` (TrtsweepError naming the field otherwise)."""
    return {} if slo is None else dict(validate_section(Slo, slo, "slo"))


def search_limits(slo: dict[str, Any] | None) -> dict[str, float]:
    """The limits of the SLOs a capacity search judges each level by (llm-perf --search-slo), in SEARCH_LIMITS order."""
    return {key: (slo or {})[key] for key in SEARCH_LIMITS if (slo or {}).get(key) is not None}
