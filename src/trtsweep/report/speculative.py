"""The report's comparison with and without speculative decoding: each configuration's speculative variants (the
sweep's `speculative:` axis, trtsweep.sweep.pytorch_axes) served by one server, side by side on output tokens/s per
GPU, TTFT and TPOT and the acceptance (the server's and the client's tokens per step), and the best output tokens/s
per GPU each reaches within the SLOs; a line for each point whose server reports no acceptance or disagrees with the
client (trtsweep.report.acceptance)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

SPEC_PART = re.compile(r"_spec-[A-Za-z0-9._-]+$")  # the variant's part of a point's config (the last one)
COLUMNS = (("out tok/s/GPU", "output_tok_s_per_gpu", 1), ("TTFT p99 ms", "ttft_p99_ms", 0),
           ("TPOT p99 ms", "tpot_p99_ms", 1), ("accept len", "acceptance_length", 2),
           ("client tok/step", "tokens_per_chunk", 2), ("accept rate", "acceptance_rate", 2))  # fmt: skip


def groups(rows: Sequence[dict[str, Any]]) -> dict[str, dict[str, list[dict[str, Any]]]]:
    """ "<configuration without the variant> on <server>" -> variant -> its rows, where more than one variant of a
    configuration was measured by the same server."""
    out: dict[str, dict[str, list[dict[str, Any]]]] = {}
    for row in rows:
        if row.get("speculative") in (None, ""):
            continue
        key = f"{SPEC_PART.sub('', str(row['config']))} on {row['server']}"
        out.setdefault(key, {}).setdefault(str(row["speculative"]), []).append(row)
    return {key: found for key, found in out.items() if len(found) > 1}


def _number(value: Any) -> float | None:
    try:
        return None if value in (None, "") else float(value)
    except (TypeError, ValueError):
        return None


def best_within(found: list[dict[str, Any]], missed: dict[tuple[Any, Any], list[str]]) -> float | None:
    """The highest output tokens/s per GPU of a variant's levels that met every SLO (None: none met them)."""
    ok = [_number(r.get("output_tok_s_per_gpu")) for r in found if not missed.get((r["point"], r["concurrency"]))]
    values = [v for v in ok if v is not None]
    return max(values) if values else None


def lines(rows: Sequence[dict[str, Any]], verdict: dict[str, Any]) -> list[str]:
    """One line per compared configuration: each variant's best output tokens/s per GPU within the SLOs, against
    the variant without speculative decoding."""
    out = []
    for key, found in groups(rows).items():
        best = {name: best_within(mine, verdict.get("rows", {})) for name, mine in found.items()}
        base = best.get("none")
        parts = []
        for name, value in best.items():
            shown = "no level within the SLOs" if value is None else f"{value:.1f} out tok/s per GPU"
            if value is not None and base and name != "none":
                shown += f" ({value / base:.2f}x none)"
            parts.append(f"{name} {shown}")
        out.append(f"{key}: " + "; ".join(parts))
    # where the server's acceptance is missing (its release does not report the decoding type) or disagrees with
    # the client's tokens per step (trtsweep.report.acceptance): once per point and what was said
    quiet = (None, "", "agree")
    said = {(r["point"], r["acceptance_check"]): None for r in rows if r.get("acceptance_check") not in quiet}
    out += [f"acceptance of {point}: {check}" for point, check in said]
    return out
