"""The build steps run for real against the recording tool doubles (tests/doubles/): every release range,
cache keys, completion markers, engine checks, results records, container argv, secrets."""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from dataclasses import replace
from pathlib import Path

import pytest

from tests.unit import build_env
from tests.unit.build_env import RANGES
from trtsweep.errors import TrtsweepError
from trtsweep.toolchain import artifacts, calibration, engine, pipeline
from trtsweep.toolchain.commands import BuildOptions, CheckpointSpec
from trtsweep.toolchain.runner import Runtime

PROMPTS = Path(__file__).resolve().parents[2] / "data" / "prompts.jsonl"
SECRET = "hf_SeCrEt0123456789"


def spec(fake: build_env.FakeTrtllm, version: str, **changes) -> CheckpointSpec:
    base = CheckpointSpec(family="llama", precision="int8_sq", version=version, model_dir=str(fake.model_dir), tp=2,
                          model_id="acme/tiny", model_revision="abc123")  # fmt: skip
    return replace(base, **changes)


def engine_spec(checkpoint: str, version: str, **changes) -> pipeline.EngineSpec:
    options = BuildOptions(max_batch_size=8, max_input_len=512, max_output_len=128, **changes)
    return pipeline.EngineSpec(checkpoint, version, options, tp=2)


def both_steps(fake, version, **changes):
    ckpt = pipeline.prepare_checkpoint(spec(fake, version, **changes), fake.cache_dir, fake.runtime)
    eng = pipeline.build_engine(engine_spec(ckpt.path, version), fake.cache_dir, fake.runtime)
    return ckpt, eng


CASES = [("llama", "int8_sq", "int8"), ("qwen", "fp8", "fp8"), ("qwen", "int4_wo", None), ("llama", "int4_awq", None)]


@pytest.mark.parametrize("version", RANGES)
@pytest.mark.parametrize(("family", "precision", "kv"), CASES)
def test_tool_doubles_accept_every_generated_command(tmp_path, monkeypatch, version, family, precision, kv):
    fake = build_env.make(tmp_path, monkeypatch, version)
    calib = None if version in ("0.8.0", "0.9.0") else str(PROMPTS)  # no --calib_dataset before 0.10
    if family == "qwen" and version == "0.8.0":
        with pytest.raises(TrtsweepError, match="is not supported"):
            both_steps(fake, version, family=family, precision=precision, kv_cache_dtype=kv)
        return
    ckpt, eng = both_steps(fake, version, family=family, precision=precision, kv_cache_dtype=kv, calib_data=calib)
    assert [c["tool"] for c in fake.calls()] == [Path(ckpt.command[1]).name, "trtllm-build"]
    assert ckpt.changed and eng.changed and eng.entry["ranks"] == 2
    config = json.loads((Path(eng.path) / "config.json").read_text())
    assert config["pretrained_config"]["mapping"]["tp_size"] == 2


def test_calibration_dataset_layout(tmp_path):
    calib = calibration.prepare(PROMPTS, tmp_path, 100)
    train = (calib.directory("quantize.py") / "train.jsonl").read_text().splitlines()
    validation = (calib.directory("convert_checkpoint.py") / "validation.jsonl").read_text().splitlines()
    assert len(train) == 100 == calib.records and train == validation
    assert "lambada" in str(calib.directory("convert_checkpoint.py"))
    first = json.loads(PROMPTS.read_text().splitlines()[0])
    assert json.loads(train[0]) == {"text": f"{first['input']}\n{first['output']}"}
    assert calibration.prepare(PROMPTS, tmp_path, 100) == calib  # same content, same directory
    assert calibration.prepare(PROMPTS, tmp_path, 50).root != calib.root
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"input": "ok"}\n{"prompt": "x"}\n')
    with pytest.raises(TrtsweepError, match=r"bad\.jsonl:2: expected"):
        calibration.prepare(bad, tmp_path)


def test_user_calibration_needs_a_tool_that_reads_it(tmp_path, monkeypatch):
    fake = build_env.make(tmp_path, monkeypatch, "0.8.0")
    with pytest.raises(TrtsweepError, match="has no --calib_dataset"):
        pipeline.prepare_checkpoint(spec(fake, "0.8.0", calib_data=str(PROMPTS)), fake.cache_dir, fake.runtime)
    assert fake.calls() == []


