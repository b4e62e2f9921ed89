"""The mounts a container needs for its paths: the links below them followed to where they point (each target
mounted once). Run for real, against a dockerd and hub-cache links, in tests/container/test_container_mounts.py."""

from __future__ import annotations

import os

from trtsweep.common.mounts import closure


def test_closure_follows_links_in_added_directories_and_adds_nothing_twice(tmp_path):
    far, farther = tmp_path / "far", tmp_path / "farther"
    far.mkdir()
    farther.mkdir()
    (farther / "weights").write_text("w", encoding="utf-8")
    os.symlink(farther / "weights", far / "weights")
    root = tmp_path / "root"
    root.mkdir()
    os.symlink(far, root / "engine")
    os.symlink(far / "weights", root / "again")
    given, extra = closure([root, root])
    assert given == [str(root)]
    assert extra == [str(far), str(farther)]
