"""The controller's exact trtsweep as a wheel: built from a clean copy, filed under its build id, reused."""

from __future__ import annotations

from trtsweep.fleet.bootstrap import build_wheel
from trtsweep.fleet.release import build_id, wheel_build_id


def test_the_wheel_holds_exactly_the_running_build_and_is_built_once(tmp_path):
    wheel, build, built = build_wheel(tmp_path)
    assert built and build == build_id() and wheel.parent.name == build
    assert wheel_build_id(wheel) == build  # the files inside are the controller's files
    again, _, rebuilt = build_wheel(tmp_path)
    assert again == wheel and not rebuilt
