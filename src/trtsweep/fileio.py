"""Atomic file writes: results are written whole or not at all."""

from __future__ import annotations

import errno
import os
import shutil
import tempfile
from pathlib import Path

from trtsweep.errors import TrtsweepError


def _no_space(path: Path, needed: int, exc: OSError) -> TrtsweepError:
    probe = path.parent
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    free = shutil.disk_usage(probe).free
    return TrtsweepError(f"{path}: no space left on device: writing {needed} bytes, {free} bytes free ({exc.strerror})")


def atomic_write_text(path: Path, text: str) -> None:
    """Write `text` to `path` via a temporary file in the same directory and an atomic rename.

    A full disk leaves nothing behind (no 0-byte or partial file) and raises one line with the path, the bytes
    needed and the bytes free.
    """
    data = text.encode("utf-8")
    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
        os.fchmod(fd, 0o644)
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)
        if exc.errno in (errno.ENOSPC, errno.EDQUOT):
            raise _no_space(path, len(data), exc) from exc
        raise
    except BaseException:
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)
        raise
