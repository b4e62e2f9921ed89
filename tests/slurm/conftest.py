"""Fixtures of the Slurm tests: a real Slurm cluster of the session's own on this machine.

- ``slurm_cluster`` (session): a started ``tests.slurm.cluster.Cluster`` of 3 nodes (``n1``..``n3``, all on
  loopback), 4 stand-in GPUs and 8 CPUs each, one partition ``gpu``; every node idle when it is handed out.
  ``slurm_cluster.env()`` is the environment of a client command of the cluster (``SLURM_CONF`` set), for tests that
  start ``srun`` & co. themselves; ``slurm_cluster.run("squeue", ...)`` runs one and returns the completed process;
  ``slurm_cluster.jobs()`` lists its jobs (``squeue --json``). Stopped, its daemons and whatever its jobs left
  killed and its directory removed, at the end of the session (also on SIGTERM / SIGHUP).

Without Slurm's and munge's packages the tests skip, saying why; under CI (CI=true) they fail instead.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
from collections.abc import Callable, Iterator
from types import FrameType

import pytest

from tests.slurm import cluster as cluster_mod

SUMMARY: dict[str, str] = {}  # what the run measured, printed at its end


def require(reason: str | None) -> None:
    """Nothing when `reason` is None; else skip saying why, or fail under CI (a missing package must not pass)."""
    if reason is None:
        return
    if os.environ.get("CI") == "true":
        pytest.fail(f"the Slurm test bed cannot run here: {reason}", pytrace=False)
    pytest.skip(f"the Slurm test bed cannot run here: {reason}")


@contextlib.contextmanager
def _stopped_on_exit(stop: Callable[[], None]) -> Iterator[None]:
    """Call `stop` when the process exits or is told to (SIGTERM, SIGHUP) before the fixture's own teardown (as in
    tests/container/conftest.py, which the Slurm tests do not import: they need none of its modules)."""
    previous: dict[int, object] = {}

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop()
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)

    atexit.register(stop)
    for signum in (signal.SIGTERM, signal.SIGHUP):
        with contextlib.suppress(ValueError):  # not the main thread
            previous[signum] = signal.signal(signum, on_signal)
    try:
        yield
    finally:
        atexit.unregister(stop)
        for signum, handler in previous.items():
            signal.signal(signum, handler)  # type: ignore[arg-type]


@pytest.fixture(scope="session")
def slurm_cluster() -> Iterator[cluster_mod.Cluster]:
    """A Slurm cluster of the session's own, 3 nodes x 4 GPUs (see the module docstring)."""
    require(cluster_mod.unavailable_reason())
    cluster = cluster_mod.start(nodes=3, gpus_per_node=4, cpus_per_node=8)
    SUMMARY["slurm"] = (
        f"{cluster.run('sinfo', '--version').stdout.strip()}, nodes {','.join(cluster.nodes)} x "
        f"gpu:{cluster.gpus_per_node}, {cluster.root}"
    )
    SUMMARY["slurm start"] = f"{cluster.start_s:.2f} s (munged, slurmctld, {len(cluster.nodes)} slurmd, nodes idle)"
    with _stopped_on_exit(cluster.stop):
        try:
            yield cluster
        finally:
            cluster.stop()
            SUMMARY["slurm stop"] = f"{cluster.stop_s:.2f} s"


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if not SUMMARY:
        return
    terminalreporter.section("Slurm test bed")
    for key, value in SUMMARY.items():
        terminalreporter.write_line(f"{key}: {value}")
