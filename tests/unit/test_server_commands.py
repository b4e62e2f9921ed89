"""Command lines of the three Triton runtimes and the multi-GPU launch (asserted, since no GPU is here)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from trtsweep.errors import TrtsweepError
from trtsweep.serve.server import ContainerSpec, ServerSpec, build_command, check_world_size, engine_world_size

DOUBLES = Path(__file__).resolve().parent.parent / "doubles"


def spec(**kw) -> ServerSpec:
    base = {"model_repository": Path("/srv/repo"), "log_file": Path("/srv/log"), "runtime": "native",
            "tritonserver": "/opt/tritonserver/bin/tritonserver", "http_port": 8000, "grpc_port": 8001,
            "metrics_port": 8002}  # fmt: skip
    return ServerSpec(**{**base, **kw})


def rank(i: int) -> list[str]:
    return [
        "/opt/tritonserver/bin/tritonserver", "--model-repository=/srv/repo", "--http-port=8000", "--grpc-port=8001",
        "--metrics-port=8002", "--http-address=127.0.0.1", "--grpc-address=127.0.0.1", "--metrics-address=127.0.0.1",
        "--disable-auto-complete-config", f"--backend-config=python,shm-region-prefix-name=trtsweep8000r{i}_",
        "--log-verbose=0", "--exit-timeout-secs=10",
    ]  # fmt: skip


def test_native_single_rank():
    argv, _ = build_command(spec())
    assert argv == rank(0)


def test_native_tp2_launches_two_ranks_under_mpirun_with_leader_mode_followers():
    argv, _ = build_command(spec(world_size=2))
    follower = [*rank(1)[1:], "--model-control-mode=explicit", "--load-model=tensorrt_llm"]
    assert argv == ["mpirun", "--allow-run-as-root", "-n", "1", *rank(0), ":", "-n", "1", rank(1)[0], *follower, ":"]


def test_container_wraps_the_command_with_gpus_shm_ulimits_and_mounts():
    container = ContainerSpec(image="nvcr.io/nvidia/tritonserver:25.12-trtllm-python-py3", name="trtsweep-p1",
                              mounts=["/srv/engines/e1", "/srv/models/qwen"])  # fmt: skip
    argv, _ = build_command(spec(runtime="container", container=container, world_size=2,
                                 tritonserver="tritonserver"))  # fmt: skip
    assert argv[:23] == [
        "docker", "run", "--rm", "--init", "--name", "trtsweep-p1", "--gpus", "all", "--network", "host",
        "--ipc", "host", "--shm-size=2g", "--ulimit", "memlock=-1", "--ulimit", "stack=67108864",
        "-v", "/srv/repo:/srv/repo", "-v", "/srv/engines/e1:/srv/engines/e1", "-v", "/srv/models/qwen:/srv/models/qwen",
    ]  # fmt: skip
    assert argv[23:27] == ["nvcr.io/nvidia/tritonserver:25.12-trtllm-python-py3", "mpirun", "--allow-run-as-root", "-n"]
    assert argv.count("tritonserver") == 2


def test_container_needs_an_image():
    with pytest.raises(TrtsweepError, match="needs a container image"):
        build_command(spec(runtime="container"))


def test_local_runtime_is_single_rank():
    with pytest.raises(TrtsweepError, match="local runtime serves one rank"):
        build_command(spec(runtime="local", world_size=2))


def engine(tmp_path: Path, tp: int, pp: int) -> Path:
    (tmp_path / "config.json").write_text(json.dumps(
        {"pretrained_config": {"mapping": {"world_size": tp * pp, "tp_size": tp, "pp_size": pp}},
         "build_config": {"max_batch_size": 8}}))  # fmt: skip
    return tmp_path


def test_world_size_must_match_the_engine(tmp_path):
    assert engine_world_size(engine(tmp_path, 2, 2)) == 4
    with pytest.raises(TrtsweepError, match=r"world_size 2 does not match the engine's tp x pp = 4"):
        check_world_size(spec(world_size=2), tmp_path)


def test_world_size_must_fit_the_hosts_gpus(tmp_path, monkeypatch):
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.setenv("PATH", f"{DOUBLES}:/usr/bin:/bin")
    monkeypatch.setenv("FAKE_GPU_COUNT", "2")
    check_world_size(spec(world_size=2), engine(tmp_path, 2, 1))
    with pytest.raises(TrtsweepError, match="world_size 4 needs 4 GPUs; this host has 2"):
        check_world_size(spec(world_size=4), engine(tmp_path, 4, 1))
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    with pytest.raises(TrtsweepError, match="this host has 1"):
        check_world_size(spec(world_size=2), None)
