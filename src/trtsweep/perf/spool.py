"""Per-request records on disk, never in memory: llm-perf's memory stays flat however long a level runs.

* `Spool`: while a level runs, each finished request is appended as one JSON line the moment it ends (and
  flushed, so a killed client keeps what it measured up to that request); after the level, one pass reads
  the requests back for their metrics, scores and the summary. With worker processes each worker appends to its
  own shard (`shard(i)`: `<spool stem>.<i>.jsonl`), and the read-back merges the shards by finish time.
* `RequestLog`: `<export>.requests.jsonl`, every request's row with its metrics (the rows of the profile
  export), one line each, level after level; each level's byte range is kept so the profile export copies
  the rows without parsing them, a block at a time.
"""

from __future__ import annotations

import heapq
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from trtsweep.perf.protocols.base import RequestResult


class Spool:
    """The raw results of the level being measured (in this file, or in the shards of worker processes)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.file = path.open("w", encoding="utf-8")
        self.parts = [path]
        self.first_sent = 0  # the earliest send among the results so far (perf_counter ns; 0: none sent)

    def shard(self, index: int) -> Path:
        """Where worker `index` appends its results of this level (read back with this spool's)."""
        path = self.path.with_name(f"{self.path.stem}.{index}.jsonl")
        if path not in self.parts:
            self.parts.append(path)
        return path

    def add(self, result: RequestResult) -> None:
        self.file.write(json.dumps(vars(result), ensure_ascii=False) + "\n")
        self.file.flush()
        self.note(result.sent_ns)

    def note(self, sent_ns: int) -> None:
        """A result was sent at `sent_ns` (0: never sent)."""
        if sent_ns and (not self.first_sent or sent_ns < self.first_sent):
            self.first_sent = sent_ns

    def results(self) -> Iterator[RequestResult]:
        """The level's results in the order they finished (the spool is closed first)."""
        self.file.close()
        parts = [_read(path) for path in self.parts if path.exists()]
        yield from heapq.merge(*parts, key=_finished) if len(parts) > 1 else (parts[0] if parts else ())

    def close(self) -> None:
        self.file.close()

    def remove(self) -> None:
        self.file.close()
        for path in self.parts:
            path.unlink(missing_ok=True)


def _read(path: Path) -> Iterator[RequestResult]:
    with path.open(encoding="utf-8") as handle:
        for line in handle:
            yield RequestResult(**json.loads(line))


def _finished(result: RequestResult) -> int:
    """When a result was spooled, as near as it says: its end, else its last chunk, else its send."""
    return result.end_ns or (result.chunk_ns[-1] if result.chunk_ns else result.sent_ns)


# json.dumps(row, ensure_ascii=False, allow_nan=False), without making an encoder per row
ROW_ENCODER = json.JSONEncoder(ensure_ascii=False, allow_nan=False)


class RequestLog:
    """Every measured request's row, level after level (JSON lines)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.file = path.open("wb")
        self.ranges: list[tuple[int, int]] = []
        self.start = 0

    def begin(self) -> None:
        self.start = self.file.tell()

    def write(self, row: dict[str, Any]) -> None:
        self.file.write((ROW_ENCODER.encode(row) + "\n").encode("utf-8"))

    def end(self) -> None:
        """Close the current level's range (its rows are flushed to disk)."""
        self.file.flush()
        self.ranges.append((self.start, self.file.tell()))

    def lines(self, level: int) -> Iterator[str]:
        """The JSON lines of one level (by index), without their newlines."""
        start, end = self.ranges[level]
        with self.path.open("rb") as handle:
            handle.seek(start)
            while handle.tell() < end:
                yield handle.readline().decode("utf-8").rstrip("\n")

    def joined(self, level: int, size: int = 1 << 20) -> Iterator[str]:
        """The JSON lines of one level joined by ",\n" (none after the last), in pieces of about `size` bytes: the
        profile copies a level's rows as they are, a block at a time (a row has no newline of its own: JSON escapes
        it, and no other UTF-8 character has its byte)."""
        start, end = self.ranges[level]
        with self.path.open("rb") as handle:
            handle.seek(start)
            while (left := end - handle.tell()) > 0:
                piece = handle.read(min(size, left))
                if not piece.endswith(b"\n"):  # the range ends with a line: finish this one
                    piece += handle.readline()
                more = ",\n" if handle.tell() < end else ""
                yield piece.decode("utf-8")[:-1].replace("\n", ",\n") + more

    def rows(self, level: int) -> Iterator[dict[str, Any]]:
        for line in self.lines(level):
            yield json.loads(line)

    def close(self) -> None:
        self.file.close()
