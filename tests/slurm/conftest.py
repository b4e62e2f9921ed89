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

from collections.abc import Iterator

import pytest

from tests.beds import require, stopped_on_exit
from tests.slurm import cluster as cluster_mod

SUMMARY: dict[str, str] = {}  # what the run measured, printed at its end


@pytest.fixture(scope="session")
def slurm_cluster() -> Iterator[cluster_mod.Cluster]:
    """A Slurm cluster of the session's own, 3 nodes x 4 GPUs (see the module docstring)."""
    require(cluster_mod.unavailable_reason(), "Slurm")
    cluster = cluster_mod.start(nodes=3, gpus_per_node=4, cpus_per_node=8)
    SUMMARY["slurm"] = (
        f"{cluster.run('sinfo', '--version').stdout.strip()}, nodes {','.join(cluster.nodes)} x "
        f"gpu:{cluster.gpus_per_node}, {cluster.root}"
    )
    SUMMARY["slurm start"] = f"{cluster.start_s:.2f} s (munged, slurmctld, {len(cluster.nodes)} slurmd, nodes idle)"
    with stopped_on_exit(cluster.stop):
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
