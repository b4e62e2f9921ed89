"""`results/<sweep>/report.html`: one self-contained page (no script, no network: charts are matplotlib SVG inlined).

Top to bottom: the verdict under the sweep's SLOs; the throughput-latency trade-off (output tok/s vs TTFT p99, a
curve per configuration over its load levels) and the Pareto front; output tok/s per GPU per configuration;
TTFT / TPOT / E2E percentiles per point and level; accuracy per precision against the sweep's highest precision;
a comparison table (rows = concurrency, columns = configurations: QPS, output tok/s, TTFT avg and p99); every
row of results.csv; the failures with stage and cause. Every number in a table carries its results.csv text in
`data-value` (the same `results_table.cell`), so the page and the CSV cannot disagree. A value nobody measured is
never drawn (as 0 or otherwise): the chart leaves that level out and says so in one line under it.

The markup is in templates/report.html.j2 (and its macros, templates/_report.html.j2); this module computes what
it shows: the charts, the labels, every number as text.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from typing import Any, NamedTuple

import matplotlib
from markupsafe import Markup

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from trtsweep.report import disaggregated, speculative
from trtsweep.report.answer import Answer
from trtsweep.report.results_table import cell
from trtsweep.report.templating import environment
from trtsweep.report.verdict import PRECISION_RANK

COMPARE = (("QPS", "request_throughput", 2), ("out tok/s", "output_token_throughput", 1),
           ("TTFT avg ms", "ttft_mean_ms", 0), ("TTFT p99 ms", "ttft_p99_ms", 0))  # fmt: skip
TABLE = (("point", "point", None), ("concurrency", "concurrency", None), ("GPUs", "gpus", None),
         ("ok", "success_rate", 3), ("out tok/s", "output_token_throughput", 1),
         ("out tok/s/GPU", "output_tok_s_per_gpu", 1), ("tok/s/user", "output_tok_s_per_user", 1),
         ("goodput req/s", "goodput", 2), ("TTFT p50", "ttft_p50_ms", 0), ("TTFT p99", "ttft_p99_ms", 0),
         ("TPOT p50", "tpot_p50_ms", 1), ("TPOT p99", "tpot_p99_ms", 1), ("E2E p99", "e2e_p99_ms", 0),
         ("rougeL", "rougeL", 3), ("chrF", "chrf", 3), ("queue ms", "server_queue_ms", 2))  # fmt: skip
# beside throughput when any level has GPU telemetry (results.csv's, trtsweep.perf.telemetry): what the GPUs did
GPU_TABLE = (("GPU util %", "gpu_util_pct", 0), ("GPU W", "gpu_power_w", 0), ("GPU MiB peak", "gpu_mem_peak_mb", 0),
             ("out tok/J", "out_tok_per_joule", 2))  # fmt: skip
FAILURE_FIELDS = ("point", "status", "stage", "host", "cause")


def table_columns(rows: Sequence[dict[str, Any]]) -> tuple[tuple[str, str, int | None], ...]:
    """The results table's (heading, column, digits): GPU_TABLE after the throughput where a level has telemetry."""
    if not any(r.get(column) is not None for r in rows for _, column, _ in GPU_TABLE):
        return TABLE
    at = [column for _, column, _ in TABLE].index("output_tok_s_per_gpu") + 1
    return (*TABLE[:at], *GPU_TABLE, *TABLE[at:])


class Chart(NamedTuple):
    """A chart: matplotlib's SVG (markup, inlined as is) and the line saying which levels it left out ("" if none)."""

    svg: Markup
    left_out: str


class Cell(NamedTuple):
    """A table cell of a results.csv value: `value` is its results.csv text (data-value), `shown` what the cell says
    (the value rounded, or a label with the value as `title`); `text` cells align left."""

    point: str
    concurrency: Any
    column: str
    value: str
    shown: str
    text: bool
    title: str | None = None


class SideBySide(NamedTuple):
    """Column groups side by side (`groups`: label and title of each, every group with the columns `names`), a row
    per concurrency (None: that group has no such level)."""

    groups: list[tuple[str, str | None]]
    names: list[str]
    rows: list[tuple[Any, list[Cell | None]]]


class ResultRow(NamedTuple):
    """A row of the table of every configuration and level: `slo` says which SLOs it missed (`miss`) or that it met
    them; `best` is the verdict's row."""

    cells: list[Cell]
    slo: str
    miss: bool
    best: bool


