"""The report's "Aggregated and disaggregated" section: each configuration served by trtllm-serve aggregated (one
server per parallelism entry) and disaggregated (each value of the sweep's `disaggregated:` axis,
trtsweep.sweep.disaggregated), side by side on output tokens/s per GPU (every worker's GPUs counted), TTFT and TPOT
p99, and the best output tokens/s per GPU each reaches within the SLOs with its ratio to the best aggregated one.

A configuration here is a point's configuration less its parallelism and its disaggregated value (model, precision,
batch size, lengths, streaming, speculative variant, attention DP, MoE layout): a disaggregated value takes its
parallelism from its workers, so it is compared with every aggregated layout of the configuration. Only trtllm-serve
rows are compared (disaggregated serving is trtllm-serve's; an aggregated Triton point is another frontend, in the
flows and servers section). Shown only where a row is disaggregated.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

from trtsweep.report.speculative import best_within

COLUMNS = (("GPUs", "gpus", None), ("out tok/s/GPU", "output_tok_s_per_gpu", 1), ("TTFT p99 ms", "ttft_p99_ms", 0),
           ("TPOT p99 ms", "tpot_p99_ms", 1))  # fmt: skip
# the parts of a point's config that the comparison spans: its parallelism and its disaggregated value
LAYOUT = re.compile(r"_tp\d+pp\d+(?=_)")
SHAPE = re.compile(r"_disagg-c\d+x\d+(?:p\d+)?-g\d+x\d+(?:p\d+)?(?=_|$)")


def series(row: dict[str, Any]) -> str:
    """How the row's configuration is served: `aggregated tp2pp1` or the disaggregated label."""
    shape = row.get("disaggregated")
    return str(shape) if shape not in (None, "") else f"aggregated tp{row['tp']}pp{row['pp']}"


def groups(rows: Sequence[dict[str, Any]]) -> dict[str, dict[str, list[dict[str, Any]]]]:
    """configuration -> series (aggregated layouts first) -> its rows, for the configurations of which a
    disaggregated value was measured by trtllm-serve."""
    found: dict[str, dict[str, list[dict[str, Any]]]] = {}
    for row in rows:
        if row.get("server") != "trtllm-serve":
            continue
        key = SHAPE.sub("", LAYOUT.sub("", str(row["config"])))
        found.setdefault(key, {}).setdefault(series(row), []).append(row)
    out = {}
    for key, by_series in found.items():
        shaped = [name for name in by_series if not name.startswith("aggregated ")]
        if shaped:
            order = [name for name in by_series if name not in shaped] + shaped
            out[key] = {name: by_series[name] for name in order}
    return out


def lines(rows: Sequence[dict[str, Any]], verdict: dict[str, Any]) -> list[str]:
    """One line per configuration: the best aggregated layout's best output tokens/s per GPU within the SLOs, and
    each disaggregated value's with its ratio to that."""
    out = []
    for key, found in groups(rows).items():
        best = {name: best_within(mine, verdict.get("rows", {})) for name, mine in found.items()}
        aggregated = [name for name in best if name.startswith("aggregated ")]
        reached = {name: best[name] for name in aggregated if best[name] is not None}
        base = max(reached, key=lambda name: reached[name]) if reached else None
        parts = []
        if base is not None:
            parts.append(f"{base} {reached[base]:.1f} out tok/s per GPU (the best aggregated)")
        elif aggregated:
            parts.append("aggregated: no level within the SLOs")
        for name, value in best.items():
            if name in aggregated:
                continue
            if value is None:
                parts.append(f"{name}: no level within the SLOs")
                continue
            ratio = f" ({value / reached[base]:.2f}x the best aggregated)" if base is not None else ""
            parts.append(f"{name} {value:.1f} out tok/s per GPU{ratio}")
        out.append(f"{key}: " + "; ".join(parts))
    return out


def section(
    rows: Sequence[dict[str, Any]], verdict: dict[str, Any], side_by_side: Callable[..., Any]
) -> dict[str, Any]:
    """The template's variables of the section: `disaggregated` ((configuration, table) pairs; empty: no section)
    and `disaggregated_lines`. `side_by_side` is the page's (trtsweep.report.page._side_by_side)."""
    tables = [(key, side_by_side(found, COLUMNS, [(name, None) for name in found])) for key, found in
              groups(rows).items()]  # fmt: skip
    return {"disaggregated": tables, "disaggregated_lines": lines(rows, verdict)}