def test_same_inputs_same_directory_any_change_another(tmp_path, monkeypatch):
    fake = build_env.make(tmp_path, monkeypatch, "0.11.0")
    base = spec(fake, "0.11.0", calib_data=str(PROMPTS))
    plan = pipeline.prepare_checkpoint(base, fake.cache_dir, fake.runtime, check_mode=True).path
    assert pipeline.prepare_checkpoint(base, fake.cache_dir, fake.runtime, check_mode=True).path == plan
    assert Path(plan).name.startswith("llama-int8_sq-tp2pp1-") and not Path(plan).exists()
    other_prompts = tmp_path / "other.jsonl"
    other_prompts.write_text('{"input": "different"}\n')
    changes = [{"model_revision": "def456"}, {"model_id": "acme/other"}, {"precision": "int8_wo"}, {"tp": 1},
               {"pp": 2}, {"kv_cache_dtype": "int8"}, {"calib_data": str(other_prompts)}, {"calib_size": 64},
               {"smoothquant_alpha": 0.8}, {"version": "0.11.1"}, {"extra_flags": {"load_model_on_cpu": True}},
               {"dtype": "bfloat16"}]  # fmt: skip
    paths = {plan}
    for change in changes:
        if "calib_size" in change:  # llama's 0.11 script has no --calib_size; the key follows the data only
            continue
        paths.add(pipeline.prepare_checkpoint(replace(base, **change), fake.cache_dir, fake.runtime,
                                              check_mode=True).path)  # fmt: skip
    assert len(paths) == len(changes)
    ckpt = str(fake.cache_dir / "checkpoints" / "llama-int8_sq-tp2pp1-0123456789ab")
    engine_base = pipeline.build_engine(engine_spec(ckpt, "0.11.0"), fake.cache_dir, fake.runtime, check_mode=True)
    assert Path(engine_base.path).name.startswith("llama-int8_sq-tp2pp1-bs8-isl512-seq640-")
    engines = {engine_base.path}
    for change in [{"max_num_tokens": 2048}, {"gemm_plugin": "float16"}, {"paged_kv_cache": False},
                   {"workers": 2}, {"extra_flags": {"max_beam_width": 2}}]:  # fmt: skip
        engines.add(pipeline.build_engine(engine_spec(ckpt, "0.11.0", **change), fake.cache_dir, fake.runtime,
                                          check_mode=True).path)  # fmt: skip
    assert len(engines) == 6


def test_complete_artifacts_are_reused_and_nothing_runs(tmp_path, monkeypatch):
    fake = build_env.make(tmp_path, monkeypatch, "0.16.0")
    ckpt, eng = both_steps(fake, "0.16.0")
    assert len(fake.calls()) == 2
    again_ckpt, again_eng = both_steps(fake, "0.16.0")
    assert len(fake.calls()) == 2  # the second run ran nothing
    assert (again_ckpt.path, again_eng.path) == (ckpt.path, eng.path)
    assert not again_ckpt.changed and again_ckpt.reused and not again_eng.changed and again_eng.reused
    assert again_eng.entry["duration_s"] == eng.entry["duration_s"]
    plan = pipeline.build_engine(engine_spec(ckpt.path, "0.16.0"), fake.cache_dir, fake.runtime, check_mode=True)
    assert not plan.changed and plan.command == eng.command
    marker = json.loads((Path(eng.path) / artifacts.MARKER).read_text())
    assert marker["command"] == eng.command and marker["inputs"]["checkpoint"] == Path(ckpt.path).name
    # a second engine from the same checkpoint shares it
    other = pipeline.build_engine(engine_spec(ckpt.path, "0.16.0", max_num_tokens=1024), fake.cache_dir, fake.runtime)
    assert other.changed and other.path != eng.path and [c["tool"] for c in fake.calls()][-1] == "trtllm-build"


