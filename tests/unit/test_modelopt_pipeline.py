"""The PyTorch flow's checkpoint step (build.pipeline.prepare_modelopt_checkpoint) run for real against the
recording double of ModelOpt's hf_ptq.py (tests/doubles/hf_ptq.py, which parses its argv with the argument
definitions recorded for the release): what it serves as downloaded, what it quantizes, calibration on the
user's prompts, the content-keyed cache, and the refusals."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from trtsweep.errors import TrtsweepError
from trtsweep.toolchain import pipeline
from trtsweep.toolchain.runner import Runtime

DOUBLES = Path(__file__).resolve().parents[1] / "doubles"
PROMPTS = Path(__file__).resolve().parents[2] / "data" / "prompts.jsonl"


@pytest.fixture
def fake(tmp_path, monkeypatch):
    """A ModelOpt checkout holding the double, an HF model, a record of every call."""
    tool = tmp_path / "Model-Optimizer" / "examples" / "llm_ptq"
    tool.mkdir(parents=True)
    (tool / "hf_ptq.py").symlink_to(DOUBLES / "hf_ptq.py")
    model = tmp_path / "models" / "Tiny-LM"
    model.mkdir(parents=True)
    (model / "config.json").write_text('{"architectures": ["LlamaForCausalLM"]}')
    monkeypatch.setenv("TRTSWEEP_FAKE_RECORD", str(tmp_path / "calls.jsonl"))
    monkeypatch.setenv("TRTSWEEP_FAKE_TRTLLM_VERSION", "1.2.0")
    monkeypatch.delenv("HF_TOKEN", raising=False)
    return tmp_path, model


def calls(tmp_path: Path) -> list[dict]:
    record = tmp_path / "calls.jsonl"
    return [json.loads(line) for line in record.read_text().splitlines()] if record.exists() else []


def spec(tmp_path: Path, model: Path, release: str = "1.2", **over) -> pipeline.ModeloptSpec:
    base = {"release": release, "precision": "fp8", "model_dir": str(model),
            "modelopt_dir": str(tmp_path / "Model-Optimizer"), "model_id": "Org/Tiny-LM"}  # fmt: skip
    return pipeline.ModeloptSpec(**{**base, **over})


@pytest.mark.parametrize("release", ["1.0", "1.1", "1.2"])
@pytest.mark.parametrize(
    ("precision", "kv", "algo"),
    [("fp8", "fp8", "FP8"), ("nvfp4", None, "NVFP4"), ("int4_awq", None, "W4A16_AWQ"), ("w4a8_awq", "fp8", "W4A8_AWQ")],
)
def test_quantizes_with_the_releases_modelopt_and_reuses_the_export(fake, monkeypatch, release, precision, kv, algo):
    tmp_path, model = fake
    monkeypatch.setenv("TRTSWEEP_FAKE_MODELOPT_RELEASE", release)
    monkeypatch.setenv("TRTSWEEP_FAKE_TRTLLM_VERSION", f"{release}.0")
    s = spec(tmp_path, model, release, precision=precision, kv_cache_dtype=kv, calib_data=str(PROMPTS), calib_size=8)
    runtime = Runtime(python=sys.executable)
    made = pipeline.prepare_modelopt_checkpoint(s, tmp_path / "cache", runtime, results_dir=str(tmp_path))
    assert made.changed and Path(made.path).parent == tmp_path / "cache" / "checkpoints"
    quant = json.loads((Path(made.path) / "hf_quant_config.json").read_text())["quantization"]
    assert quant == {"quant_algo": algo, "kv_cache_quant_algo": "FP8" if kv else None}
    assert [c["tool"] for c in calls(tmp_path)] == ["hf_ptq.py"]
    argv = made.command
    assert argv[:2] == ["env", "-C"] and argv[argv.index("--dataset") + 1] == "pg19"  # the user's prompts
    assert json.loads((tmp_path / "checkpoint.json").read_text())["tool"] == "hf_ptq.py"
    again = pipeline.prepare_modelopt_checkpoint(s, tmp_path / "cache", runtime)
    assert (again.path, again.changed, len(calls(tmp_path))) == (made.path, False, 1)
    other = pipeline.prepare_modelopt_checkpoint(pipeline.ModeloptSpec(**{**s.__dict__, "calib_size": 16}),
                                                 tmp_path / "cache", runtime, check_mode=True)  # fmt: skip
    assert other.path != made.path and other.changed and len(calls(tmp_path)) == 1


def test_bf16_and_a_prequantized_checkpoint_are_served_as_downloaded(fake):
    tmp_path, model = fake
    runtime = Runtime(python=sys.executable)
    same = pipeline.prepare_modelopt_checkpoint(spec(tmp_path, model, precision="bf16"), tmp_path / "c", runtime)
    assert (same.path, same.changed, same.command) == (str(model), False, [])
    (model / "hf_quant_config.json").write_text(json.dumps({"quantization": {"quant_algo": "FP8"}}))
    served = pipeline.prepare_modelopt_checkpoint(spec(tmp_path, model), tmp_path / "c", runtime)
    assert (served.path, served.changed) == (str(model), False) and calls(tmp_path) == []
    with pytest.raises(TrtsweepError, match="precision nvfp4 needs NVFP4: set precision fp8 for it"):
        pipeline.prepare_modelopt_checkpoint(spec(tmp_path, model, precision="nvfp4"), tmp_path / "c", runtime)


def test_quantizing_needs_the_modelopt_checkout(fake):
    tmp_path, model = fake
    with pytest.raises(TrtsweepError, match=r"set trtllm\.modelopt_dir"):
        pipeline.prepare_modelopt_checkpoint(spec(tmp_path, model, modelopt_dir=""), tmp_path / "c", Runtime())
    assert calls(tmp_path) == []