def _svg(fig: Any) -> Markup:
    """The figure as inline SVG, the same bytes for the same numbers: no date, ids hashed from the content (a rebuilt
    report equals the last one; a shared id between two charts is a shared identical definition)."""
    buffer = io.StringIO()
    with matplotlib.rc_context({"svg.hashsalt": "trtsweep"}):
        fig.savefig(buffer, format="svg", bbox_inches="tight", metadata={"Date": None})
    plt.close(fig)
    text = buffer.getvalue()
    return Markup(text[text.index("<svg") :])


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


def _tradeoff(rows: Sequence[dict[str, Any]], label: dict[str, str]) -> Chart:
    drawn, left_out = known(rows, {"ttft_p99_ms": "TTFT p99", "output_token_throughput": "output tok/s"}, label)
    fig, ax = plt.subplots(figsize=(6.2, 4.0))
    for point, measured in _by_point(drawn).items():
        # along the load: a capacity search measures its levels out of order (1, max, then bisection)
        mine = sorted(measured, key=lambda r: (r["concurrency"] is None, r["concurrency"] or 0))
        ax.plot([r["ttft_p99_ms"] for r in mine], [r["output_token_throughput"] for r in mine], marker="o",
                label=label[point])  # fmt: skip
        for r in mine:
            ax.annotate(f"c={r['concurrency']}", (r["ttft_p99_ms"], r["output_token_throughput"]), fontsize=7,
                        xytext=(4, 3), textcoords="offset points")  # fmt: skip
    ax.set_xlabel("TTFT p99 (ms)")
    ax.set_ylabel("output tokens/s")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    return Chart(_svg(fig), left_out)


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


def _pareto_chart(rows: Sequence[dict[str, Any]], label: dict[str, str]) -> Chart:
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
    return Chart(_svg(fig), left_out)


def _per_gpu(rows: Sequence[dict[str, Any]], label: dict[str, str]) -> Chart:
    drawn, left_out = known(rows, {"output_tok_s_per_gpu": "output tok/s per GPU"}, label)
    points = _by_point(drawn)
    best = [max(r["output_tok_s_per_gpu"] for r in mine) for mine in points.values()]
    fig, ax = plt.subplots(figsize=(6.2, 0.6 + 0.45 * len(points)))
    ax.barh([label[p] for p in points], best, color="#4c72b0")
    ax.invert_yaxis()
    ax.set_xlabel("best output tokens/s per GPU (any load level)")
    ax.tick_params(axis="y", labelsize=7)
    ax.grid(axis="x", alpha=0.3)
    return Chart(_svg(fig), left_out)


def _series(rows: Sequence[dict[str, Any]], column: str) -> tuple[list[Any], list[Any]]:
    """(concurrency, value) of the rows that have a value in `column`."""
    drawn = [r for r in rows if r[column] is not None]
    return [r["concurrency"] for r in drawn], [r[column] for r in drawn]


def _latencies(rows: Sequence[dict[str, Any]], label: dict[str, str]) -> Chart:
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
    return Chart(_svg(fig), left_out)


def _accuracy(rows: Sequence[dict[str, Any]], metric: str, label: dict[str, str]) -> Chart:
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
    return Chart(_svg(fig), left_out)


def _cell(row: dict[str, Any], column: str, digits: int | None, label: str | None = None) -> Cell:
    """The row's value in `column` rounded to `digits` (or `label`, with that as its title)."""
    value = row.get(column)
    shown = "-" if value is None else (f"{value:.{digits}f}" if digits is not None and isinstance(value, float)
                                       else str(value))  # fmt: skip
    text = digits is None and isinstance(value, str)
    if label is None:
        return Cell(row["point"], row["concurrency"], column, cell(value), shown, text)
    return Cell(row["point"], row["concurrency"], column, cell(value), label, text, title=shown)


