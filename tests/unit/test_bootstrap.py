"""The controller's exact trtsweep as a wheel: built from a clean copy, filed under its build id, reused."""

from __future__ import annotations

import tarfile

import pytest

from trtsweep.errors import TrtsweepError
from trtsweep.fleet.bootstrap import build_wheel, pack_wheelhouse
from trtsweep.fleet.release import build_id, wheel_build_id


def test_the_wheel_holds_exactly_the_running_build_and_is_built_once(tmp_path):
    wheel, build, built = build_wheel(tmp_path)
    assert built and build == build_id() and wheel.parent.name == build
    assert wheel_build_id(wheel) == build  # the files inside are the controller's files
    again, _, rebuilt = build_wheel(tmp_path)
    assert again == wheel and not rebuilt


def test_the_wheelhouse_is_packed_once_per_content_and_older_archives_go(tmp_path):
    house = tmp_path / "house"
    house.mkdir()
    for name in ("a-1.0-py3-none-any.whl", "b-2.0.tar.gz", ".complete"):
        (house / name).write_bytes(name.encode() * 100)
    (house / ".trtsweep").mkdir()
    archive, made = pack_wheelhouse(house, tmp_path / "out")
    assert made and archive.parent == tmp_path / "out" and archive.name.startswith("wheelhouse-")
    with tarfile.open(archive) as tar:  # the files at the top, hidden ones aside, as plain names
        assert sorted(tar.getnames()) == ["a-1.0-py3-none-any.whl", "b-2.0.tar.gz"]
        assert tar.extractfile("b-2.0.tar.gz").read() == b"b-2.0.tar.gz" * 100
    assert pack_wheelhouse(house, tmp_path / "out") == (archive, False)  # the same files: reused
    (house / "c-3.0-py3-none-any.whl").write_bytes(b"c")
    newer, made = pack_wheelhouse(house, tmp_path / "out")
    assert made and newer != archive and not archive.exists()  # another content, another archive; the old one gone
    assert [p.name for p in (tmp_path / "out").iterdir()] == [newer.name]  # nothing staged left


def test_an_empty_wheelhouse_is_refused_naming_it(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(TrtsweepError, match=r"fleet_prepare_wheelhouse .*empty: no files"):
        pack_wheelhouse(tmp_path / "empty", tmp_path / "out")
