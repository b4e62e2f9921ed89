"""The sweep's answer under its SLOs: which configuration and load level to put in production, and why not the others.

The SLOs come from the sweep's `slo:` mapping (trtsweep.sweep.slo).

A (point, level) row meets the SLOs when every one holds (a number nobody measured does not meet its SLO). Only rows
that measured what they claim are candidates: a point that did not finish ok (failed, lost) and a level whose server was
not the expected one (llm-perf's identity check, results.csv `server_identity_error`) or whose GPUs another process used
during it (results.csv `gpu_shared`) are never the best, nor the accuracy reference. The best is the candidate with the
highest output tok/s per GPU among those that meet the SLOs, ties broken by fewer GPUs, then lower TTFT p99. Every other
configuration is told which SLO its best row misses (its best row: the one that misses the fewest SLOs, then the highest
throughput), or why it is no candidate. Goodput in results.csv counts the requests within the latency SLOs. `judge`
judges the rows it is given; which rows those are is the sweep's answer's to say (trtsweep.report.answer, the one caller
outside tests).
"""

from __future__ import annotations

from typing import Any

from trtsweep.sweep.slo import LIMITS

# higher = more precise: the reference of an accuracy drop is the model's most precise point
PRECISION_RANK = {"float32": 9, "fp32": 9, "float16": 8, "bfloat16": 8, "fp16": 8, "bf16": 8, "fp8": 6, "int8": 5,
                  "int8_sq": 5, "w8a8": 5, "int4_awq": 3, "w4a16": 3, "int4": 3, "w4a8_awq": 3, "nvfp4": 3}  # fmt: skip


def _references(rows: list[dict[str, Any]], metric: str) -> dict[tuple[str, Any], tuple[float, str]]:
    """(model, concurrency) -> (accuracy, point) of the model's most precise point that measured it."""
    best: dict[tuple[str, Any], tuple[int, float, str]] = {}
    for row in rows:
        value = row.get(metric)
        if value is None:
            continue
        key, rank = (row["model"], row["concurrency"]), PRECISION_RANK.get(str(row.get("precision")), 0)
        if key not in best or rank > best[key][0]:
            best[key] = (rank, value, row["point"])
    return {key: (value, point) for key, (_, value, point) in best.items()}


def misses(row: dict[str, Any], slo: dict[str, Any], references: dict[tuple[str, Any], tuple[float, str]]) -> list[str]:
    """Each SLO the row misses, as one phrase ("TTFT p99 1293.2 ms > 1000 ms")."""
    out = []
    for key, label in LIMITS.items():
        if key in slo:
            value = row.get(key)
            if value is None or value > slo[key]:
                out.append(f"{label} {_num(value)} ms > {slo[key]:g} ms")
    if "min_success_rate" in slo:
        rate = row.get("success_rate")
        if rate is None or rate < slo["min_success_rate"]:
            out.append(f"success rate {_num(rate, 3)} < {slo['min_success_rate']:g}")
    metric = slo.get("accuracy_metric", "rougeL")
    value = row.get(metric)
    if "min_accuracy" in slo and (value is None or value < slo["min_accuracy"]):
        out.append(f"{metric} {_num(value, 3)} < {slo['min_accuracy']:g}")
    if "max_accuracy_drop" in slo:
        reference = references.get((row["model"], row["concurrency"]))
        if value is None or reference is None:
            out.append(f"{metric} unknown: no accuracy to compare")
        elif reference[0] - value > slo["max_accuracy_drop"]:
            out.append(f"{metric} {value:.3f} is {reference[0] - value:.3f} below {reference[1]} "
                       f"({reference[0]:.3f}; max drop {slo['max_accuracy_drop']:g})")  # fmt: skip
    return out


def _num(value: Any, digits: int = 1) -> str:
    return "unknown" if value is None else f"{value:.{digits}f}"


def _rate(row: dict[str, Any]) -> float:
    return row.get("output_tok_s_per_gpu") or 0.0


