"""`results/<sweep>/report.html`: one self-contained page (no script, no network: charts are matplotlib SVG inlined).

Top to bottom: the verdict under the sweep's SLOs; the throughput-latency trade-off (output tok/s vs TTFT p99, a
curve per configuration over its load levels) and the Pareto front; output tok/s per GPU per configuration;
TTFT / TPOT / E2E percentiles per point and level; accuracy per precision against the sweep's highest precision;
a comparison table (rows = concurrency, columns = configurations: QPS, output tok/s, TTFT avg and p99); every
row of results.csv; the failures with stage and cause. Every number in a table carries its results.csv text in
`data-value` (the same `results_table.cell`), so the page and the CSV cannot disagree. A value nobody measured is
never drawn (as 0 or otherwise): the chart leaves that level out and says so in one line under it.
"""

from __future__ import annotations

import html
import io
from collections.abc import Sequence
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from trtsweep.report.results_table import cell
from trtsweep.report.verdict import PRECISION_RANK, summary_lines

COMPARE = (("QPS", "request_throughput", 2), ("out tok/s", "output_token_throughput", 1),
           ("TTFT avg ms", "ttft_mean_ms", 0), ("TTFT p99 ms", "ttft_p99_ms", 0))  # fmt: skip
TABLE = (("point", "point", None), ("concurrency", "concurrency", None), ("GPUs", "gpus", None),
         ("ok", "success_rate", 3), ("out tok/s", "output_token_throughput", 1),
         ("out tok/s/GPU", "output_tok_s_per_gpu", 1), ("tok/s/user", "output_tok_s_per_user", 1),
         ("goodput req/s", "goodput", 2), ("TTFT p50", "ttft_p50_ms", 0), ("TTFT p99", "ttft_p99_ms", 0),
         ("TPOT p50", "tpot_p50_ms", 1), ("TPOT p99", "tpot_p99_ms", 1), ("E2E p99", "e2e_p99_ms", 0),
         ("rougeL", "rougeL", 3), ("chrF", "chrf", 3), ("queue ms", "server_queue_ms", 2))  # fmt: skip
STYLE = """
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; margin: 24px auto; max-width: 1200px;
       color: #1d232b; padding: 0 16px; }
h1 { font-size: 22px; } h2 { font-size: 17px; margin-top: 28px; border-bottom: 1px solid #d0d7de; }
.verdict { background: #eef6ee; border: 1px solid #9ccc9c; padding: 10px 14px; border-radius: 6px; }
.verdict.none { background: #fbeeee; border-color: #d99; }
.verdict p { margin: 4px 0; } .verdict .best { font-weight: 600; }
table { border-collapse: collapse; margin: 8px 0; font-variant-numeric: tabular-nums; }
th, td { border: 1px solid #d0d7de; padding: 3px 7px; text-align: right; }
th { background: #f3f5f7; } td.text { text-align: left; }
tr.best td { background: #eef6ee; } td.miss { color: #b42318; }
.charts { display: flex; flex-wrap: wrap; gap: 12px; } .charts figure { margin: 0; }
figcaption { color: #57606a; font-size: 12px; max-width: 560px; } figcaption .left-out { display: block; }
.muted { color: #57606a; } .scroll { overflow-x: auto; }
"""


def _svg(fig: Any) -> str:
    """The figure as inline SVG, the same bytes for the same numbers: no date, ids hashed from the content (a rebuilt
    report equals the last one; a shared id between two charts is a shared identical definition)."""
    buffer = io.StringIO()
    with matplotlib.rc_context({"svg.hashsalt": "trtsweep"}):
        fig.savefig(buffer, format="svg", bbox_inches="tight", metadata={"Date": None})
    plt.close(fig)
    text = buffer.getvalue()
    return text[text.index("<svg") :]


def _figure(chart: tuple[str, str], caption: str) -> str:
    """A chart (its SVG, the line saying what it left out) and its caption."""
    svg, left_out = chart
    note = f'<span class="left-out">{html.escape(left_out)}</span>' if left_out else ""
    return f"<figure>{svg}<figcaption>{html.escape(caption)}{note}</figcaption></figure>"


