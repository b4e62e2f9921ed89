"""Fixtures of the fleet tests: a bed of real hosts (network namespaces with their own sshd) over real SSH."""

from __future__ import annotations

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
    """The controller's wheel and its dependency wheels, made once (pip download on the controller)."""
    dest = tmp_path_factory.mktemp("wheelhouse")
    subprocess.run([sys.executable, "-m", "trtsweep.cli", "wheelhouse", str(dest)], check=True, capture_output=True)
    return dest
