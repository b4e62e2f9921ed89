"""Result files are written whole or not at all; a full disk is one line with the numbers."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import uuid
from pathlib import Path

import pytest

from trtsweep.common.fileio import atomic_write_text
from trtsweep.errors import TrtsweepError


@pytest.fixture
def tiny_fs(tmp_path: Path):
    """A 64 KiB tmpfs (root can mount one; CI runs as root)."""
    mount = tmp_path / f"full-{uuid.uuid4().hex[:6]}"
    mount.mkdir()
    if shutil.which("mount") is None:
        pytest.fail("mount(8) is needed to make a tiny filesystem")
    proc = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mount)], capture_output=True,
                          text=True, check=False)  # fmt: skip
    if proc.returncode != 0:
        pytest.fail(f"cannot mount a tmpfs here: {proc.stderr.strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", str(mount)], check=False)


def test_a_full_disk_gives_one_line_and_leaves_no_partial_file(tiny_fs):
    target = tiny_fs / "results" / "llm_perf.summary.json"
    atomic_write_text(target, "small\n")
    with pytest.raises(TrtsweepError) as err:
        atomic_write_text(target, "x" * 200_000)
    text = str(err.value)
    assert "\n" not in text
    assert text.startswith(f"{target}: no space left on device: writing 200000 bytes, ")
    assert "bytes free" in text
    assert target.read_text() == "small\n"  # the earlier complete file is untouched
    assert [p.name for p in target.parent.iterdir()] == ["llm_perf.summary.json"]  # no temporary left


@pytest.mark.parametrize("mask", [0o077, 0o027, 0o002])
def test_a_written_file_takes_the_users_umask(tmp_path, mask):
    """A result, a record or the host's copy of the prompts is as private as the user keeps new files."""
    old = os.umask(mask)
    try:
        atomic_write_text(tmp_path / "status.json", "{}\n")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "status.json").stat().st_mode) == 0o666 & ~mask