def test_a_crashed_half_artifact_is_removed_and_rebuilt(tmp_path, monkeypatch):
    fake = build_env.make(tmp_path, monkeypatch, "0.12.0")
    monkeypatch.setenv("TRTSWEEP_FAKE_FAIL", "crash")
    with pytest.raises(TrtsweepError, match=r"convert_checkpoint\.py failed \(exit status 1\): RuntimeError: CUDA"):
        pipeline.prepare_checkpoint(spec(fake, "0.12.0"), fake.cache_dir, fake.runtime)
    half = next((fake.cache_dir / "checkpoints").iterdir())
    assert (half / "rank0.safetensors").exists() and artifacts.marker(half) is None
    with pytest.raises(TrtsweepError, match="not a complete checkpoint"):
        pipeline.build_engine(engine_spec(str(half), "0.12.0"), fake.cache_dir, fake.runtime)
    monkeypatch.delenv("TRTSWEEP_FAKE_FAIL")
    ckpt = pipeline.prepare_checkpoint(spec(fake, "0.12.0"), fake.cache_dir, fake.runtime)
    assert ckpt.path == str(half) and ckpt.changed and ckpt.removed_partial
    assert artifacts.marker(half) is not None


def test_an_artifact_being_built_elsewhere_is_left_alone_until_its_lock_is_let_go(tmp_path, monkeypatch):
    fake = build_env.make(tmp_path, monkeypatch, "0.16.0")
    ckpt = pipeline.prepare_checkpoint(spec(fake, "0.16.0"), fake.cache_dir, fake.runtime)
    target = Path(pipeline.build_engine(engine_spec(ckpt.path, "0.16.0"), fake.cache_dir, fake.runtime,
                                        check_mode=True).path)  # fmt: skip
    target.mkdir(parents=True)
    (target / "rank0.engine").write_bytes(b"half")
    blocked = threading.Event()
    holder = artifacts._holder
    monkeypatch.setattr(artifacts, "_holder", lambda fd: (blocked.set(), holder(fd))[1])
    built: list[pipeline.Outcome] = []
    # another sweep (or an orphaned tool) is building it: the step waits, deleting nothing under it
    with artifacts.lock(target):
        step = threading.Thread(target=lambda: built.append(
            pipeline.build_engine(engine_spec(ckpt.path, "0.16.0"), fake.cache_dir, fake.runtime)))  # fmt: skip
        step.start()
        assert blocked.wait(60)
        time.sleep(0.2)
        assert step.is_alive() and (target / "rank0.engine").read_bytes() == b"half"
        assert [c["tool"] for c in fake.calls()] == ["convert_checkpoint.py"]
    step.join(60)
    # the holder let go without a marker (it died): the half engine is removed and built
    assert built[0].path == str(target) and built[0].removed_partial and built[0].changed
    assert built[0].entry["waited_for"].startswith(f"pid {os.getpid()} on ") and built[0].entry["waited_s"] > 0
    assert [c["tool"] for c in fake.calls()] == ["convert_checkpoint.py", "trtllm-build"]


def test_a_signal_to_the_step_stops_the_tool(tmp_path, monkeypatch):
    fake = build_env.make(tmp_path, monkeypatch, "0.16.0")
    ckpt = pipeline.prepare_checkpoint(spec(fake, "0.16.0"), fake.cache_dir, fake.runtime)
    monkeypatch.setenv("TRTSWEEP_FAKE_FAIL", "hang")

    def terminate_once_started() -> None:
        deadline = time.monotonic() + 60
        while not list(fake.cache_dir.glob("engines/*/rank0.engine")) and time.monotonic() < deadline:
            time.sleep(0.05)
        os.kill(os.getpid(), signal.SIGTERM)

    before = signal.getsignal(signal.SIGTERM)
    threading.Thread(target=terminate_once_started, daemon=True).start()
    with pytest.raises(TrtsweepError, match=r"trtllm-build stopped by SIGTERM; log: "):
        pipeline.build_engine(engine_spec(ckpt.path, "0.16.0"), fake.cache_dir, fake.runtime)
    tool = fake.calls()[-1]["pid"]
    assert not Path(f"/proc/{tool}").exists()  # killed and reaped
    assert signal.getsignal(signal.SIGTERM) is before  # the caller's handler is back


def test_engine_config_mismatch_is_an_error(tmp_path, monkeypatch):
    fake = build_env.make(tmp_path, monkeypatch, "0.13.0")
    ckpt = pipeline.prepare_checkpoint(spec(fake, "0.13.0"), fake.cache_dir, fake.runtime)
    monkeypatch.setenv("TRTSWEEP_FAKE_ENGINE_TP", "1")
    with pytest.raises(TrtsweepError, match=r"does not match the request: tp_size 1 \(asked 2\)"):
        pipeline.build_engine(engine_spec(ckpt.path, "0.13.0"), fake.cache_dir, fake.runtime)


