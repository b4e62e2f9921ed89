"""A runner that died of a full disk could not log why: the cause its points are lost with says the disk is full."""

from __future__ import annotations

import shutil
from collections import namedtuple
from pathlib import Path

import pytest

from trtsweep.lane import journal

Usage = namedtuple("Usage", "total used free")


def test_the_log_tail_of_a_runner_on_a_full_disk_ends_saying_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    (tmp_path / journal.RUNNER_LOG).write_text("")
    monkeypatch.setattr(shutil, "disk_usage", lambda path: Usage(64 << 20, 64 << 20, 0))
    assert journal.log_tail(tmp_path) == [f"the disk holding {tmp_path} is full (0 bytes free)"]


def test_a_disk_with_room_adds_nothing_to_the_log_tail(tmp_path: Path):
    (tmp_path / journal.RUNNER_LOG).write_text("Traceback\nImportError: no module named x\n")
    assert journal.log_tail(tmp_path) == ["Traceback", "ImportError: no module named x"]
