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

The report's verdict (trtsweep.report.verdict) judges the measured rows by it.
"""

from __future__ import annotations

from typing import Any

from trtsweep.errors import TrtsweepError

LIMITS = {"ttft_p99_ms": "TTFT p99", "tpot_p99_ms": "TPOT p99", "e2e_p99_ms": "E2E p99"}
KEYS = {*LIMITS, "min_success_rate", "max_accuracy_drop", "min_accuracy", "accuracy_metric"}
ACCURACY_METRICS = ("rougeL", "rouge1", "rouge2", "bleu", "chrf", "exact", "contains", "corpus_bleu", "corpus_chrf")


def check(slo: Any) -> dict[str, Any]:
    """The sweep's `slo:` mapping, validated (TrtsweepError naming the field otherwise)."""
    if slo is None:
        return {}
    if not isinstance(slo, dict):
        raise TrtsweepError(f"sweep field 'slo': expected a mapping with keys from {sorted(KEYS)}")
    unknown = set(slo) - KEYS
    if unknown:
        raise TrtsweepError(f"sweep field 'slo': unknown key(s) {sorted(unknown)}; known: {sorted(KEYS)}")
    for key, value in slo.items():
        if key == "accuracy_metric":
            if value not in ACCURACY_METRICS:
                raise TrtsweepError(
                    f"sweep field 'slo.accuracy_metric': expected one of {ACCURACY_METRICS}, got {value!r}"
                )
            continue
        if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
            raise TrtsweepError(f"sweep field 'slo.{key}': expected a number >= 0, got {value!r}")
        if key in ("min_success_rate", "min_accuracy", "max_accuracy_drop") and value > 1:
            raise TrtsweepError(f"sweep field 'slo.{key}': expected a fraction in [0, 1], got {value!r}")
    return dict(slo)