def test_engine_check_reads_both_config_layouts(tmp_path):
    old = {"pretrained_config": {"mapping": {"tp_size": 1, "pp_size": 1, "world_size": 1}},
           "build_config": {"max_batch_size": 4, "max_input_len": 100, "max_output_len": 28}}  # fmt: skip
    (tmp_path / "config.json").write_text(json.dumps(old))
    (tmp_path / "rank0.engine").write_bytes(b"x" * 10)
    assert engine.check_engine(tmp_path, 1, 1, 4, 100, 128)["engine_size_bytes"] == 10
    with pytest.raises(TrtsweepError, match=r"max_batch_size 4 \(asked 8\)"):
        engine.check_engine(tmp_path, 1, 1, 8, 100, 128)


def test_results_record_command_time_size_and_log(tmp_path, monkeypatch):
    fake = build_env.make(tmp_path, monkeypatch, "1.2.0rc7")
    results = tmp_path / "results"
    ckpt = pipeline.prepare_checkpoint(spec(fake, "1.2.0rc7", precision="fp16"), fake.cache_dir, fake.runtime,
                                       results_dir=str(results))  # fmt: skip
    eng = pipeline.build_engine(engine_spec(ckpt.path, "1.2.0rc7"), fake.cache_dir, fake.runtime,
                                results_dir=str(results))  # fmt: skip
    record = json.loads((results / "trtllm_build.json").read_text())
    assert record["command"] == eng.command and record["engine_size_bytes"] == 2048 and not record["reused"]
    assert record["duration_s"] > 0 and record["trtllm_version"] == "1.2.0rc7"
    log = (results / "trtllm_build.log").read_text()
    assert log.startswith("# ") and "fake trtllm-build 1.2.0rc7" in log
    assert json.loads((results / "checkpoint.json").read_text())["tool"] == "convert_checkpoint.py"
    assert "examples/models/core/llama/convert_checkpoint.py" in ckpt.command[1]


def test_hf_token_never_in_argv_or_logs(tmp_path, monkeypatch):
    fake = build_env.make(tmp_path, monkeypatch, "0.17.0")
    monkeypatch.setenv("TRTSWEEP_FAKE_ECHO_TOKEN", "1")
    ckpt = pipeline.prepare_checkpoint(spec(fake, "0.17.0"), fake.cache_dir, fake.runtime, hf_token=SECRET,
                                       results_dir=str(tmp_path / "results"))  # fmt: skip
    log = Path(ckpt.log_file).read_text()
    assert "HF_TOKEN seen by the tool: ***" in log and SECRET not in log  # the tool got it; the log does not
    assert SECRET not in json.dumps(fake.calls()) and SECRET not in json.dumps(ckpt.command)
    assert SECRET not in (tmp_path / "results" / "checkpoint.log").read_text()
    for path in Path(ckpt.path).iterdir():
        assert SECRET not in path.read_text(errors="replace")
    monkeypatch.setenv("HF_TOKEN", SECRET)
    with pytest.raises(TrtsweepError, match="holds the value of HF_TOKEN"):
        pipeline.prepare_checkpoint(spec(fake, "0.17.0", extra_flags={"hidden_act": SECRET}), fake.cache_dir,
                                    fake.runtime)  # fmt: skip


def test_container_and_native_argv():
    inner = ["trtllm-build", "--checkpoint_dir", "/cache/checkpoints/c", "--output_dir", "/cache/engines/e"]
    assert Runtime().wrap(inner, ["/cache"], "n") == inner
    run = Runtime(kind="container", image="nvcr.io/nvidia/tritonserver:24.07-trtllm-python-py3", gpus='"device=0,1"',
                  mounts=("/models",)).wrap(inner, ["/cache", "/cache"], "trtsweep-e")  # fmt: skip
    assert run == ["docker", "run", "--rm", "--name", "trtsweep-e", "--gpus", '"device=0,1"', "--ipc", "host",
                   "--ulimit", "memlock=-1", "--ulimit", "stack=67108864", "-v", "/cache:/cache", "-v",
                   "/models:/models", "-e", "HF_TOKEN", "nvcr.io/nvidia/tritonserver:24.07-trtllm-python-py3",
                   *inner]  # fmt: skip
    exec_ = Runtime(kind="container", container="trtllm").wrap(inner, ["/cache"], "n")
    assert exec_ == ["docker", "exec", "-e", "HF_TOKEN", "trtllm", *inner]
    with pytest.raises(TrtsweepError, match="set container_image"):
        Runtime(kind="container").wrap(inner, [], "n")


