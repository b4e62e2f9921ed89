"""report.html and compare.html come from Jinja2 templates shipped in the package (trtsweep/report/templates): every
value is escaped by the template environment (autoescape), never by hand, and a missing value is an error."""

from __future__ import annotations

import json
from html.parser import HTMLParser
from importlib import resources
from pathlib import Path

import jinja2
import pytest

from trtsweep.report import compare, page, results_table, verdict, writer
from trtsweep.report.answer import Answer

DATA = Path(__file__).resolve().parent.parent / "data" / "report_results" / "smollm2-cpu-demo"
INT8 = "smollm2-135m_int8_tp1pp1_bs4_isl1024osl128_stream"
NASTY = "smollm2-135m_int8<script>alert('x')</script>_a&b_\"q\"_tp1pp1"
ESCAPED = "smollm2-135m_int8&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;_a&amp;b_&quot;q&quot;_tp1pp1"
TEMPLATES = ("report.html.j2", "_report.html.j2", "compare.html.j2")


class Parsed(HTMLParser):
    """The page's script elements, its cells' data-point, and its text."""

    def __init__(self) -> None:
        super().__init__()
        self.scripts = 0
        self.points: set[str] = set()
        self.text = ""

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.scripts += tag == "script"
        self.points.update(v or "" for k, v in attrs if k == "data-point")

    def handle_data(self, data: str) -> None:
        self.text += data


def test_a_point_name_with_markup_is_escaped_everywhere_in_the_page():
    slo = json.loads((DATA / "slo.json").read_text())
    rows = [{**r, "point": NASTY if r["point"] == INT8 else r["point"]} for r in results_table.collect(DATA, slo)]
    records = [{**r, "point": NASTY, "status": "failed", "cause": "<b>&</b>"} for r in writer.statuses(DATA)[1:]]
    found = Answer(slo=slo, all_rows=rows, rows=rows, screening=[], stale={NASTY + "_old": "stale: <i>"},
                   judged=verdict.judge(rows, slo), sizing=[], planned=True)  # fmt: skip
    html = page.render("sweep <&'\">", found, records)
    parsed = Parsed()
    parsed.feed(html)
    assert parsed.scripts == 0 and "<script>" not in html and "<b>&</b>" not in html
    assert NASTY in parsed.points  # the attribute reads back as the name
    assert f'data-point="{ESCAPED}"' in html and f'title="{ESCAPED}"' in html  # cells and headers
    assert f'<td class="text">{ESCAPED}</td>' in html  # the failures table
    assert "<title>trtsweep report: sweep &lt;&amp;&#x27;&quot;&gt;</title>" in html
    assert f"{NASTY}: misses rougeL" in parsed.text  # the verdict, as text
    assert f"{NASTY}_old: not judged: stale: <i>" in parsed.text and "<i>" not in html
    assert html.count("<svg") == 5  # the charts: markup passed as such, not escaped


def test_the_comparison_page_escapes_what_it_shows():
    cells = [{"label": label, "column": column, "a": 1.0, "b": 2.0, "delta": 1.0, "sense": "better"}
             for label, column, _ in compare.METRICS]  # fmt: skip
    result = {"a": "results/<a>", "b": "results/b&c", "rows": [{"point": NASTY, "concurrency": 4, "cells": cells}],
              "only": {"a": [], "b": ["<i>"]}, "verdicts": {"a": ["best: 'x'"], "b": ['"y"']}}  # fmt: skip
    html = compare.page(result)
    assert f'<td class="text">{ESCAPED}</td><td>4</td>' in html
    assert "<p><b>a</b> results/&lt;a&gt;: best: &#x27;x&#x27;</p>" in html
    assert "<p><b>b</b> results/b&amp;c: &quot;y&quot;</p>" in html
    assert "<p>only in b: &lt;i&gt;</p>" in html and "<script>" not in html


def test_the_templates_are_package_data():
    folder = resources.files("trtsweep.report") / "templates"
    for name in TEMPLATES:
        assert (folder / name).is_file(), name
    assert set(TEMPLATES) <= set(page.environment().list_templates())


def test_a_value_the_template_lacks_is_an_error_not_an_empty_string():
    with pytest.raises(jinja2.UndefinedError, match="is undefined"):
        page.environment().get_template("compare.html.j2").render()
