"""The container runtime for real: the embedded sweep's points served by the real tritonserver in the test image on
the test's dockerd, the GPU check answered from the container's own processes, and no container left after any
fault (the docker CLI or the supervisor killed -9, the run interrupted)."""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Callable

import pytest

from tests.conftest import free_block
from tests.container.dockerd import Dockerd
from tests.container.sweep_run import FLOAT32, INT8, container_run, status, sweep_with
from tests.integration.test_disagg_sweep import DISAGGREGATED
from tests.integration.test_disagg_sweep import SWEEP as DISAGG_SWEEP
from tests.integration.test_server_lifetime import GRACE, TTL
from trtsweep.common.container import hard_limit

pytestmark = [pytest.mark.container, pytest.mark.e2e, pytest.mark.timeout(1200)]
LONG = sweep_with(num_requests=64, max_tokens=64)  # a benchmark still running when the fault comes


def running(dockerd: Dockerd) -> list[str]:
    """The names of the daemon's running containers."""
    return [c["Names"] for c in dockerd.containers() if c["State"] == "running"]


def wait_until(done: Callable[[], bool], limit_s: float, what: str) -> float:
    """Seconds until `done()`; fails after `limit_s` naming `what`."""
    start = time.monotonic()
    while not done():
        assert time.monotonic() - start < limit_s, f"{what} not within {limit_s:g} s"
        time.sleep(0.2)
    return time.monotonic() - start


def test_the_embedded_sweeps_points_are_served_in_containers_on_their_gpu_none_left(tmp_path, dockerd, container_image):
    run = container_run(tmp_path, dockerd, container_image.name)
    assert run.finish() == 0, run.output()[-4000:]
    allowed = hard_limit("memlock")
    for point in (FLOAT32, INT8):
        assert status(run, point)["status"] == "ok"
        # the server's processes are the container's (not the docker CLI's): NVML sees them on the GPU docker gave
        seen = json.loads((run.results / point / "server_gpus.json").read_text())
        assert seen["given"] == [0]
        assert [gpu["index"] for gpu in seen["seen"]] == [0] and seen["seen"][0]["pids"]
        made = json.loads((run.results / point / "container.json").read_text())
        assert made["name"] == f"trtsweep-{point}-{run.ports[0]}"
        assert made["limits"]["memlock"] == allowed
        if allowed == -1:
            assert made["notes"] == []
        else:  # this host refuses unlimited memlock: the container got its hard limit, and the point says so
            assert made["notes"] and made["notes"][0].startswith("memlock: this host refuses unlimited")
            assert f"trtsweep: {made['notes'][0]}" in (run.results / point / "triton_server.log").read_text()
    assert dockerd.container_names() == []


@pytest.mark.parametrize("victim", [
    pytest.param("cli", marks=pytest.mark.fault(
        "the docker CLI of a point's server killed -9 mid-benchmark (its container runs on)",
        "the point fails; its container removed within TTL + grace; none left")),
    pytest.param("supervisor", marks=pytest.mark.fault(
        "a point's server supervisor killed -9 mid-benchmark (its docker CLI dies with it, the container runs on)",
        "the point fails; its container removed within TTL + grace; none left")),
])  # fmt: skip
def test_a_killed_docker_cli_or_supervisor_fails_its_point_and_leaves_no_container(tmp_path, dockerd, container_image,
                                                                                    victim):  # fmt: skip
    run = container_run(tmp_path, dockerd, container_image.name, only=FLOAT32, sweep=LONG)
    state = run.wait_benchmark(point=FLOAT32)
    assert state.container is not None and state.container[1] in running(dockerd)
    assert state.supervisor is not None
    os.kill(state.pid if victim == "cli" else int(state.supervisor["pid"]), signal.SIGKILL)
    took = wait_until(lambda: not running(dockerd), TTL + GRACE + 10, "the container's removal")
    print(f"container gone {took:.1f} s after its {victim} was killed")
    assert run.finish(timeout_s=300) != 0
    assert status(run, FLOAT32)["status"] == "failed"
    assert dockerd.container_names() == []


@pytest.mark.fault("Ctrl-C of a container run mid-benchmark", "nothing of the run in docker ps -a within TTL + grace")
def test_an_interrupted_container_run_leaves_nothing(tmp_path, dockerd, container_image):
    run = container_run(tmp_path, dockerd, container_image.name, only=FLOAT32, sweep=LONG)
    run.wait_benchmark(point=FLOAT32)
    os.killpg(run.proc.pid, signal.SIGINT)
    took = wait_until(lambda: not dockerd.container_names(), TTL + GRACE + 10, "the container's removal")
    print(f"nothing in docker ps -a {took:.1f} s after the interrupt")
    assert run.finish(timeout_s=120) != 0


def test_a_disaggregated_points_workers_each_run_in_their_own_container_on_their_gpu(
    tmp_path, dockerd, container_image
):
    base = free_block(10)
    run = container_run(tmp_path, dockerd, container_image.name, only=DISAGGREGATED, sweep=DISAGG_SWEEP, gpus=3,
                        ports=[base, base + 1, base + 2])  # fmt: skip
    assert run.finish() == 0, run.output()[-4000:]
    point = tmp_path / "results" / DISAGG_SWEEP["name"] / DISAGGREGATED
    assert json.loads((point / "status.json").read_text())["status"] == "ok"
    members = [m["name"] for m in json.loads((point / "disaggregated.json").read_text())["members"]]
    assert members == ["context0", "generation0", "generation1", "proxy"]
    seen = {}
    for name in ("context0", "generation0", "generation1"):
        found = json.loads((point / f"server_gpus_{name}.json").read_text())
        assert [gpu["index"] for gpu in found["seen"]] == found["given"], name
        seen[name] = found["given"][0]  # NVML (the double) saw the worker's processes: those docker gave the GPU
    assert sorted(seen.values()) == [0, 1, 2]  # three containers, three GPUs: one each
    assert dockerd.container_names() == []