def test_pyxis_runs_a_tool_in_its_image_as_a_step_on_the_lanes_gpus(tmp_path, monkeypatch):
    inner = ["trtllm-build", "--checkpoint_dir", "/cache/checkpoints/c", "--output_dir", "/cache/engines/e"]
    for name, value in {"SLURM_JOB_ID": "7", "SLURMD_NODENAME": "n1", "SLURM_STEP_ID": "0", "SLURM_STEP_GPUS": "4,5",
                        "CUDA_VISIBLE_DEVICES": "4,5"}.items():  # fmt: skip
        monkeypatch.setenv(name, value)  # inside the lane's step, bound GPUs 4 and 5, which the lane gave the point
    monkeypatch.chdir(tmp_path)
    run = Runtime(kind="pyxis", image="nvcr.io/nvidia/tritonserver:24.07-trtllm-python-py3",
                  mounts=("/models",)).wrap(inner, ["/cache", "/cache"], "trtsweep-e")  # fmt: skip
    assert run == ["srun", "--jobid=7", "--overlap", "--nodelist=n1", "--nodes=1", "--ntasks=1",
                   "--job-name=trtsweep-e", "--export=ALL",
                   "--container-image=nvcr.io/nvidia/tritonserver:24.07-trtllm-python-py3",
                   "--container-mounts=/cache:/cache,/models:/models", f"--container-workdir={tmp_path}",
                   "--no-container-entrypoint", "env", "CUDA_VISIBLE_DEVICES=4,5", *inner]  # fmt: skip
    with pytest.raises(TrtsweepError, match="runtime pyxis needs a container image"):
        Runtime(kind="pyxis").wrap(inner, [], "n")


def test_container_runtime_runs_the_docker_cli(tmp_path, monkeypatch):
    fake = build_env.make(tmp_path, monkeypatch, "0.14.0")
    docker = tmp_path / "docker"
    docker.write_text('#!/bin/sh\n# a docker double: drop "run ... <image>" and run the command\n'
                      'while [ "$1" != "image:tag" ]; do shift; done; shift; exec "$@"\n')  # fmt: skip
    docker.chmod(0o755)
    runtime = replace(fake.runtime, kind="container", image="image:tag", docker=str(docker))
    ckpt = pipeline.prepare_checkpoint(spec(fake, "0.14.0", precision="bf16"), fake.cache_dir, runtime,
                                       hf_token=SECRET)  # fmt: skip
    assert ckpt.command[:3] == [str(docker), "run", "--rm"] and "-e" in ckpt.command and SECRET not in ckpt.command
    assert f"{fake.cache_dir}:{fake.cache_dir}" in ckpt.command and fake.calls()[0]["tool"] == "convert_checkpoint.py"


def test_missing_trtllm_dir_and_timeouts(tmp_path, monkeypatch):
    fake = build_env.make(tmp_path, monkeypatch, "0.11.0")
    with pytest.raises(TrtsweepError, match="trtllm_dir"):
        pipeline.prepare_checkpoint(spec(fake, "0.11.0"), fake.cache_dir, replace(fake.runtime, trtllm_dir=""))
    slow = tmp_path / "slow-build"
    slow.write_text("#!/bin/sh\nsleep 30\n")
    slow.chmod(0o755)
    ckpt = pipeline.prepare_checkpoint(spec(fake, "0.11.0"), fake.cache_dir, fake.runtime)
    with pytest.raises(TrtsweepError, match=r"trtllm-build timed out after 0\.5 s"):
        pipeline.build_engine(engine_spec(ckpt.path, "0.11.0"), fake.cache_dir,
                              replace(fake.runtime, trtllm_build=str(slow), timeout_s=0.5))  # fmt: skip
