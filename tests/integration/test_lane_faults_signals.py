"""A stop signal reaches a lane while a build tool runs in a `docker run` container (its runner ending it, or the runner
gone): the step stops its tool and removes its container by name (a killed docker CLI leaves its container running),
then the lane ends - it starts no further point. Before, the signal became the point's failure and the lane went on to
its next point, and the next container.

The lane is `python -m trtsweep.lane`'s own code with the point's stages before the build tool left out and its tool
step a `sleep` in a container of the docker stand-in (tests/doubles/docker), which keeps a container running after its
CLI is killed, as docker does.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import threading
import time
from pathlib import Path

import pytest

from tests.conftest import wait_for
from tests.integration.test_lane_faults_ports import LANE, heartbeat, journal, point, start_lane, write_spec
from trtsweep.common.procs import start_ticks
from trtsweep.errors import TrtsweepError
from trtsweep.toolchain import runner as tools

DOCKER = Path(__file__).resolve().parents[1] / "doubles" / "docker"
OUTCOME = "its container removed, the lane ends without starting its next point"
# a lane whose points go straight to a tool step in a container (`sleep 60` in the docker stand-in)
LANE_WITH_A_CONTAINER_STEP = """
import os, sys
from trtsweep.lane import point, runner
from trtsweep.toolchain import runner as tools


def quantize(self):
    self._enter("quantize")
    self.step = "checkpoint"
    where = tools.Runtime(kind="container", docker=os.environ["TEST_DOCKER"], image="img")
    name = "trtsweep-" + self.p["id"]
    log = self.paths.results / "quantize.log"
    tools.run(where.wrap(["sleep", "60"], [], name), log, tool="quantize", runtime=where, name=name)


point.PointRun._download = lambda self: self._enter("download")
point.PointRun._quantize = quantize
sys.exit(runner.main(sys.argv[1:]))
"""


def containers(folder: Path) -> dict[str, int]:
    """Name -> pid of the stand-in's containers that have not been removed."""
    return {path.stem: int(path.read_text()) for path in folder.glob("*.pid") if path.read_text()}


def docker_calls(log: Path) -> list[list[str]]:
    return [json.loads(line)[:3] for line in log.read_text().splitlines()] if log.exists() else []


@pytest.fixture
def docker_env(tmp_path, monkeypatch) -> tuple[Path, Path]:
    """The docker stand-in running containers in `tmp_path/containers`, logging to `tmp_path/docker.log`; every
    container left is killed at the end."""
    folder, log = tmp_path / "containers", tmp_path / "docker.log"
    folder.mkdir()
    monkeypatch.setenv("DOCKER_STANDIN_CONTAINERS", str(folder))
    monkeypatch.setenv("DOCKER_STANDIN_LOG", str(log))
    monkeypatch.setenv("TEST_DOCKER", str(DOCKER))
    yield folder, log
    for pid in containers(folder).values():
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("sig", [
    pytest.param(sig, marks=pytest.mark.fault(f"{sig.name} to a lane during a tool step in a container", OUTCOME))
    for sig in (signal.SIGTERM, signal.SIGHUP)
])  # fmt: skip
def test_a_signalled_lane_removes_its_build_container_and_starts_no_further_point(tmp_path, docker_env, sig):
    folder, log = docker_env
    spec = write_spec(tmp_path, [{"name": LANE, "host": "h", "ports": {},
                                  "points": [point("a", {}), point("b", {})]}], ttl_s=30)  # fmt: skip
    with heartbeat(tmp_path):
        lane = start_lane(spec, "-c", LANE_WITH_A_CONTAINER_STEP)
        try:
            wait_for(lambda: "trtsweep-a" in containers(folder), 30)
            container = containers(folder)["trtsweep-a"]
            lane.send_signal(sig)
            lane.wait(timeout=15)  # ended, not on to point b
        finally:
            lane.kill()
            lane.wait()
    assert lane.returncode == 128 + sig
    assert [(e["event"], e.get("point")) for e in journal(tmp_path)] == [
        ("start", "a"), ("stage", "a"), ("stage", "a")]  # fmt: skip
    assert start_ticks(container) is None and containers(folder) == {}  # the container is gone, not only its CLI
    assert docker_calls(log)[-2:] == [["run", "--rm", "--name"], ["rm", "-f", "trtsweep-a"]]


def test_a_stopped_container_step_removes_its_container_then_hands_the_signal_to_its_caller(tmp_path, docker_env):
    """The step's own reaction (stop the tool, remove its container) first, then the caller's (a lane ends)."""
    folder, log = docker_env

    class Stopped(Exception):
        pass

    def stop(signum: int, frame: object) -> None:
        raise Stopped(signum)

    where = tools.Runtime(kind="container", docker=str(DOCKER), image="img")
    threading.Thread(target=lambda: (wait_for(lambda: containers(folder), 30), os.kill(os.getpid(), signal.SIGTERM)),
                     daemon=True).start()  # fmt: skip
    previous = signal.signal(signal.SIGTERM, stop)
    try:
        started = time.monotonic()
        with pytest.raises(Stopped):
            tools.run(where.wrap(["sleep", "60"], [], "trtsweep-x"), tmp_path / "x.log", tool="quantize",
                      runtime=where, name="trtsweep-x")  # fmt: skip
        assert time.monotonic() - started < 15
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert containers(folder) == {}
    assert docker_calls(log)[-1] == ["rm", "-f", "trtsweep-x"]
    # a caller without a handler of its own (an Ansible module): the step fails, naming the signal
    threading.Thread(target=lambda: (wait_for(lambda: containers(folder), 30), os.kill(os.getpid(), signal.SIGTERM)),
                     daemon=True).start()  # fmt: skip
    with pytest.raises(TrtsweepError, match=r"^quantize stopped by SIGTERM; log: "):
        tools.run(where.wrap(["sleep", "60"], [], "trtsweep-y"), tmp_path / "y.log", tool="quantize", runtime=where,
                  name="trtsweep-y")  # fmt: skip
    assert containers(folder) == {}
