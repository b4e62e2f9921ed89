"""How `make test` spreads the real-server tests over parallel workers (pytest-xdist, `--dist loadgroup`).

A group runs in one worker, its tests one after another: a test module (its tests share the module's fixtures and
directories), or the modules GROUPS joins (they share a session fixture too expensive to make twice). A unit test
is a group of its own. The groups go out longest first by their last measured seconds (tests/durations.json,
written by tools/test_durations.py; a group not measured yet counts as the longest), so that the workers end
together; the unit tests come before them all in a serial run, where the first minutes tell.

pytest-xdist's own loadgroup scheduling groups tests by the `xdist_group` mark through an id suffix that pytest 9.2
no longer keeps (every test went to whichever worker was free): the groups are named here, by module, and the
scheduler below reads them from the test ids.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from xdist.scheduler import LoadScopeScheduling

DURATIONS = Path(__file__).with_name("durations.json")
# modules that share one expensive session fixture -> the group they run in together
GROUPS = {
    "tests/fleet/test_fleet_sweep.py": "fleet-bed",  # the session's SSH bed, bootstrapped once
    "tests/fleet/test_search_outage.py": "fleet-bed",
    # the checkout's default ports (8000-8002): the README's `make sweep` and the handoff bundle the container tests
    # launch serve there, one at a time
    "tests/integration/test_readme_commands.py": "container-bed",
}


# modules whose sweeps wait more than they compute: their servers are the sleep-bound stand-in
# (benchmarks/standin_tritonserver.py), their hosts this machine or the Slurm bed's idle daemons. `make test` runs them
# (marked `waits` here) in a session of their own beside the real-server tests' workers, which they barely slow:
# what they spend is waiting (a benchmark's paced tokens, a lease's TTL, Slurm's time limit), not the cores.
WAITS = {
    *(f"tests/integration/{name}.py" for name in (
        "test_collect_faults_give_up", "test_collect_faults_journal", "test_collect_faults_recover",
        "test_collect_faults_runner_start", "test_fault_controller_death", "test_fault_full_disk",
        "test_foreign_gpu_process", "test_heartbeat_killed_alone", "test_lane_faults_controller",
        "test_lane_killed_alone", "test_run_folder_removed", "test_run_signals", "test_second_controller",
        "test_shared_home_local")),
    # SSH beds of network namespaces whose points are the stand-in (their own beds, not the session's fleet bed)
    "tests/fleet/test_shared_home.py", "tests/fleet/test_testbed.py",
}  # fmt: skip


def waits(nodeid: str) -> bool:
    """Whether the test is one that waits more than it computes (WAITS, and every Slurm test)."""
    module = nodeid.split("::", 1)[0]
    return module in WAITS or module.startswith("tests/slurm/")


def group_of(nodeid: str) -> str:
    """The group of a test id ('' for a unit test, which goes wherever a worker is free); every container test is
    in one group, "container-bed" (the session's dockerd and image, made once), every Slurm test in "slurm-bed" (the
    session's cluster)."""
    module = nodeid.split("::", 1)[0]
    if module.startswith("tests/unit/"):
        return ""
    if module.startswith("tests/container/"):
        return "container-bed"
    if module.startswith("tests/slurm/"):
        return "slurm-bed"
    return GROUPS.get(module, module)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The unit tests first, then the groups longest first, each group's tests in their order (every worker
    collects this same order; the scheduler hands the groups out in it)."""
    for item in items:
        if waits(item.nodeid):
            item.add_marker(pytest.mark.waits)
    seconds = json.loads(DURATIONS.read_text()) if DURATIONS.is_file() else {}
    unknown = max(seconds.values(), default=0.0) + 1.0

    def order(item: pytest.Item) -> tuple[int, float]:
        group = group_of(item.nodeid)
        return (1, -seconds.get(group, unknown)) if group else (0, 0.0)

    items.sort(key=order)


class ModuleGroupScheduling(LoadScopeScheduling):
    """Whole groups to workers, in collection order (never reordered by their number of tests)."""

    def __init__(self, config: pytest.Config, log: object = None) -> None:
        super().__init__(config, log)
        config.option.loadscopereorder = False

    def _split_scope(self, nodeid: str) -> str:
        return group_of(nodeid) or nodeid


@pytest.hookimpl(optionalhook=True)  # a hook of pytest-xdist's: a run with `-p no:xdist` has none
def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> LoadScopeScheduling | None:
    return ModuleGroupScheduling(config, log) if config.getoption("dist") == "loadgroup" else None
