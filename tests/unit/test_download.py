from __future__ import annotations

import shutil
from collections import namedtuple

import pytest

from trtsweep.errors import TrtsweepError
from trtsweep.hub import download


def test_allow_and_ignore_patterns():
    assert download.selected("model.safetensors", ["*.safetensors", "*.json"], None)
    assert not download.selected("pytorch_model.bin", ["*.safetensors"], None)
    assert not download.selected("onnx/model.onnx", None, ["onnx/*"])
    assert download.selected("config.json", None, ["*.bin"])


def test_free_space_check_names_the_numbers(tmp_path, monkeypatch):
    usage = namedtuple("usage", "total used free")
    monkeypatch.setattr(shutil, "disk_usage", lambda path: usage(100 << 30, 95 << 30, 5 << 30))
    download.check_free_space(tmp_path / "not" / "yet", 4 << 30)  # 4.4 GiB with margin fits in 5
    with pytest.raises(TrtsweepError) as err:
        download.check_free_space(tmp_path / "hub", 15 << 30)
    assert (
        str(err.value)
        == f"not enough disk space in {tmp_path}: the download needs 15.0 GiB (+10% margin), 5.0 GiB free"
    )


def test_offline_missing_model_is_a_one_line_error(tmp_path):
    with pytest.raises(
        TrtsweepError, match=r"^nobody/nothing \(revision main\) is not in the hub cache .* offline is set$"
    ):
        download.resolve("nobody/nothing", cache_dir=str(tmp_path), offline=True)


def test_offline_cache_resolves_the_demo_model(demo_model):
    snap = download.resolve("HuggingFaceTB/SmolLM2-135M-Instruct", cache_dir=str(demo_model.hub_cache), offline=True)
    assert (snap.changed, snap.revision, snap.source) == (False, demo_model.revision, "hub-cache")


def test_local_mirror(tmp_path):
    (tmp_path / "Qwen" / "Qwen2-7B").mkdir(parents=True)
    (tmp_path / "Qwen" / "Qwen2-7B" / "config.json").write_text("{}")
    snap = download.resolve("Qwen/Qwen2-7B", mirror_dir=str(tmp_path))
    assert snap.path == str(tmp_path / "Qwen" / "Qwen2-7B") and not snap.changed
    with pytest.raises(TrtsweepError, match="not in the local mirror"):
        download.resolve("Qwen/Qwen2-72B", mirror_dir=str(tmp_path))


def test_bad_inputs():
    with pytest.raises(TrtsweepError, match="repo_id must be owner/name"):
        download.resolve("qwen")
    with pytest.raises(TrtsweepError, match="source must be huggingface or modelscope"):
        download.resolve("a/b", source="s3")
