"""The runtime seam (trtsweep.runtime): one interface, a module per kind. Every kind answers the same questions
(`command`, `held`, `prepare`, `record`); what a kind leaves beside its command's process is named in a state file
and ended by another process through the seam alone (here a recording docker CLI, a test double of the client;
the container and Slurm suites run the real ones)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from trtsweep import runtime
from trtsweep.errors import TrtsweepError
from trtsweep.runtime import Launch
from trtsweep.serve import supervisor
from trtsweep.serve.spec import ServerState

IMAGE = "nvcr.io/nvidia/tritonserver:25.12-trtllm-python-py3"
ANSWERS = ("prepare", "command", "held", "record")


def recording_docker(tmp_path: Path) -> tuple[Path, Path]:
    """A docker CLI that records its arguments, one call a line (JSON), and answers `inspect` with a pid."""
    log, cli = tmp_path / "docker.calls", tmp_path / "docker"
    cli.write_text(f"#!{sys.executable}\nimport json, sys\nopen({str(log)!r}, 'a').write(json.dumps(sys.argv[1:]) + "
                   "'\\n')\nprint(4242 if sys.argv[1:2] == ['inspect'] else '')\n")  # fmt: skip
    cli.chmod(0o755)
    return cli, log


def calls(log: Path) -> list[list[str]]:
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


@pytest.mark.parametrize("kind", runtime.KINDS)
def test_every_kind_answers_the_same_questions(kind):
    where = runtime.of(kind, image=IMAGE)
    assert where.kind == kind and all(callable(getattr(where, name)) for name in ANSWERS)
    assert where.in_image == (kind in runtime.IMAGE_KINDS)


def test_an_unknown_kind_is_refused_in_one_line():
    with pytest.raises(TrtsweepError, match=r"^runtime 'podman': expected one of native, container, pyxis$"):
        runtime.of("podman")
    with pytest.raises(TrtsweepError, match="expected one of container, pyxis"):
        runtime.end(["kubernetes", "a", "b"])


def test_native_runs_the_command_as_it_is_and_holds_nothing():
    where = runtime.of("native")
    assert where.command(Launch(["tritonserver", "--model-repository=/r"], "n", ("/r",), "0")) == [
        "tritonserver", "--model-repository=/r"]  # fmt: skip
    assert where.held("n") is None and runtime.root(None, 123) == 123
    runtime.end(None)  # nothing to end


def test_a_docker_server_and_a_docker_tool_differ_only_in_what_a_server_needs(tmp_path):
    cli, _ = recording_docker(tmp_path)
    where = runtime.of("container", image=IMAGE, docker_cli=str(cli), limits={"stack": 8388608})
    tool = where.command(Launch(["trtllm-build"], "trtsweep-e", (str(tmp_path),), "0,1", env=("HF_TOKEN",)))
    server = where.command(Launch(["tritonserver"], "trtsweep-p-8000", (str(tmp_path),), "2", server=True))
    assert tool == [str(cli), "run", "--rm", "--name", "trtsweep-e", "--gpus", '"device=0,1"', "--ipc", "host",
                    "--ulimit", "stack=8388608", "-v", f"{tmp_path}:{tmp_path}", "-e", "HF_TOKEN", IMAGE,
                    "trtllm-build"]  # fmt: skip
    assert server == [str(cli), "run", "--rm", "--init", "--name", "trtsweep-p-8000", "--gpus", '"device=2"',
                      "--network", "host", "--ipc", "host", "--ulimit", "stack=8388608", "-v", f"{tmp_path}:{tmp_path}",
                      IMAGE, "tritonserver"]  # fmt: skip
    inside = runtime.of("container", docker_cli=str(cli), exec_into="trtllm")
    assert inside.command(Launch(["trtllm-build"], "x", env=("HF_TOKEN",))) == [str(cli), "exec", "-e", "HF_TOKEN",
                                                                                  "trtllm", "trtllm-build"]  # fmt: skip
    assert inside.held("x") is None  # a container not ours
    with pytest.raises(TrtsweepError, match="needs a container image"):
        runtime.of("container").command(Launch(["true"], "x"))


def test_what_docker_holds_is_found_and_ended_by_name_through_the_seam(tmp_path):
    cli, log = recording_docker(tmp_path)
    held = runtime.of("container", image=IMAGE, docker_cli=str(cli)).held("trtsweep-p-8000")
    assert held == ["container", str(cli), "trtsweep-p-8000"]
    assert runtime.root(held, 1) == 4242  # the container's init, not the docker CLI's pid
    runtime.end(held)
    assert calls(log)[-2:] == [["inspect", "-f", "{{.State.Pid}}", "trtsweep-p-8000"], ["rm", "-f", "trtsweep-p-8000"]]


def test_pyxis_gives_a_command_without_gpus_the_points_as_the_lane_named_them(monkeypatch, tmp_path):
    for name, value in {"SLURM_JOB_ID": "7", "SLURMD_NODENAME": "n1", "SLURM_STEP_ID": "0", "SLURM_STEP_GPUS": "4,5",
                        "CUDA_VISIBLE_DEVICES": "GPU-e,GPU-f"}.items():  # fmt: skip
        monkeypatch.setenv(name, value)  # the lane's step holds the node's GPUs 4 and 5; the point runs on both
    monkeypatch.chdir(tmp_path)
    where = runtime.of("pyxis", image=IMAGE)
    argv = where.command(Launch(["trtllm-build"], "trtsweep-e", (str(tmp_path),)))
    # by UUID: the overlapping step counts the job's GPUs on the node, not the lane's step's
    after = argv[argv.index("--no-container-entrypoint") + 1 :]
    assert after == ["env", "CUDA_VISIBLE_DEVICES=GPU-e,GPU-f", "trtllm-build"]
    assert where.held("trtsweep-e") == ["pyxis", "7", "trtsweep-e"] and where.record() == {"slurm_job": "7"}


def test_the_supervisor_ends_what_its_server_s_runtime_holds_when_the_server_exits(tmp_path):
    cli, log = recording_docker(tmp_path)
    state = tmp_path / "server.json"
    subprocess.run([sys.executable, "-m", "trtsweep.serve.supervisor", "--state", str(state), "--held", "container",
                    str(cli), "trtsweep-p-8000", "--", sys.executable, "-c", "raise SystemExit(3)"], check=True,
                   timeout=60)  # fmt: skip
    assert json.loads(supervisor.exit_file(state).read_text())["returncode"] == 3
    assert calls(log) == [["rm", "-f", "trtsweep-p-8000"]]  # a killed docker CLI would have left it running


def test_a_state_file_of_another_version_loads_without_the_keys_this_one_does_not_know(tmp_path):
    path = tmp_path / "server.json"
    path.write_text(json.dumps({"pid": 1, "start_ticks": 2, "argv": ["x"], "ports": {"http": 8000},
                                "bind_address": "127.0.0.1", "health_url": "http://127.0.0.1:8000", "log_file": "l",
                                "container": ["docker", "n"], "step": None}))  # fmt: skip
    state = ServerState.load(path)
    assert (state.pid, state.ports) == (1, {"http": 8000})
