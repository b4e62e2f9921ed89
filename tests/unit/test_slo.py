"""The sweep file's `slo:`: refused at plan time in one line naming the field, and judged per (point, level) by
trtsweep.report.verdict with hand-made rows (every SLO, the accuracy reference, the embedded sweep's split)."""

from __future__ import annotations

from pathlib import Path

import pytest

from trtsweep.errors import TrtsweepError
from trtsweep.report.verdict import judge, misses, summary_lines
from trtsweep.sweep import sweepfile
from trtsweep.sweep.planning import expand

ROOT = Path(__file__).resolve().parent.parent.parent


def sweep(**over):
    base = {
        "name": "demo",
        "backend": "hf",
        "models": [{"repo_id": "HuggingFaceTB/SmolLM2-135M-Instruct", "name": "smol"}],
        "precisions": ["float32"],
        "parallelism": [{"tp": 1, "pp": 1}],
        "max_batch_sizes": [4],
        "lengths": [{"input": 512, "output": 64}],
        "streaming": [True],
        "benchmark": {"concurrency": [1], "input_data": "data/prompts.jsonl"},
    }
    return {**base, **over}


def row(point, concurrency=4, precision="float16", gpus=1, tok_s_gpu=100.0, **numbers):
    base = {"point": point, "model": "m", "precision": precision, "concurrency": concurrency, "gpus": gpus,
            "output_tok_s_per_gpu": tok_s_gpu, "ttft_p99_ms": 100.0, "tpot_p99_ms": 10.0, "e2e_p99_ms": 1000.0,
            "success_rate": 1.0, "rougeL": 0.5, "chrf": 0.6, "point_status": "ok"}  # fmt: skip
    return {**base, **numbers}


@pytest.mark.parametrize(
    ("slo", "message"),
    [
        ({"ttft_p99_ms": -1}, r"^sweep field 'slo.ttft_p99_ms': expected a number >= 0, got -1$"),
        ({"e2e_p99_ms": True}, r"^sweep field 'slo.e2e_p99_ms': expected a number >= 0, got True$"),
        ({"max_accuracy_drop": 2}, r"^sweep field 'slo.max_accuracy_drop': expected a fraction in \[0, 1\], got 2$"),
        ({"min_accuracy": "0.3"}, r"^sweep field 'slo.min_accuracy': expected a fraction in \[0, 1\], got '0.3'$"),
        ({"tpot_p99": 50}, r"^sweep field 'slo': unknown key\(s\) \['tpot_p99'\]"),
        ("fast", r"^sweep field 'slo': expected a mapping"),
    ],
)
def test_a_bad_slo_fails_the_plan_in_one_line_naming_the_field(slo, message):
    with pytest.raises(TrtsweepError, match=message) as caught:
        expand(sweep(slo=slo), base_dir=ROOT)
    assert "\n" not in str(caught.value)


def test_a_good_slo_plans_and_the_embedded_sweep_carries_one(tmp_path):
    slo = {"ttft_p99_ms": 1000, "tpot_p99_ms": 50.5, "e2e_p99_ms": 20000, "min_success_rate": 0.99,
           "max_accuracy_drop": 0.05, "min_accuracy": 0.2, "accuracy_metric": "chrf"}  # fmt: skip
    assert len(expand(sweep(slo=slo), base_dir=ROOT)) == 1
    embedded = sweepfile.load(ROOT / "group_vars" / "all" / "sweep.yml")
    assert set(embedded["slo"]) >= {"ttft_p99_ms", "min_success_rate", "max_accuracy_drop"}
    assert len(expand(embedded, base_dir=ROOT)) == 2
    written = tmp_path / "sweep.yml"
    written.write_text("trtsweep_sweep:\n  name: x\n  slo: {ttft_p99_ms: soon}\n")
    with pytest.raises(TrtsweepError, match=r"sweep field 'slo\.ttft_p99_ms'"):
        expand(sweepfile.load(written), base_dir=ROOT)


