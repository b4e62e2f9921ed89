"""Output directories keyed by the content of their inputs, and the marker that tells a complete one.

``<cache>/checkpoints/<family>-<precision>[-kv<dtype>]-tp<T>pp<P>-<key>/`` and
``<cache>/engines/<checkpoint name>-bs<B>-isl<I>-seq<S>-<key>/``, where ``key`` is the first 12 hex digits
of the SHA-256 of the canonical JSON of the inputs (model and revision, precision, TP/PP, calibration data
hash, every tool option, tool version; for an engine, the checkpoint's directory name, itself keyed). The
same inputs give the same directory, so a point reuses its engine and every engine built from one
checkpoint shares it.

The marker ``.trtsweep-complete.json`` (inputs, command, duration, finish time) is written last and
atomically: a directory without it is a crashed or interrupted half artifact and is removed before the
step runs again.

While a step runs, ``<dir>.lock`` (next to the directory) is held with ``flock``; the tool inherits the
descriptor, so a tool that outlives a killed controller still holds it. A second process wanting the same
artifact on the host (another lane of a packed sweep, another sweep, a rerun) waits, polling every second,
as long as the holder keeps the lock (at most the step's own time bound, then it fails naming the holder), then
reuses what it finished (its marker) or, when the holder died without finishing, removes the half artifact and
makes it; it never deletes a directory under a running build. Different artifacts have different locks and never
wait on each other.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import socket
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from trtsweep.common.fileio import atomic_write_text
from trtsweep.errors import TrtsweepError

MARKER = ".trtsweep-complete.json"
KEY_LENGTH = 12
POLL_S = 1.0


@dataclass(frozen=True)
class Held:
    """A held artifact lock: ``fd`` (pass it to the tool), and, when another process held it first, who that was
    (``waited_for``, as its lock file named it) and the seconds spent waiting for it."""

    fd: int
    waited_for: str | None = None
    waited_s: float = 0.0


def key(inputs: Mapping[str, Any]) -> str:
    """Content key of ``inputs`` (JSON-serializable): stable across hosts, runs and key order."""
    canonical = json.dumps(inputs, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()[:KEY_LENGTH]


def directory(cache_dir: Path, kind: str, prefix: str, inputs: Mapping[str, Any]) -> Path:
    """``<cache_dir>/<kind>/<prefix>-<key(inputs)>``."""
    return cache_dir / kind / f"{prefix}-{key(inputs)}"


def strip_key(name: str) -> str:
    """A directory name without its trailing ``-<key>``."""
    stem, _, tail = name.rpartition("-")
    return stem if stem and len(tail) == KEY_LENGTH else name


def marker(path: Path) -> dict[str, Any] | None:
    """The completion record of ``path``, or None when it is missing, unreadable or for other inputs."""
    try:
        record = json.loads((path / MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) and record.get("key") == path.name[-KEY_LENGTH:] else None


def reset(path: Path) -> bool:
    """Make ``path`` an empty directory for a fresh run; True when a half artifact was removed."""
    if path.exists() and marker(path) is not None:
        raise TrtsweepError(f"{path} is complete; refusing to remove it")
    removed = path.exists()
    if removed:
        shutil.rmtree(path)
    path.mkdir(parents=True)
    return removed


def complete(path: Path, record: Mapping[str, Any]) -> dict[str, Any]:
    """Write the marker (last step of an artifact); returns the record as written."""
    written = {**record, "key": path.name[-KEY_LENGTH:]}
    atomic_write_text(path / MARKER, json.dumps(written, indent=2, ensure_ascii=False) + "\n")
    return written


def _holder(fd: int) -> str:
    return os.pread(fd, 4096, 0).decode("utf-8", "replace").strip() or "an unknown process"


def _acquire(fd: int, path: Path, wait_s: float | None) -> tuple[str | None, float]:
    """Take the lock of ``fd``, waiting while another process holds it, at most ``wait_s`` (None: as long as it
    holds it); returns that holder (None: it was free) and the seconds waited. A holder that keeps it longer fails
    the wait in one line naming it."""
    start = time.monotonic()
    holder = None
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = holder or _holder(fd)
            if wait_s is not None and time.monotonic() - start > wait_s:
                raise TrtsweepError(f"{path}: waited {wait_s:g} s for {holder} making it (its lock {path.name}.lock"
                                    "): longer than the step may take; end that process or remove the lock if it "
                                    "is gone") from None  # fmt: skip
            time.sleep(POLL_S)
            continue
        return holder, round(time.monotonic() - start, 3)


@contextlib.contextmanager
def lock(path: Path, wait_s: float | None = None) -> Iterator[Held]:
    """Hold ``<path>.lock`` exclusively for the step that makes ``path`` (pass ``Held.fd`` to the tool so the
    lock lives as long as the tool does). Held by another process: wait (checking every ``POLL_S``) until it
    lets go, finished or dead, at most ``wait_s`` (the step's own bound: a holder running the same step ends
    within it); the caller then looks at the marker again."""
    lock_file = path.with_name(path.name + ".lock")
    lock_file.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(lock_file, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        waited_for, waited_s = _acquire(fd, path, wait_s)
        since = datetime.now(timezone.utc).isoformat(timespec="seconds")
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"pid {os.getpid()} on {socket.gethostname()} since {since}".encode(), 0)
        yield Held(fd, waited_for, waited_s)
    finally:
        os.close(fd)
