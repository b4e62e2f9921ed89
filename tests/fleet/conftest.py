"""Fixtures of the fleet tests: a bed of real hosts (network namespaces with their own sshd) over real SSH."""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fleet.testbed import TestBed, unavailable_reason


def require_testbed() -> None:
    """Fail (never skip) when this machine cannot host the bed, saying why."""
    reason = unavailable_reason()
    if reason is not None:
        pytest.fail(f"the fleet test bed cannot be created here: {reason}", pytrace=False)


@pytest.fixture(scope="session")
def testbed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestBed]:
    """Three started hosts h1..h3 for the whole session; its inventory is ``testbed.inventory_path``."""
    require_testbed()
    with TestBed(tmp_path_factory.mktemp("fleet"), count=3) as bed:
        yield bed


@pytest.fixture(scope="session")
def wheelhouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The controller's wheel and its dependency wheels, made once for the whole run (pip download on the
    controller): parallel test workers share one, the first to ask makes it while the others wait."""
    shared = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):  # each worker's basetemp is a folder of the run's
        shared = shared.parent
    dest = shared / "wheelhouse-shared"
    with open(shared / "wheelhouse-shared.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (dest / ".complete").is_file():
            shutil.rmtree(dest, ignore_errors=True)
            dest.mkdir()
            subprocess.run([sys.executable, "-m", "trtsweep.cli", "wheelhouse", str(dest)], check=True,
                           capture_output=True)  # fmt: skip
            (dest / ".complete").touch()
    return dest
