"""Atomic file writes (results are written whole or not at all, with the mode the user's umask gives a new file),
reading a JSON file that may be missing, and file digests."""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

from trtsweep.errors import TrtsweepError


def _no_space(path: Path, needed: int, exc: OSError) -> TrtsweepError:
    probe = path.parent
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    free = shutil.disk_usage(probe).free
    return TrtsweepError(f"{path}: no space left on device: writing {needed} bytes, {free} bytes free ({exc.strerror})")


def umask() -> int:
    """The process's umask, read without changing it (Linux: /proc/self/status); elsewhere set to 0o077 and back at
    once, so a file another thread creates meanwhile is only ever more private."""
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    mask = os.umask(0o077)
    os.umask(mask)
    return mask


@contextmanager
def atomic_writer(path: Path, size: int | None = None) -> Iterator[IO[str]]:
    """A text file that appears at `path` whole when the block ends, or not at all: written to a temporary file
    in the same directory, fsynced and renamed into place (so a file of any size can be written in pieces).

    The file gets the mode any new file gets (0o666 less the umask), not mkstemp's 0o600. A full disk leaves nothing
    behind (no 0-byte or partial file) and raises one line with the path, the bytes being written (`size` when the
    caller knows it, else those written so far) and the bytes free.
    """
    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
        os.fchmod(fd, 0o666 & ~umask())
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            try:
                yield handle
                handle.flush()
            except OSError as exc:
                if exc.errno in (errno.ENOSPC, errno.EDQUOT):
                    raise _no_space(path, size or handle.tell(), exc) from exc
                raise
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        if exc.errno in (errno.ENOSPC, errno.EDQUOT):
            raise _no_space(path, size or 0, exc) from exc
        raise
    finally:
        if tmp is not None and os.path.exists(tmp):
            os.unlink(tmp)


def atomic_write_text(path: Path, text: str) -> None:
    """Write `text` to `path` atomically (see atomic_writer)."""
    with atomic_writer(path, len(text.encode("utf-8"))) as handle:
        handle.write(text)


def read_json(path: Path) -> Any:
    """The JSON document in `path`, or None when it is missing, unreadable or not JSON."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def file_sha256(path: Path) -> str:
    """The sha256 of a file's bytes, read in 1 MiB blocks."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