def _side_by_side(
    groups: dict[str, list[dict[str, Any]]],
    columns: Sequence[tuple[str, str, int | None]],
    heads: list[tuple[str, str | None]],
) -> SideBySide:
    """`groups` (key -> its rows; `heads`: label and title of each) side by side, `columns` of each, by concurrency."""
    rows = []
    for conc in sorted({r["concurrency"] for mine in groups.values() for r in mine}):
        cells: list[Cell | None] = []
        for mine in groups.values():
            row = next((r for r in mine if r["concurrency"] == conc), None)
            cells += [_cell(row, col, d) if row else None for _, col, d in columns]
        rows.append((conc, cells))
    return SideBySide(heads, [name for name, _, _ in columns], rows)


def _comparison(rows: Sequence[dict[str, Any]], label: dict[str, str]) -> SideBySide:
    """Every configuration side by side (named by its label, titled with its id)."""
    points = _by_point(rows)
    return _side_by_side(points, COMPARE, [(label[p], p) for p in points])


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


def flow_tables(rows: Sequence[dict[str, Any]]) -> list[tuple[str, SideBySide]]:
    """Each configuration served more than one way, its variants side by side: (configuration, table)."""
    return [(config, _side_by_side(found, FLOW_COMPARE, [(v, None) for v in found]))
            for config, found in flows_compared(rows).items()]  # fmt: skip


def speculative_tables(rows: Sequence[dict[str, Any]]) -> list[tuple[str, SideBySide]]:
    """Each configuration's speculative variants on one server side by side: (configuration on server, table)."""
    return [(key, _side_by_side(found, speculative.COLUMNS, [(v, None) for v in found]))
            for key, found in speculative.groups(rows).items()]  # fmt: skip


def _results(rows: Sequence[dict[str, Any]], verdict: dict[str, Any], label: dict[str, str]) -> list[ResultRow]:
    best, table = verdict.get("best"), table_columns(rows)
    out = []
    for row in rows:
        where = (row["point"], row["concurrency"])
        missed = verdict["rows"].get(where, [])
        excluded = verdict["excluded"].get(where)
        slo = "; ".join(missed) if missed else ("met" if verdict["slo"] else "-")
        cells = [_cell(row, col, d, label[row["point"]] if col == "point" else None) for _, col, d in table]
        out.append(ResultRow(cells, f"not a candidate: {excluded}; {slo}" if excluded else slo,
                             bool(missed or excluded),
                             best is not None and where == (best["point"], best["concurrency"])))  # fmt: skip
    return out


def _charts(rows: Sequence[dict[str, Any]], metric: str, label: dict[str, str]) -> dict[str, Chart]:
    """The page's charts, by their names in the template."""
    return {"tradeoff": _tradeoff(rows, label), "pareto": _pareto_chart(rows, label), "per_gpu": _per_gpu(rows, label),
            "accuracy": _accuracy(rows, metric, label), "latencies": _latencies(rows, label)}  # fmt: skip


def render(name: str, found: Answer, records: Sequence[dict[str, Any]], search: Sequence[str] = (),
           ran_on: Sequence[str] = ()) -> str:  # fmt: skip
    """The page of the sweep's answer (report.answer: its judged rows, verdict and sizing); `search`: the search's
    account (trtsweep.report.search.lines); `ran_on`: the Slurm allocation it ran in (trtsweep.report.allocation)."""
    rows, verdict = found.rows, found.judged
    label, common = labels(list(_by_point(rows)))
    metric = verdict["slo"].get("accuracy_metric", "rougeL")
    return (
        environment()
        .get_template("report.html.j2")
        .render(
            name=name,
            configurations=len({r["point"] for r in rows}),
            points=len(records),
            verdict=found.verdict_lines(),
            best=bool(verdict.get("best")),
            sizing=found.sizing,
            search=list(search),
            ran_on=list(ran_on),
            slo=", ".join(f"{k} {v}" for k, v in verdict["slo"].items()) or "none given (add slo: to the sweep file)",
            common=common,
            metric=metric,
            charts=_charts(rows, metric, label) if rows else None,
            flows=flow_tables(rows),
            speculative=speculative_tables(rows),
            speculative_lines=speculative.lines(rows, verdict),
            **disaggregated.section(rows, verdict, _side_by_side),
            comparison=_comparison(rows, label) if rows else None,
            results=_results(rows, verdict, label) if rows else None,
            columns=[heading for heading, _, _ in table_columns(rows)],
            failure_fields=FAILURE_FIELDS,
            failures=[[str(r.get(f)) for f in FAILURE_FIELDS] for r in records if r.get("status") != "ok"],
        )
    )
