"""Result files of llm-perf, all written atomically and rewritten after every level.

* ``<export>.json``  profile export: the configuration and, per level, the summary and every request
  (send time, each chunk's time, end time - all in ms since the run's first request - text, token counts,
  per-request metrics, scores, error);
* ``<export>.requests.jsonl``  the same request rows, one JSON line each (with the level's index), written
  level by level as each level is processed; while a level runs, its raw requests are appended to
  ``<export>.inflight.jsonl`` as each one ends (with worker processes, to one shard per worker,
  ``<export>.inflight.<i>.jsonl``; all removed once the level is processed);
* ``<export>.csv``   one row per level with the headline numbers;
* ``<export>.summary.json``  the summaries only (what the Ansible module returns).

A run with ``--search slo`` adds the search (trtsweep.perf.search: its steps, the capacity, the bound) as the
top-level ``search`` object of the profile and the summary.
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from trtsweep.common.fileio import atomic_write_text, atomic_writer

if TYPE_CHECKING:
    from trtsweep.perf.conversations import SentTurn
    from trtsweep.perf.dataset import Record
    from trtsweep.perf.levels import BenchmarkConfig, LevelReport
    from trtsweep.perf.metrics import RequestMetrics
    from trtsweep.perf.protocols.base import RequestResult
    from trtsweep.perf.runner import Level
    from trtsweep.perf.spool import RequestLog

CSV_COLUMNS = (
    ("concurrency", None),
    ("requests", None),
    ("succeeded", None),
    ("failed", None),
    ("ttft_p50_ms", ("ttft_ms", "p50")),
    ("ttft_p99_ms", ("ttft_ms", "p99")),
    ("icl_p50_ms", ("icl_ms", "p50")),
    ("tpot_p50_ms", ("tpot_ms", "p50")),
    ("e2e_p50_ms", ("e2e_ms", "p50")),
    ("e2e_p99_ms", ("e2e_ms", "p99")),
    ("output_token_throughput", None),
    ("input_token_throughput", None),
    ("request_throughput", None),
    ("rougeL", ("accuracy", "rougeL")),
    ("chrf", ("accuracy", "chrf")),
    ("exact", ("accuracy", "exact")),
)


def level_info(level: Level) -> dict[str, Any]:
    """How a level is identified in exports."""
    return {
        "concurrency": level.concurrency, "request_rate": level.request_rate, "num_requests": level.num_requests,
        "warmup_requests": level.warmup_requests, "duration_s": level.duration_s,
        **({"arrival": level.arrival, "burstiness": level.burstiness, "max_concurrency": level.max_concurrency}
           if level.request_rate else {}),
        **({"replay_speed": level.replay_speed} if level.replay_speed is not None else {}),
    }  # fmt: skip


def headline(level: dict[str, Any], summary: dict[str, Any]) -> dict[str, Any]:
    """The flat row of CSV_COLUMNS for one level (`level` as written by level_info)."""
    row: dict[str, Any] = {}
    for column, path in CSV_COLUMNS:
        if column in ("concurrency", "request_rate"):
            row[column] = level.get(column)
        elif path is None:
            row[column] = summary.get(column)
        else:
            inner = summary.get(path[0]) or {}
            row[column] = inner.get(path[1])
    return row


def unmeasured(levels: Sequence[dict[str, Any]]) -> str | None:
    """ "concurrency 1: no request succeeded (1 timeout)" for the first level (as level_info writes it, with its
    summary) where no request succeeded: it has no numbers, and a run that has one did not measure what it was
    asked to (llm-perf exits 3; the sweep fails the point). None when every level measured something."""
    for level in levels:
        summary = level.get("summary") or {}
        if not summary.get("succeeded"):
            errors = ", ".join(f"{n} {k}" for k, n in sorted((summary.get("errors") or {}).items())) or "no requests"
            load = (
                f"concurrency {level['concurrency']}"
                if level.get("concurrency")
                else f"trace x{level['replay_speed']:g}"
                if level.get("replay_speed")
                else f"rate {level.get('request_rate')}/s"
            )
            return f"{load}: no request succeeded ({errors})"
    return None


def paths(export_file: Path) -> dict[str, Path]:
    stem = export_file.with_suffix("")
    return {
        "profile": export_file,
        "csv": stem.with_suffix(".csv"),
        "summary": Path(f"{stem}.summary.json"),
        "requests": Path(f"{stem}.requests.jsonl"),
        "spool": Path(f"{stem}.inflight.jsonl"),
    }


# below this many nanoseconds (99 days) a double's error is under 1 ns: `ms_since` may round with integers
MS_EXACT = 2**33 * 10**6
VECTOR_FROM = 96  # chunks from which numpy converts a response's times faster than a loop


def ms_since(ns: int, t0: int) -> float:
    """`round((ns - t0) / 1e6, 4)` (ms, to 0.1 us), the same float, in a third of the time: the integer quotient of
    100 ns rounded to nearest is the same decimal (a value 1 ns or more from a tie stays on its side once a double),
    and its division by 1e4 the double nearest it, as `round` returns; ties, negatives and the far future are left
    to `round`."""
    delta = ns - t0
    tenths, rest = divmod(delta, 100)
    if rest == 50 or not 0 <= delta < MS_EXACT:
        return round(delta / 1e6, 4)
    return (tenths + (rest > 50)) / 1e4


def ms_list(stamps: Sequence[int], t0: int) -> list[float]:
    """`[ms_since(t, t0) for t in stamps]`, the same floats: a long response's as numpy arrays (the same integer
    arithmetic, and the same IEEE division of each exact integer by 1e4), each left to `round` as there."""
    if len(stamps) < VECTOR_FROM:
        return [ms_since(t, t0) for t in stamps]
    delta = np.asarray(stamps, dtype=np.int64) - t0
    tenths, rest = np.divmod(delta, 100)
    out: list[float] = ((tenths + (rest > 50)) / 1e4).tolist()
    for i in np.flatnonzero((rest == 50) | (delta < 0) | (delta >= MS_EXACT)).tolist():
        out[i] = round(int(delta[i]) / 1e6, 4)
    return out


def request_row(level: int, result: RequestResult, m: RequestMetrics, max_tokens: int, t0: int) -> dict[str, Any]:
    """One request as exported: times in ms since the run's first request, its text, counts, metrics, error."""
    row = {
        "level": level,
        "seq": result.seq,
        "record": result.record_index,
        "warmup": result.warmup,
        "max_tokens": max_tokens,
        "sent_ms": ms_since(result.sent_ns, t0),
        "chunk_ms": ms_list(result.chunk_ns, t0),
        "end_ms": ms_since(result.end_ns, t0) if result.end_ns else None,
        "text": result.text,
        "chunks": len(result.chunk_ns),
        "input_tokens": m.input_tokens,
        "output_tokens": m.output_tokens,
        "ttft_ms": None if m.ttft is None else m.ttft * 1e3,
        "e2e_ms": None if m.e2e is None else m.e2e * 1e3,
        "tpot_ms": None if m.tpot is None else m.tpot * 1e3,
        "scores": m.scores,
        "reference": m.reference_state,
        "scorer_error": m.scorer_error,
        "error": result.error,
        "error_class": result.error_class,
    }
    if m.retokenized_output_tokens is not None:
        row["retokenized_output_tokens"] = m.retokenized_output_tokens
    return row


