"""The `predicted` strategy's predictor against the real AIConfigurator (its offline database, on CPU).

AIConfigurator needs numpy>=2 where trtsweep pins numpy<2: it gets a venv of its own, made here once under
.venv/ (or given by TRTSWEEP_AICONFIGURATOR). In CI a missing package fails the tests with the reason; elsewhere
they are skipped with it. The CPU test bed has no GPU AIConfigurator knows: the tests give an H100's name."""

from __future__ import annotations

import csv
import fcntl
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from trtsweep.errors import TrtsweepError
from trtsweep.search import predict as pred
from trtsweep.sweep.flows import PYTORCH_PRECISIONS
from trtsweep.toolchain.precisions import PRECISIONS

ROOT = Path(__file__).resolve().parents[2]
VENV = ROOT / ".venv" / pred.REQUIREMENT.replace("==", "-")
H100 = "NVIDIA H100 80GB HBM3"
SLO = {"ttft_p99_ms": 1000.0, "tpot_p99_ms": 50.0, "min_success_rate": 0.99}
# Qwen2.5-7B-Instruct's shape (no weights: the tool reads only config.json)
QWEN_7B = {
    "architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "hidden_size": 3584, "intermediate_size": 18944,
    "num_hidden_layers": 28, "num_attention_heads": 28, "num_key_value_heads": 4, "max_position_embeddings": 32768,
    "vocab_size": 152064, "rms_norm_eps": 1e-6, "rope_theta": 1000000.0, "hidden_act": "silu",
    "torch_dtype": "bfloat16", "tie_word_embeddings": False,
}  # fmt: skip
CONFIGS = [
    {"id": "fp16-tp1-bs512", "precision": "fp16", "tp": 1, "pp": 1, "max_batch_size": 512, "kv_cache_dtype": None},
    {"id": "fp16-tp1-bs64", "precision": "fp16", "tp": 1, "pp": 1, "max_batch_size": 64, "kv_cache_dtype": None},
    {"id": "fp8-tp1-bs128", "precision": "fp8", "tp": 1, "pp": 1, "max_batch_size": 128, "kv_cache_dtype": "fp8"},
    {"id": "int4_wo-tp2-bs64", "precision": "int4_wo", "tp": 2, "pp": 1, "max_batch_size": 64},
    {"id": "int8_sq-tp1-bs64", "precision": "int8_sq", "tp": 1, "pp": 1, "max_batch_size": 64},
    {"id": "w4a8_awq-tp1-bs64", "precision": "w4a8_awq", "tp": 1, "pp": 1, "max_batch_size": 64},
    {"id": "bf16-tp8-bs64", "precision": "bf16", "tp": 8, "pp": 1, "max_batch_size": 64},
]