def _by_point(rows: Sequence[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        out.setdefault(row["point"], []).append(row)
    return out


def known(
    rows: Sequence[dict[str, Any]], columns: dict[str, str], label: dict[str, str]
) -> tuple[list[dict[str, Any]], str]:
    """The rows with a value in every one of `columns` (column -> its name), and one line naming the levels left out
    for want of a value, per configuration ("" when none was)."""
    kept: list[dict[str, Any]] = []
    gaps: dict[tuple[str, tuple[str, ...]], list[str]] = {}
    for row in rows:
        missing = tuple(name for column, name in columns.items() if row.get(column) is None)
        if missing:
            gaps.setdefault((row["point"], missing), []).append(str(row["concurrency"]))
        else:
            kept.append(row)
    parts = [f"{label[point]} at concurrency {', '.join(levels)} ({', '.join(missing)})"
             for (point, missing), levels in gaps.items()]  # fmt: skip
    return kept, f"Left out, no value: {'; '.join(parts)}." if parts else ""


def labels(points: Sequence[str]) -> tuple[dict[str, str], str]:
    """Each point's label in the charts: the parts of its id ('_'-separated) that not every point shares, and the
    shared parts ("float32" / "int8" and "smollm2-135m tp1pp1 bs4 ..." for a sweep of precisions; "engine",
    "pytorch-triton", "pytorch-serve" for one configuration on both flows)."""
    parts = {p: p.split("_") for p in points}
    shared = set.intersection(*(set(v) for v in parts.values())) if len(points) > 1 else set()
    # an engine-flow id has no flow part: beside pytorch-flow points, "engine" is what sets it apart
    flows = any(t.startswith("pytorch-") for tokens in parts.values() for t in tokens)
    out = {}
    for point, tokens in parts.items():
        label = "_".join(t for t in tokens if t not in shared) or ("engine" if flows else point)
        out[point] = label if len(label) <= 48 else label[:45] + "..."
    common = " ".join(t for t in parts[points[0]] if t in shared) if points else ""
    return out, common


def _tradeoff(rows: Sequence[dict[str, Any]], label: dict[str, str]) -> tuple[str, str]:
    drawn, left_out = known(rows, {"ttft_p99_ms": "TTFT p99", "output_token_throughput": "output tok/s"}, label)
    fig, ax = plt.subplots(figsize=(6.2, 4.0))
    for point, mine in _by_point(drawn).items():
        ax.plot([r["ttft_p99_ms"] for r in mine], [r["output_token_throughput"] for r in mine], marker="o",
                label=label[point])  # fmt: skip
        for r in mine:
            ax.annotate(f"c={r['concurrency']}", (r["ttft_p99_ms"], r["output_token_throughput"]), fontsize=7,
                        xytext=(4, 3), textcoords="offset points")  # fmt: skip
    ax.set_xlabel("TTFT p99 (ms)")
    ax.set_ylabel("output tokens/s")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    return _svg(fig), left_out


def pareto(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rows no other row beats on both TTFT p99 (lower) and output tok/s per GPU (higher), by TTFT p99."""
    known = [r for r in rows if r["ttft_p99_ms"] is not None and r["output_tok_s_per_gpu"] is not None]
    front = [
        r for r in known
        if not any(o["ttft_p99_ms"] <= r["ttft_p99_ms"] and o["output_tok_s_per_gpu"] >= r["output_tok_s_per_gpu"]
                   and (o["ttft_p99_ms"], o["output_tok_s_per_gpu"]) != (r["ttft_p99_ms"], r["output_tok_s_per_gpu"])
                   for o in known)
    ]  # fmt: skip
    return sorted(front, key=lambda r: r["ttft_p99_ms"])


def _pareto_chart(rows: Sequence[dict[str, Any]], label: dict[str, str]) -> tuple[str, str]:
    drawn, left_out = known(rows, {"ttft_p99_ms": "TTFT p99", "output_tok_s_per_gpu": "output tok/s per GPU"}, label)
    fig, ax = plt.subplots(figsize=(6.2, 4.0))
    for point, mine in _by_point(drawn).items():
        ax.scatter([r["ttft_p99_ms"] for r in mine], [r["output_tok_s_per_gpu"] for r in mine], label=label[point])
    front = pareto(drawn)
    ax.step([r["ttft_p99_ms"] for r in front], [r["output_tok_s_per_gpu"] for r in front], where="post", color="k",
            linestyle="--", label="Pareto front")  # fmt: skip
    ax.set_xlabel("TTFT p99 (ms)")
    ax.set_ylabel("output tokens/s per GPU")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    return _svg(fig), left_out


def _per_gpu(rows: Sequence[dict[str, Any]], label: dict[str, str]) -> tuple[str, str]:
    drawn, left_out = known(rows, {"output_tok_s_per_gpu": "output tok/s per GPU"}, label)
    points = _by_point(drawn)
    best = [max(r["output_tok_s_per_gpu"] for r in mine) for mine in points.values()]
    fig, ax = plt.subplots(figsize=(6.2, 0.6 + 0.45 * len(points)))
    ax.barh([label[p] for p in points], best, color="#4c72b0")
    ax.invert_yaxis()
    ax.set_xlabel("best output tokens/s per GPU (any load level)")
    ax.tick_params(axis="y", labelsize=7)
    ax.grid(axis="x", alpha=0.3)
    return _svg(fig), left_out


def _series(rows: Sequence[dict[str, Any]], column: str) -> tuple[list[Any], list[Any]]:
    """(concurrency, value) of the rows that have a value in `column`."""
    drawn = [r for r in rows if r[column] is not None]
    return [r["concurrency"] for r in drawn], [r[column] for r in drawn]


def _latencies(rows: Sequence[dict[str, Any]], label: dict[str, str]) -> tuple[str, str]:
    panels = (("TTFT", "ttft"), ("TPOT", "tpot"), ("E2E", "e2e"))
    names = {f"{m}_{s}_ms": f"{n} {s}" for n, m in panels for s in ("p50", "p99")}
    left_out = known(rows, names, label)[1]
    fig, axes = plt.subplots(1, 3, figsize=(12.4, 3.6))
    for ax, (name, metric) in zip(axes, panels, strict=True):
        for point, mine in _by_point(rows).items():
            (line,) = ax.plot(*_series(mine, f"{metric}_p50_ms"), marker="o", label=f"{label[point]} p50")
            ax.plot(*_series(mine, f"{metric}_p99_ms"), marker="^", linestyle="--", color=line.get_color(),
                    label=f"{label[point]} p99")  # fmt: skip
        ax.set_title(f"{name} (ms)")
        ax.set_xlabel("concurrency")
        ax.grid(alpha=0.3)
    handles, legend = axes[0].get_legend_handles_labels()  # below the panels, never over a curve
    fig.legend(handles, legend, loc="upper center", bbox_to_anchor=(0.5, -0.04), ncol=2, fontsize=7, frameon=False)
    return _svg(fig), left_out


def _accuracy(rows: Sequence[dict[str, Any]], metric: str, label: dict[str, str]) -> tuple[str, str]:
    drawn, left_out = known(rows, {metric: metric}, label)
    points = _by_point(drawn)
    values = [sum(r[metric] for r in mine) / len(mine) for mine in points.values()]
    precisions = [mine[0]["precision"] for mine in points.values()]
    fig, ax = plt.subplots(figsize=(6.2, 0.6 + 0.45 * len(points)))
    names = [label[p] if str(prec) in label[p].split("_") else f"{label[p]} ({prec})"
             for p, prec in zip(points, precisions, strict=True)]  # fmt: skip
    ax.barh(names, values, color="#55a868")
    ranks = [PRECISION_RANK.get(str(prec), 0) for prec in precisions]
    if values:  # the sweep's highest precision: what the accuracy SLO measures the drop against
        ax.axvline(values[ranks.index(max(ranks))], color="k", linestyle=":", linewidth=1)
    ax.invert_yaxis()
    ax.set_xlabel(f"{metric} (mean over load levels)")
    ax.tick_params(axis="y", labelsize=7)
    ax.grid(axis="x", alpha=0.3)
    return _svg(fig), left_out


def _td(row: dict[str, Any], column: str, digits: int | None, extra: str = "", text: str | None = None) -> str:
    """A table cell showing the value (or `text`, with the value as its title) rounded to `digits`; data-value is
    its results.csv text."""
    value = row.get(column)
    shown = "-" if value is None else (f"{value:.{digits}f}" if digits is not None and isinstance(value, float)
                                       else str(value))  # fmt: skip
    css = "text" if digits is None and isinstance(value, str) else ""
    where = f'data-point="{html.escape(row["point"])}" data-concurrency="{row["concurrency"]}" data-column="{column}"'
    if text is not None:
        where, shown = f'{where} title="{html.escape(shown)}"', text
    return f'<td class="{css} {extra}" {where} data-value="{html.escape(cell(value))}">{html.escape(shown)}</td>'


def _comparison(rows: Sequence[dict[str, Any]], label: dict[str, str]) -> str:
    points = _by_point(rows)
    head = "".join(
        f'<th colspan="{len(COMPARE)}" title="{html.escape(p)}">{html.escape(label[p])}</th>' for p in points
    )
    sub = "".join(f"<th>{name}</th>" for _ in points for name, _, _ in COMPARE)
    body = []
    for conc in sorted({r["concurrency"] for r in rows}):
        cells = []
        for mine in points.values():
            row = next((r for r in mine if r["concurrency"] == conc), None)
            cells += [_td(row, col, d) if row else "<td>-</td>" for _, col, d in COMPARE]
        body.append(f"<tr><th>{conc}</th>{''.join(cells)}</tr>")
    return (f'<table class="compare"><tr><th rowspan="2">concurrency</th>{head}</tr><tr>{sub}</tr>'
            f"{''.join(body)}</table>")  # fmt: skip


FLOW_COMPARE = (("out tok/s", "output_token_throughput", 1), ("TTFT p99 ms", "ttft_p99_ms", 0),
                ("TPOT p50 ms", "tpot_p50_ms", 1), ("ok", "success_rate", 3), ("rougeL", "rougeL", 3))  # fmt: skip


def variant(row: dict[str, Any]) -> str:
    """How a row's configuration was served: engine flow on Triton, PyTorch flow on Triton or on trtllm-serve."""
    return f"{row['flow']} / {row['server']}"


def flows_compared(rows: Sequence[dict[str, Any]]) -> dict[str, dict[str, list[dict[str, Any]]]]:
    """config -> variant -> its rows, for every configuration measured by more than one flow or server."""
    groups: dict[str, dict[str, list[dict[str, Any]]]] = {}
    for row in rows:
        groups.setdefault(row["config"], {}).setdefault(variant(row), []).append(row)
    return {config: found for config, found in groups.items() if len(found) > 1}


def _flows(rows: Sequence[dict[str, Any]]) -> str:
    """Each configuration served more than one way, side by side: rows (configuration, concurrency)."""
    tables = []
    for config, found in flows_compared(rows).items():
        head = "".join(f'<th colspan="{len(FLOW_COMPARE)}">{html.escape(v)}</th>' for v in found)
        sub = "".join(f"<th>{name}</th>" for _ in found for name, _, _ in FLOW_COMPARE)
        body = []
        for conc in sorted({r["concurrency"] for mine in found.values() for r in mine}):
            cells = []
            for mine in found.values():
                row = next((r for r in mine if r["concurrency"] == conc), None)
                cells += [_td(row, col, d) if row else "<td>-</td>" for _, col, d in FLOW_COMPARE]
            body.append(f"<tr><th>{conc}</th>{''.join(cells)}</tr>")
        tables.append(f'<h3>{html.escape(config)}</h3><table class="flows"><tr><th rowspan="2">concurrency</th>{head}'
                      f"</tr><tr>{sub}</tr>{''.join(body)}</table>")  # fmt: skip
    return "".join(tables)


def _results(rows: Sequence[dict[str, Any]], verdict: dict[str, Any], label: dict[str, str]) -> str:
    best = verdict.get("best")
    head = "".join(f"<th>{name}</th>" for name, _, _ in TABLE) + "<th>SLOs missed</th>"
    body = []
    for row in rows:
        where = (row["point"], row["concurrency"])
        missed = verdict["rows"].get(where, [])
        excluded = verdict["excluded"].get(where)
        css = (
            ' class="best"'
            if best is not None and (row["point"], row["concurrency"]) == (best["point"], best["concurrency"])
            else ""
        )
        cells = "".join(_td(row, col, d, text=label[row["point"]] if col == "point" else None) for _, col, d in TABLE)
        slo = "; ".join(missed) if missed else ("met" if verdict["slo"] else "-")
        slo = f"not a candidate: {excluded}; {slo}" if excluded else slo
        miss = " miss" if missed or excluded else ""
        body.append(f'<tr{css}>{cells}<td class="text{miss}">{html.escape(slo)}</td></tr>')
    return f'<div class="scroll"><table class="results"><tr>{head}</tr>{"".join(body)}</table></div>'


def _failures(records: Sequence[dict[str, Any]]) -> str:
    bad = [r for r in records if r.get("status") != "ok"]
    if not bad:
        return '<p class="muted">none: every point finished ok</p>'
    fields = ("point", "status", "stage", "host", "cause")
    rows = "".join(
        "<tr>" + "".join(f'<td class="text">{html.escape(str(r.get(f)))}</td>' for f in fields) + "</tr>" for r in bad
    )
    head = "".join(f"<th>{f}</th>" for f in fields)
    return f'<table class="failures"><tr>{head}</tr>{rows}</table>'


def render(
    name: str, rows: Sequence[dict[str, Any]], verdict: dict[str, Any], records: Sequence[dict[str, Any]]
) -> str:
    lines = summary_lines(verdict)
    css = "verdict" if verdict.get("best") else "verdict none"
    slo = ", ".join(f"{k} {v}" for k, v in verdict["slo"].items()) or "none given (add slo: to the sweep file)"
    verdict_html = (
        f'<div class="{css}"><p class="best">{html.escape(lines[0])}</p>'
        + "".join(f"<p>{html.escape(line)}</p>" for line in lines[1:])
        + f'<p class="muted">SLOs: {html.escape(slo)}</p></div>'
    )
    charts, label, common = "", *labels(list(_by_point(rows)))
    if common:
        common = (
            f'<p class="muted">Charts name a configuration by what sets it apart; all share: {html.escape(common)}.</p>'
        )
    if rows:
        metric = verdict["slo"].get("accuracy_metric", "rougeL")
        charts = (
            '<h2>Throughput vs latency</h2><div class="charts">'
            + _figure(_tradeoff(rows, label), "Output tokens/s against TTFT p99, one curve per configuration over its "
                      "load levels (c = concurrency): up and to the left is better.")
            + _figure(_pareto_chart(rows, label), "Every (configuration, load level); the dashed line is the Pareto "
                      "front (no other row has both lower TTFT p99 and more output tokens/s per GPU).")
            + "</div><h2>Output per GPU</h2><div class=\"charts\">"
            + _figure(_per_gpu(rows, label), "Best output tokens/s per GPU of each configuration.")
            + _figure(_accuracy(rows, metric, label), f"{metric} per configuration (its precision in brackets "
                      "where the label does not say it); the dotted line is the sweep's highest precision.")
            + "</div><h2>Latency percentiles</h2>"
            + _figure(_latencies(rows, label), "p50 (solid) and p99 (dashed) per configuration and concurrency.")
        )  # fmt: skip
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>trtsweep report: {html.escape(name)}</title>
<style>{STYLE}</style></head><body>
<h1>trtsweep report: {html.escape(name)}</h1>
<p class="muted">{len({r["point"] for r in rows})} configuration(s) measured, {len(records)} point(s) in the sweep;
latencies in ms; TPOT = (E2E - TTFT) / (output tokens - 1); tok/s/user = 1000 / TPOT p50; numbers are those of
results.csv.</p>
<h2>Verdict</h2>{verdict_html}
{common}{charts}
{"<h2>Flows and servers (same configuration)</h2>" + _flows(rows) if flows_compared(rows) else ""}
<h2>Side by side (rows: concurrency)</h2>{_comparison(rows, label) if rows else "<p>nothing measured</p>"}
<h2>Every configuration and load level</h2>{_results(rows, verdict, label) if rows else "<p>nothing measured</p>"}
<h2>Failures</h2>{_failures(records)}
</body></html>
"""
