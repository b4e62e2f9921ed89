"""The report compares each configuration aggregated and disaggregated on trtllm-serve: side by side on output
tokens/s per GPU (every worker's GPUs), TTFT and TPOT p99, and the best output tokens/s per GPU each reaches within
the SLOs with its ratio to the best aggregated layout; results.csv's `disaggregated` and `gpus` columns."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from trtsweep.report import disaggregated, page, results_table, verdict
from trtsweep.report.templating import environment

STEM = "m_bf16_tp{tp}pp1_bs8_isl512osl64_stream"


def row(series: str, conc: int, tok_s: float, tpot: float, tp: int = 1, spec: str = "") -> dict[str, Any]:
    """A results.csv row (every column, unknown ones None) of one series at one concurrency."""
    shape = "" if series == "agg" else series
    config = STEM.format(tp=tp) + (f"_disagg-{shape}" if shape else "") + spec
    return {**dict.fromkeys(results_table.COLUMNS), "point": f"{config}_pytorch-serve", "config": config,
            "server": "trtllm-serve", "flow": "pytorch", "disaggregated": shape or None, "tp": tp, "pp": 1,
            "concurrency": conc, "output_tok_s_per_gpu": tok_s, "ttft_p99_ms": 100.0, "tpot_p99_ms": tpot,
            "success_rate": 1.0, "gpus": 2, "model": "a/b", "precision": "bf16", "point_status": "ok"}  # fmt: skip


ROWS = [row("agg", 1, 100.0, 20.0), row("agg", 8, 400.0, 40.0), row("agg", 8, 300.0, 30.0, tp=2),
        row("c1x1-g1x1", 1, 150.0, 12.0), row("c1x1-g1x1", 8, 500.0, 60.0),
        row("c1x1-g2x1", 8, 520.0, 30.0, spec="_spec-ngram"), row("agg", 8, 9.0, 30.0, spec="_spec-ngram")]  # fmt: skip
SLO = {"tpot_p99_ms": 50}
KEY = "m_bf16_bs8_isl512osl64_stream"


def test_each_configuration_is_compared_over_its_layouts_and_values_within_the_slos():
    found = disaggregated.groups(ROWS)
    assert list(found) == [KEY, f"{KEY}_spec-ngram"]
    assert list(found[KEY]) == ["aggregated tp1pp1", "aggregated tp2pp1", "c1x1-g1x1"]
    judged = verdict.judge(ROWS, SLO)
    # c1x1-g1x1 at concurrency 8 misses the TPOT limit: its best within the SLOs is concurrency 1's
    assert disaggregated.lines(ROWS, judged) == [
        f"{KEY}: aggregated tp1pp1 400.0 out tok/s per GPU (the best aggregated); c1x1-g1x1 150.0 out tok/s per GPU "
        "(0.38x the best aggregated)",
        f"{KEY}_spec-ngram: aggregated tp1pp1 9.0 out tok/s per GPU (the best aggregated); c1x1-g2x1 520.0 out tok/s "
        "per GPU (57.78x the best aggregated)"]  # fmt: skip
    strict = verdict.judge(ROWS, {"tpot_p99_ms": 5})
    assert disaggregated.lines(ROWS, strict)[0] == (f"{KEY}: aggregated: no level within the SLOs; c1x1-g1x1: no level "
                                                    "within the SLOs")  # fmt: skip


def test_only_configurations_with_a_disaggregated_value_on_trtllm_serve_are_shown():
    aggregated = [r for r in ROWS if not r["disaggregated"]]
    assert disaggregated.groups(aggregated) == {}
    assert disaggregated.section(aggregated, verdict.judge(aggregated, SLO), page._side_by_side) == {
        "disaggregated": [], "disaggregated_lines": []}  # fmt: skip
    triton = [{**r, "server": "triton"} for r in ROWS]
    assert disaggregated.groups(triton) == {}


def test_the_section_is_rendered_with_its_tables_and_nothing_without_them():
    template = environment().get_template("_disaggregated.html.j2")
    values = disaggregated.section(ROWS, verdict.judge(ROWS, SLO), page._side_by_side)
    html = template.render(**values)
    assert "<h2>Aggregated and disaggregated</h2>" in html and f"<h3>{KEY}</h3>" in html
    assert html.count('<table class="disaggregated">') == 2 and "out tok/s/GPU" in html and "c1x1-g1x1" in html
    assert template.render() == "" and template.render(disaggregated=[], disaggregated_lines=[]) == ""


def test_results_count_every_workers_gpus_and_name_the_disaggregated_value(tmp_path: Path):
    summary = {"requests": 4, "succeeded": 4, "failed": 0, "output_token_throughput": 300.0, "window_s": 1.0}
    shape = {"name": "c1g2", "context": {"tp": 1, "pp": 1, "instances": 1},
             "generation": {"tp": 1, "pp": 1, "instances": 2}, "transceiver": {"backend": "DEFAULT"}}  # fmt: skip
    # an exclusive lane holds the host's 8 GPUs: the points take their resources' first ones
    for name, point in (("agg", {"tp": 1, "pp": 1, "resources": {"gpus": 1}}),
                        ("dis", {"tp": 1, "pp": 1, "resources": {"gpus": 3}, "disaggregated": shape}),
                        ("old", {"tp": 1, "pp": 1})):  # fmt: skip
        where = tmp_path / name
        where.mkdir()
        (where / "point.json").write_text(json.dumps(point))
        (where / "status.json").write_text(json.dumps({"status": "ok", "gpus": list(range(8))}))
        (where / "llm_perf.summary.json").write_text(json.dumps({"levels": [{"concurrency": 4, "summary": summary}]}))
    agg, dis, old = results_table.collect(tmp_path)
    assert (agg["gpus"], agg["gpu_ids"], agg["output_tok_s_per_gpu"], agg["disaggregated"]) == (1, "0", 300.0, None)
    assert (dis["gpus"], dis["gpu_ids"], dis["output_tok_s_per_gpu"], dis["disaggregated"]) == (
        3, "0,1,2", 100.0, "c1x1-g2x1")  # fmt: skip
    assert old["gpus"] == 8  # a record that does not say what it took: its lane's
    results_table.write(tmp_path, [agg, dis])
    lines = (tmp_path / "results.csv").read_text().splitlines()
    column = lines[0].split(",").index("disaggregated")
    assert [line.split(",")[column] for line in lines[1:]] == ["", "c1x1-g2x1"]


def test_the_page_has_the_section_only_with_a_disaggregated_value():
    from trtsweep.report.answer import Answer

    judged = verdict.judge(ROWS, SLO)
    found = Answer(slo=SLO, all_rows=ROWS, rows=ROWS, screening=[], stale={}, judged=judged, sizing=[], planned=True)
    html = page.render("disagg", found, [])
    assert "<h2>Aggregated and disaggregated</h2>" in html and "0.38x the best aggregated" in html
    plain = [r for r in ROWS if not r["disaggregated"]]
    alone = Answer(slo=SLO, all_rows=plain, rows=plain, screening=[], stale={}, judged=verdict.judge(plain, SLO),
                   sizing=[], planned=True)  # fmt: skip
    assert "Aggregated and disaggregated" not in page.render("disagg", alone, [])
