"""A fake TensorRT-LLM installation for the build tests: the tool doubles of tests/doubles/ laid out as the
release expects (examples/<family>/ before 0.20, examples/models/core/<family>/ from 0.20), an HF model
directory, a record file of every tool invocation, and a Runtime pointing at them."""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from trtsweep.errors import TrtsweepError
from trtsweep.toolchain import versions
from trtsweep.toolchain.runner import Runtime

DOUBLES = Path(__file__).resolve().parents[1] / "doubles"
# one release of every minor that has a table (patch, post and rc spellings included)
RANGES = ["0.8.0", "0.9.0", "0.10.0", "0.11.0", "0.12.0", "0.13.0", "0.14.0", "0.15.0", "0.16.0", "0.17.0.post1",
          "0.18.2", "0.19.0", "0.20.0", "0.21.0", "1.0.0", "1.1.0rc6", "1.2.0rc7"]  # fmt: skip


@dataclass
class FakeTrtllm:
    root: Path
    model_dir: Path
    cache_dir: Path
    record: Path
    runtime: Runtime

    def calls(self) -> list[dict]:
        if not self.record.exists():
            return []
        return [json.loads(line) for line in self.record.read_text().splitlines()]


def make(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, version: str) -> FakeTrtllm:
    parsed = versions.parse(version)
    root = tmp_path / "TensorRT-LLM"
    for family in versions.FAMILIES:
        try:
            script = root / versions.convert_script(parsed, family)
        except TrtsweepError:  # the family has no convert script in this release
            continue
        script.parent.mkdir(parents=True, exist_ok=True)
        script.symlink_to(DOUBLES / "convert_checkpoint.py")
    quantize = root / versions.quantize_script(parsed)
    quantize.parent.mkdir(parents=True, exist_ok=True)
    quantize.symlink_to(DOUBLES / "quantize.py")
    model = tmp_path / "models" / "Tiny-LM"
    model.mkdir(parents=True)
    (model / "config.json").write_text('{"architectures": ["LlamaForCausalLM"]}')
    record = tmp_path / "calls.jsonl"
    monkeypatch.setenv("TRTSWEEP_FAKE_TRTLLM_VERSION", version)
    monkeypatch.setenv("TRTSWEEP_FAKE_RECORD", str(record))
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    for name in ("TRTSWEEP_FAKE_FAIL", "TRTSWEEP_FAKE_ECHO_TOKEN", "TRTSWEEP_FAKE_ENGINE_TP", "HF_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    runtime = Runtime(python=sys.executable, trtllm_dir=str(root), trtllm_build=str(DOUBLES / "trtllm-build"))
    return FakeTrtllm(root, model, tmp_path / "cache", record, runtime)
