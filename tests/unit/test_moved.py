"""Scripts written against the flat layout keep working: old module paths give the moved modules themselves (one
copy, a package still a package), with a DeprecationWarning naming the new path."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

from trtsweep import _moved


@pytest.mark.parametrize("old", [*(f"trtsweep.{name}" for name in _moved.MODULES), "trtsweep.build.commands",
                                 "trtsweep.llmapi.options"])  # fmt: skip
def test_an_old_module_path_is_the_moved_module(old):
    new = _moved.new_name(old)
    assert new is not None
    with pytest.warns(DeprecationWarning, match=f"{old} moved to {new}"):
        module = importlib.import_module(old) if old not in sys.modules else _reimport(old)
    assert module is importlib.import_module(new)


def _reimport(old: str):
    del sys.modules[old]
    return importlib.import_module(old)


def test_old_names_of_modules_that_became_packages_are_forwarded_and_packages_stay_packages():
    code = (
        "import warnings; warnings.simplefilter('error', DeprecationWarning)\n"
        "import trtsweep.report.writer as w, trtsweep.fleet.runplan as r, trtsweep.handoff.bundle as b\n"
        "warnings.simplefilter('ignore')\n"
        "from trtsweep.report import write; from trtsweep.fleet import make_plan\n"
        "from trtsweep.handoff import write_bundle\n"
        "assert (write, make_plan, write_bundle) == (w.write, r.make_plan, b.write_bundle)\n"
        "from trtsweep.build import versions\n"
        "import importlib.resources as res, trtsweep.toolchain as t\n"
        "assert versions.__name__ == 'trtsweep.toolchain.versions' and res.files('trtsweep.toolchain').is_dir()\n"
        "import trtsweep.toolchain.versions as v; assert v is versions\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