def test_each_latency_and_the_success_rate_are_judged_on_the_level():
    slo = {"ttft_p99_ms": 500, "tpot_p99_ms": 20, "e2e_p99_ms": 3000, "min_success_rate": 0.99}
    assert misses(row("ok"), slo, {}) == []
    late = row("late", ttft_p99_ms=600.0, tpot_p99_ms=25.0, e2e_p99_ms=3500.0, success_rate=0.98)
    assert misses(late, slo, {}) == [
        "TTFT p99 600.0 ms > 500 ms",
        "TPOT p99 25.0 ms > 20 ms",
        "E2E p99 3500.0 ms > 3000 ms",
        "success rate 0.980 < 0.99",
    ]
    assert misses(row("edge", ttft_p99_ms=500.0), slo, {}) == []  # at the limit meets it
    assert misses(row("unmeasured", tpot_p99_ms=None), slo, {}) == ["TPOT p99 unknown ms > 20 ms"]


def test_min_accuracy_reads_the_named_score():
    slo = {"min_accuracy": 0.55, "accuracy_metric": "chrf"}
    assert misses(row("a", chrf=0.6), slo, {}) == []
    assert misses(row("b", chrf=0.5), slo, {}) == ["chrf 0.500 < 0.55"]


def test_the_accuracy_drop_is_against_the_highest_precision_at_the_same_concurrency():
    rows = [
        row("int4", precision="int4_awq", rougeL=0.40, tok_s_gpu=300.0),
        row("fp8", precision="fp8", rougeL=0.47, tok_s_gpu=200.0),
        row("bf16", precision="bfloat16", rougeL=0.50),  # listed last: still the reference
        row("int8", concurrency=1, precision="int8", rougeL=0.44, tok_s_gpu=250.0),  # no bf16 at concurrency 1
    ]
    verdict = judge(rows, {"max_accuracy_drop": 0.05})
    assert verdict["rows"][("fp8", 4)] == []
    assert verdict["rows"][("int4", 4)] == ["rougeL 0.400 is 0.100 below bf16 (0.500; max drop 0.05)"]
    assert verdict["rows"][("int8", 1)] == []  # its own concurrency's most precise point is itself
    assert (verdict["best"]["point"], verdict["best"]["concurrency"]) == ("int8", 1)


def test_the_best_is_the_most_output_per_gpu_meeting_every_slo_ties_to_fewer_gpus():
    slo = {"ttft_p99_ms": 500}
    rows = [
        row("tp2", concurrency=8, gpus=2, tok_s_gpu=400.0, ttft_p99_ms=300.0),
        row("tp1", concurrency=8, gpus=1, tok_s_gpu=400.0, ttft_p99_ms=400.0),
        row("tp1", concurrency=16, gpus=1, tok_s_gpu=600.0, ttft_p99_ms=900.0),  # more, but too slow
    ]
    verdict = judge(rows, slo)
    assert (verdict["best"]["point"], verdict["best"]["concurrency"]) == ("tp1", 8)
    lines = summary_lines(verdict)
    assert (
        lines[0]
        == "best under the SLOs: tp1 at concurrency 8: 400.0 output tok/s per GPU (1 GPU(s)), TTFT p99 400.0 ms"
    )
    assert lines[1] == "tp2: meets the SLOs, at most 400.0 output tok/s per GPU (concurrency 8)"


def test_a_configuration_that_misses_everywhere_is_told_the_fewest_it_misses():
    slo = {"ttft_p99_ms": 500, "e2e_p99_ms": 2000}
    rows = [
        row("fast", tok_s_gpu=100.0),
        row("slow", concurrency=1, ttft_p99_ms=600.0),  # one miss
        row("slow", concurrency=8, ttft_p99_ms=900.0, e2e_p99_ms=2500.0, tok_s_gpu=500.0),  # two misses
    ]
    lines = summary_lines(judge(rows, slo))
    assert lines == [
        "best under the SLOs: fast at concurrency 4: 100.0 output tok/s per GPU (1 GPU(s)), TTFT p99 100.0 ms",
        "slow: misses TTFT p99 600.0 ms > 500 ms (best: concurrency 1)",
    ]