def _install() -> str | None:
    """Make the venv of AIConfigurator once (parallel test workers wait for the one that makes it); None when done,
    else why not."""
    VENV.parent.mkdir(parents=True, exist_ok=True)
    with open(VENV.parent / f".{VENV.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        return _make_venv()


def _make_venv() -> str | None:
    if (VENV / ".complete").exists():
        return None
    shutil.rmtree(VENV, ignore_errors=True)
    for command in (
        [sys.executable, "-m", "venv", str(VENV)],
        [str(VENV / "bin" / "pip"), "install", "-q", pred.REQUIREMENT],
    ):
        proc = subprocess.run(command, capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
            return f"{pred.REQUIREMENT} could not be installed in {VENV}: {last}"
    (VENV / ".complete").touch()
    return None


@pytest.fixture(scope="module")
def tool() -> Path:
    given = os.environ.get("TRTSWEEP_AICONFIGURATOR")
    if given:
        return Path(given)
    reason = _install()
    if reason is not None:
        if os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)
    return VENV / "bin" / "aiconfigurator"


@pytest.fixture(scope="module")
def qwen(tmp_path_factory) -> Path:
    model = tmp_path_factory.mktemp("qwen2.5-7b")
    (model / "config.json").write_text(json.dumps(QWEN_7B))
    return model


@pytest.fixture(scope="module")
def predicted(tool, qwen, tmp_path_factory) -> tuple[dict[str, pred.Prediction], Path]:
    """One shared run: the predictions and their workdir."""
    system = pred.system_for_gpu(H100)
    assert system is not None
    workdir = tmp_path_factory.mktemp("predict")
    out = pred.predict(CONFIGS, model_dir=qwen, system=system, isl=1024, osl=128, slo=SLO, version=None,
                       workdir=workdir, executable=str(tool))  # fmt: skip
    return out, workdir


@pytest.mark.parametrize(
    ("name", "system"),
    [
        ("NVIDIA H100 80GB HBM3", "h100_sxm"), ("NVIDIA H100 PCIe", None), ("NVIDIA H100 NVL", None),
        ("NVIDIA H200", "h200_sxm"), ("NVIDIA A100-SXM4-80GB", "a100_sxm"), ("NVIDIA A100-PCIE-40GB", None),
        ("NVIDIA A100 80GB PCIe", None), ("NVIDIA L40S", "l40s"), ("NVIDIA L4", None), ("NVIDIA B200", "b200_sxm"),
        ("NVIDIA GB200", "gb200"), ("NVIDIA B300 SXM6 AC", "b300_sxm"), ("Tesla T4", None),
        ("NVIDIA RTX PRO 6000 Blackwell Server Edition", "rtx_pro_6000_server"),
    ],
)  # fmt: skip
def test_system_of_an_nvidia_smi_name(name, system):
    assert pred.system_for_gpu(name) == system


def test_every_system_has_a_tensorrt_llm_database_in_the_installed_package(tool):
    code = "import aiconfigurator_core, pathlib; print(pathlib.Path(aiconfigurator_core.__file__).parent / 'systems')"
    proc = subprocess.run([str(tool.parent / "python"), "-c", code], capture_output=True, text=True, check=True)
    data = Path(proc.stdout.strip()) / "data"
    missing = [s for _, s in pred.SYSTEMS if not any((data / s / "gemm" / "trtllm").glob("*/*"))]
    assert not missing, f"systems without TensorRT-LLM GEMM data in {data}: {missing}"


def test_every_precision_has_a_mode_the_tool_takes_or_a_reason(tool):
    proc = subprocess.run([str(tool), "cli", "estimate", "--help"], capture_output=True, text=True, check=True)
    help_text = " ".join(proc.stdout.split())
    for precision in dict.fromkeys((*PRECISIONS, *PYTORCH_PRECISIONS)):
        for kv in pred.KV_CACHE_MODES:
            modes = pred.quant_modes(precision, kv)
            if isinstance(modes, str):
                assert precision == "w4a8_awq" and "no GEMM quantization mode" in modes
                continue
            gemm = help_text.split("--gemm-quant-mode {")[1].split("}")[0].split(",")
            kvs = help_text.split("--kvcache-quant-mode {")[1].split("}")[0].split(",")
            assert modes[0] in gemm and modes[1] in kvs, (precision, kv, modes)


def test_an_unknown_kv_cache_dtype_has_a_reason():
    assert "kv_cache_dtype int4" in pred.quant_modes("fp16", "int4")


def test_supported_configurations_have_a_throughput_within_their_batch_and_the_slo(predicted):
    out, _ = predicted
    for config in CONFIGS[:3]:
        got = out[config["id"]]
        assert got.supported and got.reason is None, (config["id"], got)
        assert got.tokens_per_s_per_gpu and got.tokens_per_s_per_gpu > 0
        assert got.concurrency is not None and 1 <= got.concurrency <= config["max_batch_size"]
        assert got.ttft_ms is not None and got.ttft_ms <= SLO["ttft_p99_ms"]
        assert got.tpot_ms is not None and got.tpot_ms <= SLO["tpot_p99_ms"]
        assert got.request_rate and got.request_rate > 0
    assert out["fp16-tp1-bs64"].tokens_per_s_per_gpu < out["fp16-tp1-bs512"].tokens_per_s_per_gpu
    assert out["fp8-tp1-bs128"].tokens_per_s_per_gpu > out["fp16-tp1-bs64"].tokens_per_s_per_gpu


def test_unsupported_configurations_say_why(predicted):
    out, _ = predicted
    reasons = {key: out[key].reason or "" for key in ("int4_wo-tp2-bs64", "int8_sq-tp1-bs64", "w4a8_awq-tp1-bs64")}
    assert all(not out[key].supported for key in reasons)
    assert "Unsupported gemm quant mode 'int4_wo'" in reasons["int4_wo-tp2-bs64"], reasons
    assert "Unsupported gemm quant mode 'sq'" in reasons["int8_sq-tp1-bs64"], reasons
    assert reasons["w4a8_awq-tp1-bs64"].startswith("precision w4a8_awq: AIConfigurator has no GEMM")
    assert "divisible by tp_size 8" in (out["bf16-tp8-bs64"].reason or "")
    assert out["bf16-tp8-bs64"].to_dict()["tokens_per_s_per_gpu"] is None


def test_a_prediction_is_the_tools_own_best_configuration_under_the_slo(predicted, tool, qwen, tmp_path):
    """`cli default` picks its best aggregated configuration for one GPU under TTFT/TPOT itself: the same
    numbers as the prediction read from the experiment's pareto.csv."""
    command = [str(tool), "cli", "default", "--model-path", str(qwen), "--system", "h100_sxm", "--total-gpus", "1",
               "--serving-mode", "agg", "--isl", "1024", "--osl", "128", "--ttft", "1000", "--tpot", "50",
               "--save-dir", str(tmp_path), "--top-n", "1"]  # fmt: skip
    subprocess.run(command, capture_output=True, text=True, check=True)
    [best_csv] = tmp_path.glob("*/agg/best_config_topn.csv")
    with best_csv.open(newline="") as handle:
        best = next(csv.DictReader(handle))
    got = predicted[0]["fp16-tp1-bs512"]
    assert (best["tp"], best["pp"], best["gemm"]) == ("1", "1", "bfloat16")
    assert got.tokens_per_s_per_gpu == pytest.approx(float(best["tokens/s/gpu"]))
    assert got.concurrency == int(best["concurrency"])
    assert got.request_rate == pytest.approx(float(best["request_rate"]))
    assert (got.ttft_ms, got.tpot_ms) == pytest.approx((float(best["ttft"]), float(best["tpot"])))


def test_a_rerun_reads_the_cache(predicted, tool, qwen):
    out, workdir = predicted
    runs = sorted(p.name for p in workdir.iterdir())
    again = pred.predict(CONFIGS, model_dir=qwen, system="h100_sxm", isl=1024, osl=128, slo=SLO, version=None,
                         workdir=workdir, executable=str(tool))  # fmt: skip
    assert again == out and sorted(p.name for p in workdir.iterdir()) == runs
    assert len(runs) == 5  # one tool run per distinct task: the two fp16 tp1 share one


def test_an_architecture_the_tool_does_not_know_is_unsupported_with_its_reason(tool, tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2"}))
    out = pred.predict(CONFIGS[:1], model_dir=tmp_path, system="h100_sxm", isl=1024, osl=128, slo=SLO, version=None,
                       workdir=tmp_path / "work", executable=str(tool))  # fmt: skip
    assert not out["fp16-tp1-bs512"].supported
    assert "architecture GPT2LMHeadModel is not supported" in (out["fp16-tp1-bs512"].reason or "")


def test_a_missing_executable_or_config_is_a_one_line_error(tmp_path):
    with pytest.raises(TrtsweepError, match=r"AIConfigurator is not installed: pip install 'aiconfigurator=="):
        pred.predict(CONFIGS, model_dir=tmp_path, system="h100_sxm", isl=1, osl=1, slo={}, version=None,
                     workdir=tmp_path, executable=str(tmp_path / "no-such-tool"))  # fmt: skip
    with pytest.raises(TrtsweepError, match=r"config.json: not found"):
        pred.predict(CONFIGS, model_dir=tmp_path, system="h100_sxm", isl=1, osl=1, slo={}, version=None,
                     workdir=tmp_path, executable=sys.executable)  # fmt: skip
    (tmp_path / "config.json").write_text("{}")
    with pytest.raises(TrtsweepError, match=r"configuration x: no 'max_batch_size'"):
        pred.predict([{"id": "x", "precision": "fp16", "tp": 1, "pp": 1}], model_dir=tmp_path, system="h100_sxm",
                     isl=1, osl=1, slo={}, version=None, workdir=tmp_path, executable=sys.executable)  # fmt: skip


def test_a_prediction_names_its_tool_and_database_and_asks_for_the_sweeps_release_where_the_tool_has_it(tool):
    """AIConfigurator 0.12 has TensorRT-LLM 1.3 release-candidate databases only: a 1.2 sweep's predictions read its
    default and say so; a 1.3 sweep's read a 1.3 one; a tool that cannot be asked is said to be so."""
    older = pred.database(str(tool), "h100_sxm", "1.2.0")
    assert older.tool.startswith(("aiconfigurator ", "aisimulate ")) and older.backend == "trtllm"
    assert older.version and older.note.startswith(f"it has no TensorRT-LLM 1.2 database for h100_sxm: its default, "
                                                   f"{older.version} (has ")  # fmt: skip
    same = pred.database(str(tool), "h100_sxm", "1.3")
    assert same.version and same.version.startswith("1.3.") and same.note == "the sweep's TensorRT-LLM 1.3"
    unknown = pred.database("/nonexistent/bin/aiconfigurator", "h100_sxm", "1.2")
    assert unknown.version is None and unknown.note.startswith("the tool's databases could not be listed")


def test_a_prediction_stays_within_the_concurrency_the_sweep_measures(predicted, tool, qwen):
    """With attention DP the tool's batch is a rank's and its best row can lie far above the sweep's levels: a
    prediction is the best row at a concurrency the sweep measures (`max_concurrency`), read from the same run."""
    out, workdir = predicted
    free = out["fp16-tp1-bs512"]
    assert free.concurrency is not None and free.concurrency > 64  # 256 on h100_sxm for this configuration
    runs = sorted(p.name for p in workdir.iterdir())
    config = next(c for c in CONFIGS if c["id"] == "fp16-tp1-bs512")
    capped = pred.predict([{**config, "max_concurrency": 64}], model_dir=qwen, system="h100_sxm", isl=1024, osl=128,
                          slo=SLO, version=None, workdir=workdir, executable=str(tool))["fp16-tp1-bs512"]  # fmt: skip
    assert capped.supported and capped.concurrency is not None and capped.concurrency <= 64, capped
    assert (capped.tokens_per_s_per_gpu or 0) < (free.tokens_per_s_per_gpu or 0)
    assert sorted(p.name for p in workdir.iterdir()) == runs  # the same tool run, read again
