"""The report compares each configuration with and without speculative decoding (same server): side by side on
output tokens/s per GPU, TTFT, TPOT and acceptance, and the best output tokens/s per GPU each variant reaches within
the SLOs."""

from __future__ import annotations

from typing import Any

from trtsweep.report import page, results_table, speculative, verdict
from trtsweep.report.answer import Answer

CONFIG = "m_bf16_tp1pp1_bs8_isl512osl64_stream"


def row(variant: str, conc: int, tok_s: float, tpot: float, length: float | None) -> dict[str, Any]:
    """A results.csv row (every column, unknown ones None) of the variant at one concurrency."""
    config = CONFIG if variant == "none" else f"{CONFIG}_spec-{variant}"
    return {**dict.fromkeys(results_table.COLUMNS), "point": f"{config}_pytorch-serve", "config": config,
            "server": "trtllm-serve", "flow": "pytorch", "speculative": variant, "concurrency": conc,
            "output_tok_s_per_gpu": tok_s, "output_token_throughput": tok_s, "ttft_p99_ms": 100.0,
            "tpot_p99_ms": tpot, "acceptance_length": length, "success_rate": 1.0, "gpus": 1, "model": "a/b",
            "precision": "bf16", "point_status": "ok"}  # fmt: skip


ROWS = [row("none", 1, 100.0, 20.0, None), row("none", 8, 400.0, 40.0, None),
        row("ngram", 1, 150.0, 12.0, 2.5), row("ngram", 8, 500.0, 60.0, 1.8)]  # fmt: skip
SLO = {"tpot_p99_ms": 50}


def test_variants_of_a_configuration_are_compared_within_the_slos():
    assert list(speculative.groups(ROWS)) == [f"{CONFIG} on trtllm-serve"]
    judged = verdict.judge(ROWS, SLO)
    # ngram at concurrency 8 misses the TPOT limit: its best within the SLOs is concurrency 1's
    assert speculative.lines(ROWS, judged) == [
        f"{CONFIG} on trtllm-serve: none 400.0 out tok/s per GPU; ngram 150.0 out tok/s per GPU (0.38x none)"
    ]


def test_the_page_has_the_comparison_only_with_variants():
    judged = verdict.judge(ROWS, SLO)
    found = Answer(slo=SLO, all_rows=ROWS, rows=ROWS, screening=[], stale={}, judged=judged, sizing=[], planned=True)
    html = page.render("spec", found, [])
    assert "With and without speculative decoding" in html and "accept len" in html
    plain = [r for r in ROWS if r["speculative"] == "none"]
    alone = Answer(slo=SLO, all_rows=plain, rows=plain, screening=[], stale={}, judged=verdict.judge(plain, SLO),
                   sizing=[], planned=True)  # fmt: skip
    assert "With and without speculative decoding" not in page.render("spec", alone, [])
