"""Where trtsweep keeps its caches on a host."""

from __future__ import annotations

import os
from pathlib import Path


def cache_dir() -> Path:
    """`$TRTSWEEP_CACHE`, else `$XDG_CACHE_HOME/trtsweep`, else `~/.cache/trtsweep`."""
    if os.environ.get("TRTSWEEP_CACHE"):
        return Path(os.environ["TRTSWEEP_CACHE"]).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg).expanduser() if xdg else Path.home() / ".cache") / "trtsweep"
