from __future__ import annotations

import random

import numpy as np
import pytest

from trtsweep.perf.stats import quantile_ci, summarize


def test_hand_computed_small_sample():
    s = summarize([1.0, 2.0, 3.0, 4.0])
    assert (s.count, s.mean, s.min, s.max, s.p50) == (4, 2.5, 1.0, 4.0, 2.5)
    assert s.std == pytest.approx(1.2909944487358056)  # sqrt(5/3)
    assert s.p90 == pytest.approx(3.7)  # 1 + 0.9 * 3 = rank 2.7 -> 3 + 0.7
    assert len(s.warnings) == 3 and s.ci["p99"] == (1.0, 4.0)


def test_percentiles_agree_with_numpy():
    values = [random.Random(7).lognormvariate(0, 1) for _ in range(997)]
    s = summarize(values)
    for name, q in (("p50", 50), ("p90", 90), ("p95", 95), ("p99", 99)):
        assert getattr(s, name) == pytest.approx(np.percentile(values, q))
    assert s.std == pytest.approx(np.std(values, ddof=1))


def test_confidence_interval_brackets_the_quantile_and_tightens():
    rng = random.Random(3)
    values = sorted(rng.random() for _ in range(5000))
    lo, hi = quantile_ci(values, 0.99)
    assert lo <= 0.99 <= hi and hi - lo < 0.01
    s = summarize(values)
    assert s.ci["p95"][0] <= s.p95 <= s.ci["p95"][1]
    assert s.warnings == ()


def test_tail_warning_depends_on_samples_beyond_the_percentile():
    assert any(
        w.startswith("p99 rests on 0 samples beyond it (n=50); needs n >= 1000")
        for w in summarize([float(i) for i in range(50)]).warnings
    )
    assert summarize([float(i) for i in range(2000)]).warnings == ()


def test_empty_and_single():
    assert summarize([]) is None
    one = summarize([5.0])
    assert (one.p50, one.p99, one.std) == (5.0, 5.0, 0.0)


def test_as_dict_scales_latencies():
    d = summarize([0.001, 0.002, 0.003]).as_dict(scale=1000)
    assert d["count"] == 3 and d["p50"] == pytest.approx(2.0) and d["ci95"]["p99"] == [1.0, 3.0]


def test_warning_boundary_is_exact_despite_floating_point():
    # 100 * (1 - 0.9) is 9.999999999999998 in floats; exactly 10 samples lie beyond p90, which is enough
    warnings = summarize([float(i) for i in range(100)]).warnings
    assert not any(w.startswith("p90") for w in warnings)
    assert "p99 rests on 3 samples beyond it (n=300); needs n >= 1000" in summarize([1.0] * 300).warnings


def test_order_statistic_interval_has_95_percent_coverage():
    # the interval from ranks is distribution-free: check its coverage of the true p90 on uniform samples
    rng = random.Random(11)
    hits = 0
    for _ in range(400):
        lo, hi = quantile_ci(sorted(rng.random() for _ in range(200)), 0.9)
        hits += lo <= 0.9 <= hi
    assert hits / 400 >= 0.92


def test_input_token_throughput_is_unknown_not_zero_without_a_tokenizer():
    from trtsweep.perf.metrics import LevelStats, request_metrics
    from trtsweep.perf.protocols.base import RequestResult

    def level_summary(results, metrics):
        stats = LevelStats()
        for r, m in zip(results, metrics, strict=True):
            stats.add(r, m)
        return stats.summary()

    results = []
    for seq in range(3):
        r = RequestResult(seq=seq, record_index=seq, warmup=False, sent_ns=1_000_000_000 * seq + 1)
        for i in range(4):
            r.add_chunk(f"t{i} ")
        r.end_ns = r.chunk_ns[-1] + 1
        results.append(r)
    metrics = [request_metrics(r, "a prompt", None, None) for r in results]
    summary = level_summary(results, metrics)
    assert summary["output_token_throughput"] > 0  # streamed chunks count as tokens
    assert summary["input_token_throughput"] is None and summary["input_tokens_total"] is None
    counted = [request_metrics(r, "a prompt", None, lambda text: len(text.split())) for r in results]
    assert level_summary(results, counted)["input_token_throughput"] > 0
