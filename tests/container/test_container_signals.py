"""A stop signal reaches a lane while a build tool runs in a `docker run` container (its runner ending it, or the runner
gone): the step stops its tool and removes its container by name (a killed docker CLI leaves its container running),
then the lane ends - it starts no further point. Before, the signal became the point's failure and the lane went on to
its next point, and the next container.

The lane is `python -m trtsweep.lane`'s own code with the point's stages before the build tool left out and its tool
step a `sleep` in a container of the test image on the test's dockerd (a killed CLI leaves its container running).
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Iterator

import pytest

from tests.conftest import wait_for
from tests.container.dockerd import Dockerd
from tests.integration.test_lane_faults_ports import LANE, heartbeat, journal, point, start_lane, write_spec
from trtsweep.common.procs import start_ticks
from trtsweep.errors import TrtsweepError
from trtsweep.toolchain import runner as tools

pytestmark = pytest.mark.container
OUTCOME = "its container removed, the lane ends without starting its next point"
# a lane whose points go straight to a tool step in a container (`sleep 60` in the test image)
LANE_WITH_A_CONTAINER_STEP = """
import os, sys
from trtsweep.lane import point, runner
from trtsweep.toolchain import runner as tools


def quantize(self):
    self._enter("quantize")
    self.step = "checkpoint"
    where = tools.Runtime(kind="container", docker=os.environ["TEST_DOCKER"], image=os.environ["TEST_IMAGE"])
    name = "trtsweep-" + self.p["id"]
    log = self.paths.results / "quantize.log"
    tools.run(where.wrap(["sleep", "60"], [], name), log, tool="quantize", runtime=where, name=name)


point.PointRun._download = lambda self: self._enter("download")
point.PointRun._quantize = quantize
sys.exit(runner.main(sys.argv[1:]))
"""


def running(dockerd: Dockerd) -> dict[str, int]:
    """Name -> host pid of the daemon's running containers."""
    found = {}
    for name in dockerd.container_names():
        state = dockerd.docker("inspect", "-f", "{{.State.Running}} {{.State.Pid}}", name, check=False).stdout.split()
        if state and state[0] == "true":
            found[name] = int(state[1])
    return found


@pytest.fixture
def docker_env(dockerd: Dockerd, container_image, monkeypatch) -> Iterator[Dockerd]:
    """The test's dockerd for the lane and the step (DOCKER_HOST), the test image to run; every container left is
    removed at the end."""
    for name, value in dockerd.env({}).items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("TEST_DOCKER", str(dockerd.client))
    monkeypatch.setenv("TEST_IMAGE", container_image.name)
    yield dockerd
    for name in dockerd.container_names():
        dockerd.docker("rm", "-f", name, check=False)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("sig", [
    pytest.param(sig, marks=pytest.mark.fault(f"{sig.name} to a lane during a tool step in a container", OUTCOME))
    for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT)
])  # fmt: skip
def test_a_signalled_lane_removes_its_build_container_and_starts_no_further_point(tmp_path, docker_env, sig):
    spec = write_spec(tmp_path, [{"name": LANE, "host": "h", "ports": {},
                                  "points": [point("a", {}), point("b", {})]}], ttl_s=30)  # fmt: skip
    with heartbeat(tmp_path):
        lane = start_lane(spec, "-c", LANE_WITH_A_CONTAINER_STEP)
        try:
            wait_for(lambda: "trtsweep-a" in running(docker_env), 60)
            container = running(docker_env)["trtsweep-a"]
            lane.send_signal(sig)
            lane.wait(timeout=15)  # ended, not on to point b
        finally:
            lane.kill()
            lane.wait()
    assert lane.returncode == 128 + sig
    assert [(e["event"], e.get("point")) for e in journal(tmp_path)] == [
        ("start", "a"), ("stage", "a"), ("stage", "a")]  # fmt: skip
    # the container is gone (its sleep too), not only its CLI; no point b
    assert start_ticks(container) is None and docker_env.container_names() == []


def test_a_stopped_container_step_removes_its_container_then_hands_the_signal_to_its_caller(tmp_path, docker_env):
    """The step's own reaction (stop the tool, remove its container) first, then the caller's (a lane ends)."""

    class Stopped(Exception):
        pass

    def stop(signum: int, frame: object) -> None:
        raise Stopped(signum)

    where = tools.Runtime(kind="container", docker=os.environ["TEST_DOCKER"], image=os.environ["TEST_IMAGE"])
    threading.Thread(target=lambda: (wait_for(lambda: "trtsweep-x" in running(docker_env), 60),
                                      os.kill(os.getpid(), signal.SIGTERM)), daemon=True).start()  # fmt: skip
    previous = signal.signal(signal.SIGTERM, stop)
    try:
        started = time.monotonic()
        with pytest.raises(Stopped):
            tools.run(where.wrap(["sleep", "60"], [], "trtsweep-x"), tmp_path / "x.log", tool="quantize",
                      runtime=where, name="trtsweep-x")  # fmt: skip
        assert time.monotonic() - started < 15
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert docker_env.container_names() == []
    # a caller without a handler of its own (an Ansible module; not this session's, which stops the dockerd): the
    # step fails, naming the signal
    threading.Thread(target=lambda: (wait_for(lambda: "trtsweep-y" in running(docker_env), 60),
                                      os.kill(os.getpid(), signal.SIGTERM)), daemon=True).start()  # fmt: skip
    previous = signal.signal(signal.SIGTERM, signal.SIG_DFL)
    try:
        with pytest.raises(TrtsweepError, match=r"^quantize stopped by SIGTERM; log: "):
            tools.run(where.wrap(["sleep", "60"], [], "trtsweep-y"), tmp_path / "y.log", tool="quantize",
                      runtime=where, name="trtsweep-y")  # fmt: skip
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert docker_env.container_names() == []