def excluded(row: dict[str, Any]) -> str | None:
    """Why the row can never be the best, whatever the SLOs (None: it is a candidate)."""
    state = row.get("point_status")
    if state != "ok":
        return f"the point did not finish ok ({state})" if state else "the point has no status record"
    if row.get("server_identity_error"):
        return f"not the expected server's numbers: {row['server_identity_error']}"
    if row.get("gpu_shared"):
        return f"measured on shared GPUs: {row['gpu_shared']}"
    return None


def judge(rows: list[dict[str, Any]], slo: dict[str, Any]) -> dict[str, Any]:
    """{"slo", "best": a row or None, "rows": {(point, concurrency): [misses]}, "excluded": {(point, concurrency):
    why it is no candidate}, "configs": [{"point", "meets", "row", "misses", "excluded"}]}"""
    key = lambda r: (r["point"], r["concurrency"])  # noqa: E731
    out = {key(r): reason for r in rows if (reason := excluded(r))}
    references = _references([r for r in rows if key(r) not in out], slo.get("accuracy_metric", "rougeL"))
    judged = {key(r): misses(r, slo, references) for r in rows}
    order = lambda r: (-_rate(r), r.get("gpus") or 0, r.get("ttft_p99_ms") or float("inf"))  # noqa: E731
    fewest = lambda r: (len(judged[key(r)]), *order(r))  # noqa: E731
    passing = [r for r in rows if key(r) not in out and not judged[key(r)]]
    configs = []
    for point in dict.fromkeys(r["point"] for r in rows):
        mine = [r for r in rows if r["point"] == point]
        candidates = [r for r in mine if key(r) not in out]
        ok = [r for r in candidates if not judged[key(r)]]
        chosen = min(ok, key=order) if ok else min(candidates or mine, key=fewest)
        configs.append({"point": point, "meets": bool(ok), "row": chosen, "misses": judged[key(chosen)],
                        "excluded": out.get(key(chosen))})  # fmt: skip
    best = min(passing, key=order) if passing else None
    return {"slo": slo, "best": best, "rows": judged, "excluded": out, "configs": configs}


def summary_lines(verdict: dict[str, Any]) -> list[str]:
    """The verdict in words: the best configuration and level, then why each other configuration is not it."""
    best, lines = verdict["best"], []
    if best is None:
        lines.append(_none(verdict))
    else:
        under = "under the SLOs" if verdict["slo"] else "(no SLOs given: highest output tok/s per GPU)"
        gpus = f"{best['gpus']} GPU(s)" if best.get("gpus") else "no GPU: per host"
        lines.append(f"best {under}: {best['point']} at concurrency {best['concurrency']}: "
                     f"{_num(best['output_tok_s_per_gpu'])} output tok/s per GPU ({gpus}), "
                     f"TTFT p99 {_num(best['ttft_p99_ms'])} ms")  # fmt: skip
    for config in verdict["configs"]:
        if best is not None and config["point"] == best["point"]:
            continue
        row = config["row"]
        if config["excluded"]:
            lines.append(f"{config['point']}: not a candidate: {config['excluded']}")
        elif config["meets"]:
            meets = "meets the SLOs" if verdict["slo"] else "no SLOs"
            lines.append(f"{config['point']}: {meets}, at most {_num(_rate(row))} output tok/s per GPU "
                         f"(concurrency {row['concurrency']})")  # fmt: skip
        else:
            lines.append(
                f"{config['point']}: misses {'; '.join(config['misses'])} (best: concurrency {row['concurrency']})"
            )
    return lines


def _none(verdict: dict[str, Any]) -> str:
    """The verdict's first line when nothing is best."""
    if not verdict["configs"]:
        return "no configuration was measured"
    if all(config["excluded"] for config in verdict["configs"]):
        return "no configuration is a candidate: none finished ok with its own server's numbers"
    return "no configuration meets every SLO"
