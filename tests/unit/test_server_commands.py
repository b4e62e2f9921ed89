"""Command lines and environments of the three Triton runtimes and the multi-GPU launch (asserted, since no GPU
is here): the per-start server id on the serving rank, the GPUs a server gets, no SSH session variables."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from trtsweep.errors import TrtsweepError
from trtsweep.serve.command import SSH_SESSION_VARS, build_command, strip_server_id
from trtsweep.serve.identity import repository_hash
from trtsweep.serve.probes import check_world_size, engine_world_size
from trtsweep.serve.spec import ContainerSpec, ServerSpec

DOUBLES = Path(__file__).resolve().parent.parent / "doubles"


def spec(**kw) -> ServerSpec:
    base = {"model_repository": Path("/srv/repo"), "log_file": Path("/srv/log"), "runtime": "native",
            "tritonserver": "/opt/tritonserver/bin/tritonserver", "http_port": 8000, "grpc_port": 8001,
            "metrics_port": 8002}  # fmt: skip
    return ServerSpec(**{**base, **kw})


SID = "trtsweep-0123456789abcdef"
TAG = "0123456789abcdef"  # the per-start shared-memory tag


def rank(i: int, binary: str = "/opt/tritonserver/bin/tritonserver", tag: str = "8000") -> list[str]:
    return [
        binary, "--model-repository=/srv/repo", "--http-port=8000", "--grpc-port=8001",
        "--metrics-port=8002", "--http-address=127.0.0.1", "--grpc-address=127.0.0.1", "--metrics-address=127.0.0.1",
        "--disable-auto-complete-config", f"--backend-config=python,shm-region-prefix-name=trtsweep{tag}r{i}_",
        "--log-verbose=0", "--exit-timeout-secs=10",
    ]  # fmt: skip


def test_native_single_rank():
    argv, _ = build_command(spec())
    assert argv == rank(0)


def test_the_server_id_goes_to_the_serving_rank():
    argv, _ = build_command(spec(), SID)
    assert argv == [*rank(0, tag=TAG), f"--id={SID}"]
    assert strip_server_id(argv) == rank(0)  # what two starts of one setting share


def test_native_tp2_launches_two_ranks_under_mpirun_with_leader_mode_followers():
    argv, _ = build_command(spec(world_size=2), SID)
    follower = [*rank(1, tag=TAG)[1:], "--model-control-mode=explicit", "--load-model=tensorrt_llm"]
    assert argv == ["mpirun", "--allow-run-as-root", "-n", "1", *rank(0, tag=TAG), f"--id={SID}", ":",
                    "-n", "1", rank(1)[0], *follower, ":"]  # fmt: skip
    assert [a for a in argv if a.startswith("--id")] == [f"--id={SID}"]  # rank 0 only: it alone serves


def container_argv(**kw) -> list[str]:
    container = ContainerSpec(image="nvcr.io/nvidia/tritonserver:25.12-trtllm-python-py3", name="trtsweep-p1",
                              mounts=["/srv/engines/e1", "/srv/models/qwen"])  # fmt: skip
    argv, _ = build_command(spec(runtime="container", container=container, world_size=2,
                                 tritonserver="tritonserver", **kw), SID)  # fmt: skip
    return argv


def test_container_wraps_the_command_with_gpus_ulimits_and_mounts_and_no_shm_size_beside_host_ipc():
    argv = container_argv()
    assert argv[:22] == [
        "docker", "run", "--rm", "--init", "--name", "trtsweep-p1", "--gpus", "all", "--network", "host",
        "--ipc", "host", "--ulimit", "memlock=-1", "--ulimit", "stack=67108864",
        "-v", "/srv/repo:/srv/repo", "-v", "/srv/engines/e1:/srv/engines/e1", "-v", "/srv/models/qwen:/srv/models/qwen",
    ]  # fmt: skip
    assert argv[22:] == [
        "nvcr.io/nvidia/tritonserver:25.12-trtllm-python-py3", "mpirun", "--allow-run-as-root",
        "-n", "1", *rank(0, "tritonserver", TAG), f"--id={SID}", ":",
        "-n", "1", *rank(1, "tritonserver", TAG), "--model-control-mode=explicit", "--load-model=tensorrt_llm", ":",
    ]  # fmt: skip


def test_container_visible_devices_become_a_docker_device_request(monkeypatch):
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    argv = container_argv(visible_devices="0, 1")
    # docker parses --gpus as one CSV record: the quotes keep both ids in the device field
    assert argv[argv.index("--gpus") + 1] == '"device=0,1"'
    assert not any("CUDA_VISIBLE_DEVICES" in a for a in argv)  # docker's device request is the whole story
    container = ContainerSpec(image="img", name="n")
    _, env = build_command(spec(runtime="container", container=container, visible_devices="2"))
    assert "CUDA_VISIBLE_DEVICES" not in env


def test_pyxis_runs_the_image_as_a_step_beside_the_lanes_on_its_gpus(monkeypatch, tmp_path):
    for name, value in {"SLURM_JOB_ID": "12", "SLURMD_NODENAME": "n2", "SLURM_STEP_ID": "3"}.items():
        monkeypatch.setenv(name, value)  # inside the lane's step
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")
    container = ContainerSpec(image="nvcr.io/nvidia/tritonserver:25.12-trtllm-python-py3", name="trtsweep-p1-8000",
                              mounts=["/srv/engines/e1"])  # fmt: skip
    argv, env = build_command(spec(runtime="pyxis", container=container, world_size=2, tritonserver="tritonserver",
                                   visible_devices="2,3"), SID)  # fmt: skip
    assert argv[:15] == [
        "srun", "--jobid=12", "--overlap", "--nodelist=n2", "--nodes=1", "--ntasks=1", "--job-name=trtsweep-p1-8000",
        "--export=ALL", "--container-image=nvcr.io/nvidia/tritonserver:25.12-trtllm-python-py3",
        "--container-mounts=/srv/repo:/srv/repo,/srv/engines/e1:/srv/engines/e1", f"--container-workdir={tmp_path}",
        "--no-container-entrypoint", "env", "CUDA_VISIBLE_DEVICES=2,3", "mpirun",
    ]  # fmt: skip
    assert "--ulimit" not in argv and "docker" not in argv
    assert env["CUDA_VISIBLE_DEVICES"] == "0,1"  # srun's own: Slurm sets the step's, the command's `env` the server's
    monkeypatch.delenv("SLURM_STEP_ID")
    with pytest.raises(TrtsweepError, match="runtime pyxis runs inside a lane's Slurm step"):
        build_command(spec(runtime="pyxis", container=container))


@pytest.mark.parametrize("runtime", ["native", "local"])
def test_visible_devices_set_cuda_visible_devices(runtime, monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1,2,3")
    _, env = build_command(spec(runtime=runtime, visible_devices="2,3"))
    assert env["CUDA_VISIBLE_DEVICES"] == "2,3"
    _, env = build_command(spec(runtime=runtime))
    assert env["CUDA_VISIBLE_DEVICES"] == "0,1,2,3"  # not given: the host's setting stays


@pytest.mark.parametrize("bad", ["", "0,,1", "0, 1 2", '0"'])
def test_malformed_visible_devices_are_refused(bad):
    with pytest.raises(TrtsweepError, match="visible_devices must be comma-separated"):
        build_command(spec(visible_devices=bad))


@pytest.mark.parametrize("runtime", ["native", "local", "container"])
def test_ssh_session_variables_do_not_reach_the_server(runtime, monkeypatch):
    for name in SSH_SESSION_VARS:
        monkeypatch.setenv(name, "1.2.3.4 1 22")
    monkeypatch.setenv("SHLVL", "0")
    monkeypatch.setenv("TRTSWEEP_KEEP_ME", "yes")
    _, env = build_command(spec(runtime=runtime, container=ContainerSpec(image="img", name="n")))
    assert set(SSH_SESSION_VARS) == {"SSH_CLIENT", "SSH2_CLIENT", "SSH_CONNECTION", "SSH_TTY", "BASH_ENV"}
    assert not set(SSH_SESSION_VARS) & set(env)
    assert env["TRTSWEEP_KEEP_ME"] == "yes"  # the rest of the environment is kept


def test_extra_args_cannot_set_the_server_id():
    with pytest.raises(TrtsweepError, match="must not set --id"):
        build_command(spec(extra_args=["--id=mine"]), SID)


def test_repository_hash_covers_paths_and_bytes_but_not_pycache(tmp_path):
    (tmp_path / "m" / "1").mkdir(parents=True)
    (tmp_path / "m" / "config.pbtxt").write_text("backend: python")
    (tmp_path / "m" / "1" / "model.py").write_text("x = 1")
    first = repository_hash(tmp_path)
    (tmp_path / "m" / "1" / "__pycache__").mkdir()
    (tmp_path / "m" / "1" / "__pycache__" / "model.cpython-311.pyc").write_bytes(b"\0")
    assert repository_hash(tmp_path) == first
    (tmp_path / "m" / "1" / "model.py").write_text("x = 2")
    second = repository_hash(tmp_path)
    assert second != first
    (tmp_path / "m" / "1" / "model.py").rename(tmp_path / "m" / "1" / "other.py")
    assert repository_hash(tmp_path) != second


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


def test_world_size_must_fit_the_servers_visible_devices(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1,2,3")
    check_world_size(spec(world_size=2, visible_devices="2,3"), None)
    with pytest.raises(TrtsweepError, match="world_size 2 needs 2 GPUs; visible_devices '3' has 1"):
        check_world_size(spec(world_size=2, visible_devices="3"), None)


def test_every_start_names_its_own_shared_memory_regions():
    """/dev/shm is one per machine: two starts (a sweep that lost the port race, a packed lane, another test host
    of this machine) must never share python-backend regions, yet adoption still compares equal settings."""
    first, _ = build_command(spec(), "trtsweep-aaaaaaaaaaaaaaaa")
    second, _ = build_command(spec(), "trtsweep-bbbbbbbbbbbbbbbb")
    prefixes = {a for a in first + second if "shm-region-prefix-name" in a}
    assert len(prefixes) == 2
    assert strip_server_id(first) == strip_server_id(second)
