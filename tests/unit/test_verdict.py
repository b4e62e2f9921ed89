"""The verdict under SLOs: the best row, the tie-break, and what each other configuration misses."""

from __future__ import annotations

import pytest

from trtsweep.errors import TrtsweepError
from trtsweep.report.verdict import judge, summary_lines
from trtsweep.sweep.slo import check


def row(point: str, concurrency: int, tok_s_gpu: float, ttft_p99: float, rouge: float | None, precision: str,
        gpus: int = 1, success: float = 1.0) -> dict:  # fmt: skip
    return {"point": point, "model": "m", "precision": precision, "concurrency": concurrency, "gpus": gpus,
            "output_tok_s_per_gpu": tok_s_gpu, "ttft_p99_ms": ttft_p99, "tpot_p99_ms": 20.0, "e2e_p99_ms": 900.0,
            "success_rate": success, "rougeL": rouge, "point_status": "ok"}  # fmt: skip


ROWS = [
    row("fp16", 1, 100.0, 200.0, 0.50, "float16"),
    row("fp16", 8, 400.0, 900.0, 0.50, "float16"),
    row("fp8", 1, 150.0, 150.0, 0.49, "fp8"),
    row("fp8", 8, 600.0, 1500.0, 0.49, "fp8"),  # fastest, but TTFT p99 too high
    row("int4", 8, 900.0, 500.0, 0.30, "int4_awq"),  # fastest within latency, but accuracy falls too far
    row("fp8x2", 8, 450.0, 700.0, 0.49, "fp8", gpus=2, success=0.9),
]
SLO = {"ttft_p99_ms": 1000, "min_success_rate": 0.99, "max_accuracy_drop": 0.05}


def test_the_best_row_meets_every_slo_and_every_other_configuration_says_what_it_misses():
    verdict = judge(ROWS, SLO)
    assert (verdict["best"]["point"], verdict["best"]["concurrency"]) == ("fp16", 8)
    configs = {c["point"]: c for c in verdict["configs"]}
    assert configs["fp8"]["meets"] and configs["fp8"]["row"]["concurrency"] == 1
    assert configs["int4"]["misses"] == ["rougeL 0.300 is 0.200 below fp16 (0.500; max drop 0.05)"]
    assert configs["fp8x2"]["misses"] == ["success rate 0.900 < 0.99"]
    assert verdict["rows"][("fp8", 8)] == ["TTFT p99 1500.0 ms > 1000 ms"]
    lines = summary_lines(verdict)
    assert lines[0].startswith("best under the SLOs: fp16 at concurrency 8: 400.0 output tok/s per GPU")
    assert "int4: misses rougeL 0.300 is 0.200 below fp16" in "\n".join(lines)


def test_ties_go_to_fewer_gpus_and_no_slo_means_the_fastest():
    rows = [row("two", 4, 500.0, 800.0, 0.5, "fp8", gpus=2), row("one", 4, 500.0, 900.0, 0.5, "fp8", gpus=1)]
    assert judge(rows, {})["best"]["point"] == "one"
    unmeasured = [row("x", 1, 10.0, 100.0, None, "fp8")]
    assert judge(unmeasured, {"min_accuracy": 0.1})["best"] is None  # a number nobody measured does not meet it
    assert summary_lines(judge(unmeasured, {"min_accuracy": 0.1}))[0] == "no configuration meets every SLO"


@pytest.mark.parametrize(
    ("slo", "message"),
    [
        ({"ttft_p99": 5}, r"sweep field 'slo': unknown key\(s\) \['ttft_p99'\]"),
        ({"ttft_p99_ms": "fast"}, r"sweep field 'slo.ttft_p99_ms': expected a number >= 0, got 'fast'"),
        ({"min_success_rate": 99}, r"sweep field 'slo.min_success_rate': expected a fraction in \[0, 1\]"),
        ({"accuracy_metric": "f1"}, r"sweep field 'slo.accuracy_metric': expected one of"),
        ([1], r"sweep field 'slo': expected a mapping"),
    ],
)
def test_a_bad_slo_is_one_line_naming_the_field(slo, message):
    with pytest.raises(TrtsweepError, match=message):
        check(slo)


def test_failed_lost_and_other_server_levels_are_never_best_nor_the_accuracy_reference():
    rows = [
        {**row("fp16", 8, 400.0, 900.0, 0.50, "float16"), "point_status": "failed"},  # the reference, had it passed
        {**row("fp8", 8, 600.0, 700.0, 0.20, "fp8"), "server_identity_error": "the server at h:1 is 'x', not 'y'"},
        row("fp8", 1, 150.0, 150.0, 0.20, "fp8"),
        {**row("int4", 8, 900.0, 500.0, 0.30, "int4_awq"), "point_status": "lost"},
        {**row("bare", 8, 990.0, 100.0, 0.30, "int4_awq"), "point_status": None},  # no status record
    ]
    verdict = judge(rows, {"ttft_p99_ms": 1000, "max_accuracy_drop": 0.05})
    # without fp16 the most precise measured accuracy at concurrency 1 is fp8's own: no drop
    assert (verdict["best"]["point"], verdict["best"]["concurrency"]) == ("fp8", 1)
    assert verdict["excluded"] == {
        ("fp16", 8): "the point did not finish ok (failed)",
        ("fp8", 8): "not the expected server's numbers: the server at h:1 is 'x', not 'y'",
        ("int4", 8): "the point did not finish ok (lost)",
        ("bare", 8): "the point has no status record",
    }
    lines = summary_lines(verdict)
    assert lines[0].startswith("best under the SLOs: fp8 at concurrency 1: 150.0 output tok/s per GPU")
    assert lines[1:] == [
        "fp16: not a candidate: the point did not finish ok (failed)",
        "int4: not a candidate: the point did not finish ok (lost)",
        "bare: not a candidate: the point has no status record",
    ]


def test_with_no_candidate_the_verdict_says_so_even_without_slos():
    rows = [{**row("fp16", 8, 400.0, 900.0, 0.50, "float16"), "point_status": "failed"}]
    verdict = judge(rows, {})
    assert verdict["best"] is None
    assert summary_lines(verdict) == [
        "no configuration is a candidate: none finished ok with its own server's numbers",
        "fp16: not a candidate: the point did not finish ok (failed)",
    ]
    assert summary_lines(judge([], {})) == ["no configuration was measured"]
