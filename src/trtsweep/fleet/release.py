"""Which trtsweep this is: the package version and a build id (a hash of every file of the package).

The build id names the controller's exact code: `fleet_prepare` installs a host's venv only when the
host's build id differs, and a point's settings hash includes it, so results of other code are rerun.
"""

from __future__ import annotations

import functools
import hashlib
import zipfile
from collections.abc import Iterable
from pathlib import Path

from trtsweep import __version__

PACKAGE_DIR = Path(__file__).resolve().parents[1]


def _digest(files: Iterable[tuple[str, bytes]]) -> str:
    digest = hashlib.sha256()
    for name, data in sorted(files):
        if "__pycache__" in name.split("/") or name.endswith((".pyc", ".pyo")):
            continue
        digest.update(name.encode() + b"\0" + data + b"\0")
    return digest.hexdigest()[:16]


@functools.cache
def build_id(package_dir: Path = PACKAGE_DIR) -> str:
    """sha256 (first 16 hex) over the package's files: relative path and bytes, in sorted order."""
    files = (p for p in package_dir.rglob("*") if p.is_file())
    return _digest((p.relative_to(package_dir).as_posix(), p.read_bytes()) for p in files)


def wheel_build_id(wheel: Path) -> str:
    """The build id of the trtsweep package inside a wheel (equal to `build_id` once it is installed)."""
    prefix = "trtsweep/"
    with zipfile.ZipFile(wheel) as archive:
        names = [n for n in archive.namelist() if n.startswith(prefix) and not n.endswith("/")]
        return _digest((n[len(prefix) :], archive.read(n)) for n in names)


def describe() -> dict[str, str]:
    return {"version": __version__, "build": build_id()}
