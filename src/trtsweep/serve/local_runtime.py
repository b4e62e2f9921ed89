"""The `local` Triton runtime: the real `tritonserver` shipped inside the nvidia-pytriton wheel.

The wheel carries Triton 2.51 with the python backend, its shared libraries, and one python-backend
stub per Python version. To use it as a plain Triton server for any model repository we:

* build a backend directory of our own (symlinks, nothing in site-packages is modified) holding the
  python backend and the stub that matches the running interpreter;
* put the interpreter's ``bin`` directory first on ``PATH``: the stub embeds CPython, which derives
  ``sys.prefix`` (and so the virtualenv's site-packages, with its pinned numpy) from the ``python3``
  it finds there;
* put the wheel's bundled libraries and the interpreter's ``libpython`` on ``LD_LIBRARY_PATH``.
"""

from __future__ import annotations

import importlib.util
import os
import sys
import sysconfig
from dataclasses import dataclass
from pathlib import Path

from trtsweep.errors import TrtsweepError

PYTHON_BACKEND_FILES = ("libtriton_python.so", "triton_python_backend_utils.py")


@dataclass(frozen=True)
class LocalRuntime:
    """Paths of the pytriton-bundled Triton server."""

    binary: Path
    libs_dir: Path
    python_backend_dir: Path
    stub: Path

    @classmethod
    def discover(cls) -> LocalRuntime:
        # find_spec locates the package without importing it (its __init__ pulls in pytriton's own
        # Python dependencies, which the bare server does not need)
        spec = importlib.util.find_spec("pytriton")
        if spec is None or spec.origin is None:
            raise TrtsweepError("local Triton runtime needs the nvidia-pytriton package: pip install 'trtsweep[local]'")
        root = Path(spec.origin).resolve().parent
        server_dir = root / "tritonserver"
        version = f"{sys.version_info.major}.{sys.version_info.minor}"
        runtime = cls(
            binary=server_dir / "bin" / "tritonserver",
            libs_dir=root.parent / "nvidia_pytriton.libs",
            python_backend_dir=server_dir / "backends" / "python",
            stub=server_dir / "python_backend_stubs" / version / "triton_python_backend_stub",
        )
        for path in (runtime.binary, runtime.libs_dir, runtime.python_backend_dir, runtime.stub):
            if not path.exists():
                raise TrtsweepError(f"nvidia-pytriton install is incomplete: {path} is missing")
        return runtime

    def backend_directory(self, cache_dir: Path) -> Path:
        """Return a backend directory with the python backend and this interpreter's stub (idempotent)."""
        backends = cache_dir / f"triton-backends-py{sys.version_info.major}.{sys.version_info.minor}"
        python_dir = backends / "python"
        python_dir.mkdir(parents=True, exist_ok=True)
        links = {name: self.python_backend_dir / name for name in PYTHON_BACKEND_FILES}
        links["triton_python_backend_stub"] = self.stub
        for name, target in links.items():
            link = python_dir / name
            if link.is_symlink() and Path(os.readlink(link)) == target:
                continue
            tmp = python_dir / f".{name}.{os.getpid()}.tmp"  # per process: lanes start servers side by side
            tmp.unlink(missing_ok=True)
            tmp.symlink_to(target)
            tmp.replace(link)
        return backends

    def environment(self, base: dict[str, str] | None = None) -> dict[str, str]:
        """Environment for the server process (see the module docstring for why each entry)."""
        env = dict(os.environ if base is None else base)
        python_bin = str(Path(sys.executable).parent)
        env["PATH"] = os.pathsep.join([python_bin, env.get("PATH", "/usr/bin:/bin")])
        lib_dirs = [str(self.libs_dir)]
        libpython_dir = sysconfig.get_config_var("LIBDIR")
        if libpython_dir:
            lib_dirs.append(libpython_dir)
        if env.get("LD_LIBRARY_PATH"):
            lib_dirs.append(env["LD_LIBRARY_PATH"])
        env["LD_LIBRARY_PATH"] = os.pathsep.join(lib_dirs)
        return env
