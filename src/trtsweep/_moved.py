"""Old module paths, from before the package was grouped by stage, keep working (with a DeprecationWarning).

`import trtsweep.planning` gives `trtsweep.sweep.planning`, `trtsweep.build.commands` gives
`trtsweep.toolchain.commands`, and so on: scripts written against the flat layout run unchanged. The three old
modules whose names are packages now (`trtsweep.report`, `trtsweep.fleet`, `trtsweep.handoff`) forward their old
names from the package (see `forward`).
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import warnings
from types import ModuleType
from typing import Any

MODULES = {
    "sweepfile": "sweep.sweepfile", "planning": "sweep.planning", "flows": "sweep.flows",
    "promptcheck": "sweep.promptcheck", "verdict": "report.verdict", "report_page": "report.page",
    "results_table": "report.results_table", "compare": "report.compare", "placement": "fleet.placement",
    "inventory": "fleet.inventory", "hostfacts": "fleet.hostfacts", "bootstrap": "fleet.bootstrap",
    "release": "fleet.release", "status": "fleet.status", "progress": "fleet.progress", "runlock": "fleet.runlock",
    "heartbeat": "fleet.heartbeat", "download": "hub.download", "demo_model": "hub.demo_model",
    "hf_generate": "serve.hf_generate", "fileio": "common.fileio", "procs": "common.procs",
    "mounts": "common.mounts", "paths": "common.paths",
}  # fmt: skip
PACKAGES = {"build": "toolchain", "llmapi": "toolchain.llmapi"}


def new_name(old: str) -> str | None:
    """The module an old `trtsweep.<name>` path now lives at, or None if the name did not move."""
    rest = old.removeprefix("trtsweep.")
    if rest in MODULES:
        return "trtsweep." + MODULES[rest]
    head, _, tail = rest.partition(".")
    if head in PACKAGES:
        return "trtsweep." + PACKAGES[head] + ("." + tail if tail else "")
    return None


class _Alias(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def __init__(self) -> None:
        self.specs: dict[str, importlib.machinery.ModuleSpec | None] = {}

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> importlib.machinery.ModuleSpec | None:
        new = new_name(fullname) if fullname.startswith("trtsweep.") else None
        if new is None:
            return None
        return importlib.machinery.ModuleSpec(fullname, self, is_package=False)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        new = new_name(spec.name)
        assert new is not None
        warnings.warn(f"{spec.name} moved to {new}", DeprecationWarning, stacklevel=3)
        module = importlib.import_module(new)
        self.specs[new] = module.__spec__  # the import system sets the alias's spec on it: put it back
        return module

    def exec_module(self, module: ModuleType) -> None:
        """The module was executed under its new name already; it keeps its own spec (a package stays one)."""
        module.__spec__ = self.specs[module.__name__]


def install() -> None:
    """Make the old paths importable (once)."""
    if not any(isinstance(finder, _Alias) for finder in sys.meta_path):
        sys.meta_path.insert(0, _Alias())  # before the path finder, which would load a second copy


def forward(package: str, module: str, name: str) -> Any:
    """A package's `__getattr__` for the old module of the same name (`from trtsweep.report import write`)."""
    if name.startswith("__") or importlib.util.find_spec(f"{package}.{name}") is not None:
        raise AttributeError(name)  # a submodule: the import system loads it
    warnings.warn(f"{package}.{name} moved to {package}.{module}.{name}", DeprecationWarning, stacklevel=3)
    try:
        return getattr(importlib.import_module(f"{package}.{module}"), name)
    except AttributeError:
        raise AttributeError(f"module {package!r} has no attribute {name!r}") from None