def turn_columns(conversation: str, turn: SentTurn) -> dict[str, Any]:
    """A conversation turn's columns of its request row: the conversation's id, the turn (0-based), the
    conversation's run in the level (`session`: one per conversation started, warm-up included) and, for a turn not
    sent, why (`not_sent`: the error class of the failed turn that ended its conversation; None for a turn sent) and
    no send time."""
    out: dict[str, Any] = {
        "conversation": conversation,
        "turn": turn.turn,
        "session": turn.session,
        "not_sent": turn.not_sent,
    }
    return out if turn.not_sent is None else {**out, "sent_ms": None}


def _finite(value: Any) -> Any:
    """NaN and infinities become None: JSON has no such numbers (a bare NaN is not valid JSON)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value


def strict_json(data: Any, indent: int | None) -> str:
    """Valid JSON (null for NaN / inf), UTF-8 text kept as it is."""
    return json.dumps(_finite(data), ensure_ascii=False, indent=indent, allow_nan=False) + "\n"


def write_all(
    export_file: Path,
    config: BenchmarkConfig,
    reports: Sequence[LevelReport],
    records: Sequence[Record],
    log: RequestLog,
    started: float,
    search: dict[str, Any] | None = None,
) -> None:
    """The summary, CSV and profile export of the levels so far (and the SLO search's state, when one runs). The
    profile is streamed: each level's request rows are copied from the request log, so writing it costs one pass
    over the log and no memory."""
    source = config.length_source()
    lengths = {"length_source": source} if source else {}
    levels = [{**level_info(rep.level), **lengths, "summary": rep.summary} for rep in reports]
    out = paths(export_file)
    head = {"started_unix": started, "config": config.as_dict(), **({"search": search} if search else {})}
    summary = {**head, "levels": levels}
    with atomic_writer(out["profile"]) as handle:
        handle.write(strict_json(head, None)[:-2])
        handle.write(', "levels": [\n')
        for i, level in enumerate(levels):
            handle.write(("," if i else "") + strict_json(level, None)[:-2] + ', "requests": [\n')
            for piece in log.joined(i) if i < len(log.ranges) else ():
                handle.write(piece)
            handle.write("]}\n")
        references = [{"index": r.index, "reference": r.reference} for r in records]
        handle.write('], "records": ' + strict_json(references, None)[:-1] + "}\n")
    atomic_write_text(out["summary"], strict_json(summary, indent=2))
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=[c for c, _ in CSV_COLUMNS])
    writer.writeheader()
    for level in levels:
        writer.writerow(headline(level, level["summary"]))
    atomic_write_text(out["csv"], buffer.getvalue())


def _fmt(value: Any, digits: int = 1) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


TABLE = (
    ("load", None, 0),
    ("ok/req", None, 0),
    ("TTFT p50", "ttft_p50_ms", 1),
    ("TTFT p99", "ttft_p99_ms", 1),
    ("ICL p50", "icl_p50_ms", 1),
    ("TPOT p50", "tpot_p50_ms", 1),
    ("E2E p50", "e2e_p50_ms", 0),
    ("out tok/s", "output_token_throughput", 1),
    ("in tok/s", "input_token_throughput", 1),
    ("req/s", "request_throughput", 2),
    ("rougeL", "rougeL", 3),
)


def _load(row: dict[str, Any]) -> str:
    """A console row's load: c=8, 2.5/s, or a trace replay's speed and mean rate (trace x2 17.8/s)."""
    if row.get("concurrency"):
        return f"c={row['concurrency']}"
    speed = f"trace x{row['replay_speed']:g} " if row.get("replay_speed") else ""
    return f"{speed}{row.get('request_rate'):g}/s"


def table(rows: Sequence[dict[str, Any]]) -> str:
    """Console table (latencies in ms) of headline rows."""
    header = [name for name, _, _ in TABLE]
    body = []
    for row in rows:
        cells = []
        for name, key, digits in TABLE:
            if name == "load":
                cells.append(_load(row))
            elif key is None:
                cells.append(f"{row.get('succeeded', 0)}/{row.get('requests', 0)}")
            else:
                cells.append(_fmt(row.get(key), digits))
        body.append(cells)
    widths = [max(len(h), *(len(r[i]) for r in body)) if body else len(h) for i, h in enumerate(header)]
    lines = ["  ".join(h.rjust(w) for h, w in zip(header, widths, strict=True))]
    lines += ["  ".join(c.rjust(w) for c, w in zip(r, widths, strict=True)) for r in body]
    return "\n".join(lines)
