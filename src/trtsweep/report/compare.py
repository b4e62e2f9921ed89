"""`trtsweep compare results/<a> results/<b>`: two sweeps side by side (say the same matrix on two TensorRT-LLM
versions, or two GPU types), configuration by configuration and load level by load level.

Each sweep's rows and verdict are its answer (trtsweep.report.answer: the current plan's full measurements; screening
and stale points are not compared). Rows are matched by point id and concurrency; for each headline number it shows
a, b and the change b vs a, marked better or worse by the number's direction (throughput and accuracy up, latency
down) and highlighted when it moves by `THRESHOLD` or more. Points only one sweep has are listed; each sweep's
verdict is quoted. The page's markup is in templates/compare.html.j2.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from trtsweep.errors import TrtsweepError
from trtsweep.report.answer import answer
from trtsweep.report.templating import environment

# (label, results.csv column, higher is better)
METRICS = (
    ("out tok/s", "output_token_throughput", True),
    ("out tok/s/GPU", "output_tok_s_per_gpu", True),
    ("TTFT p99 ms", "ttft_p99_ms", False),
    ("TPOT p99 ms", "tpot_p99_ms", False),
    ("E2E p99 ms", "e2e_p99_ms", False),
    ("success", "success_rate", True),
    ("rougeL", "rougeL", True),
)
THRESHOLD = 0.05


def _sweep(results_dir: Path) -> tuple[dict[tuple[str, Any], dict[str, Any]], list[str]]:
    if not results_dir.is_dir():
        raise TrtsweepError(f"{results_dir}: no such results directory")
    found = answer(results_dir)  # the sweep's answer: its verdict, over the rows it judges
    if not found.rows:
        raise TrtsweepError(f"{results_dir}: {found.verdict_lines()[0]}: nothing to compare")
    return {(r["point"], r["concurrency"]): r for r in found.rows}, found.verdict_lines()[:1]


def change(a: Any, b: Any, higher_better: bool) -> tuple[float | None, str]:
    """(relative change b vs a, "better" / "worse" / "same" / "") of one number."""
    if a is None or b is None or a == 0:
        return None, ""
    delta = (b - a) / abs(a)
    if abs(delta) < 1e-12:
        return 0.0, "same"
    return delta, "better" if (delta > 0) == higher_better else "worse"


def compare(a_dir: Path, b_dir: Path) -> dict[str, Any]:
    a, a_verdict = _sweep(a_dir)
    b, b_verdict = _sweep(b_dir)
    rows = []
    for key in sorted(set(a) & set(b), key=lambda k: (k[0], k[1] or 0)):
        cells = []
        for label, column, higher in METRICS:
            delta, sense = change(a[key][column], b[key][column], higher)
            cells.append({"label": label, "column": column, "a": a[key][column], "b": b[key][column],
                          "delta": delta, "sense": sense})  # fmt: skip
        rows.append({"point": key[0], "concurrency": key[1], "cells": cells})
    only = {"a": sorted({k[0] for k in a} - {k[0] for k in b}), "b": sorted({k[0] for k in b} - {k[0] for k in a})}
    return {"a": str(a_dir), "b": str(b_dir), "rows": rows, "only": only, "verdicts": {"a": a_verdict, "b": b_verdict}}


def _num(value: Any) -> str:
    return "-" if value is None else f"{value:.3g}" if isinstance(value, float) and abs(value) < 10 else f"{value:.1f}"


def _pct(delta: float | None) -> str:
    return "" if delta is None else f"{delta * 100:+.1f}%"


def text(result: dict[str, Any]) -> str:
    lines = []
    for side in ("a", "b"):
        lines += [f"{side}: {result[side]}", *(f"   {line}" for line in result["verdicts"][side])]
    lines.append("")
    for row in result["rows"]:
        marks = []
        for c in row["cells"]:
            flag = "!" if c["delta"] is not None and abs(c["delta"]) >= THRESHOLD else ""
            marks.append(f"{c['label']} {_num(c['a'])} -> {_num(c['b'])} {_pct(c['delta'])}{flag}".rstrip())
        lines.append(f"{row['point']} c={row['concurrency']}: " + "; ".join(marks))
    for side in ("a", "b"):
        if result["only"][side]:
            lines.append(f"only in {side}: {', '.join(result['only'][side])}")
    lines.append(f"(! = moved by {THRESHOLD:.0%} or more)")
    return "\n".join(lines)


def _cells(row: dict[str, Any]) -> list[dict[str, Any]]:
    """A row's numbers as the page shows them: a, b, the change, and how it reads (better/worse, strong)."""
    return [{"a": _num(c["a"]), "b": _num(c["b"]), "change": _pct(c["delta"]), "sense": c["sense"],
             "strong": c["delta"] is not None and abs(c["delta"]) >= THRESHOLD, "column": c["column"]}
            for c in row["cells"]]  # fmt: skip


def page(result: dict[str, Any]) -> str:
    return (
        environment()
        .get_template("compare.html.j2")
        .render(
            metrics=[label for label, _, _ in METRICS],
            threshold=f"{THRESHOLD:.0%}",
            verdicts=[(side, result[side], " ".join(result["verdicts"][side])) for side in ("a", "b")],
            rows=[(row, _cells(row)) for row in result["rows"]],
            only=[(side, ", ".join(result["only"][side])) for side in ("a", "b") if result["only"][side]],
        )
    )
