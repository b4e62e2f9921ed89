"""The suite's time, from the junit XML files of a `make test` (each step: `PYTEST_ADDOPTS=--junitxml=...`).

    .venv/bin/python tools/test_durations.py unit.xml heavy.xml quiet.xml [--write]

Prints each step's wall-clock time as pytest measured it, and the slowest tests with their group (what one parallel
worker runs in one go) and what each starts, as the table in CONTRIBUTING.md ("CI's time"). With --write it also
writes tests/durations.json, the seconds per group that tests/conftest.py orders the parallel step by (longest
first, so that the workers end together). A slow test whose module is not in STARTS is listed as "(say what it
starts: STARTS in tools/test_durations.py)".
"""

from __future__ import annotations

import argparse
import json
import sys
import xml.etree.ElementTree as ET
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from tests.scheduling import group_of  # noqa: E402 - the checkout's tests package

DURATIONS = ROOT / "tests" / "durations.json"  # read by tests/scheduling.py
# what a slow test module starts (the reason it is slow)
STARTS = {
    "tests/slurm/test_slurm_sweep.py": "sweep.yml on the session's Slurm cluster (3 nodes): 3 stand-in points as job "
    "steps; the cancel test runs twice (its rerun), the time-limit test waits for Slurm's minute, the others once",
    "tests/slurm/test_slurm_allocation.py": "allocations and steps on the session's Slurm cluster",
    "tests/slurm/test_bed.py": "the session's Slurm cluster (munged, slurmctld, 3 slurmd: about 1 s), a second "
    "one-node bed for the stale-bed case",
    "tests/integration/test_heartbeat_killed_alone.py": "sweep.yml of 2 stand-in points (~20 s benchmarks each)",
    "tests/integration/test_lane_killed_alone.py": "sweep.yml of 2 stand-in points in 2 lanes",
    "tests/integration/test_run_folder_removed.py": "sweep.yml of 1 stand-in point",
    "tests/integration/test_second_controller.py": "2 sweep.yml runs of 1 stand-in point (two controllers, one host)",
    "tests/integration/test_foreign_gpu_process.py": "sweep.yml of 1 stand-in point, twice",
    "tests/container/test_bed.py": "the session's dockerd and the test image (built from mmdebstrap and wheels when "
    "not cached: about 120 s, in the first test), tritonserver in a container",
    "tests/container/test_container_sweep.py": "sweep.yml with the container runtime: the embedded sweep's 2 points "
    "and its handoff bundle's launch/container.sh, 2 points killed -9 (CLI, supervisor), one interrupted, a "
    "disaggregated point (4 containers)",
    "tests/container/test_container_signals.py": "a lane's build step (sleep in the test image) signalled",
    "tests/container/test_container_mounts.py": "containers reading a hub cache's links through the mounts",
    "tests/integration/test_readme_commands.py": "`make sweep` as written (2 points, real Triton, demo model) and "
    "its rerun; the browser",
    "tests/fleet/test_fleet_sweep.py": "the SSH bed (3 hosts: namespaces, sshd), its bootstrap, 2 sweeps of real "
    "Triton servers, a link cut, the handoff deployed",
    "tests/fleet/test_search_outage.py": "a halving search on 2 SSH hosts, one link cut for 40 s",
    "tests/fleet/test_shared_home.py": "an SSH bed of 3 hosts sharing one home, 6 stand-in points",
    "tests/fleet/test_testbed.py": "SSH beds made, cut and removed",
    "tests/integration/test_flows_sweep.py": "sweep.yml, 3 points: engine and PyTorch flows on Triton, "
    "trtllm-serve (hf stand-in); the handoff",
    "tests/integration/test_server_lifetime.py": "7 sweep.yml runs of one point (real Triton, demo model), interrupted "
    "or forced",
    "tests/integration/test_lanes_over_forks.py": "sweep.yml, 3 lanes on 1 fork (real Triton, demo model)",
    "tests/integration/test_hf_openai.py": "the hf trtllm-serve stand-in and `transformers serve`, llm-perf",
    "tests/integration/test_molecule.py": "2 molecule scenarios (converge, idempotence, verify; real Triton)",
    "tests/integration/test_collect_faults_give_up.py": "sweep.yml on 2 local hosts, stand-in server (timed tokens)",
    "tests/integration/test_search_sweep.py": "sweep.yml halving search: 3 points on real Triton, then a rerun",
    "tests/integration/test_hf_backend.py": "real Triton with the demo model (4 repositories)",
    "tests/integration/test_perf_faults.py": "real Triton servers killed, stalled, interrupted under llm-perf",
    "tests/integration/test_fault_full_disk.py": "2 sweep.yml runs and reruns, a tmpfs filled mid-benchmark",
    "tests/integration/test_hf_llmapi.py": "real Triton with the llmapi hf model (2 repositories)",
    "tests/integration/test_fault_controller_death.py": "2 sweep.yml runs killed -9 and rerun (stand-in server)",
    "tests/integration/test_request_interface.py": "real Triton with the demo model (ensemble and BLS)",
    "tests/integration/test_disagg_sweep.py": "sweep.yml: an aggregated and a disaggregated point (hf stand-ins)",
    "tests/integration/test_perf_timing.py": "real Triton with paced models (timing to the millisecond)",
    "tests/integration/test_collect_faults_recover.py": "sweep.yml, its controller gone, and the rerun",
    "tests/integration/test_capacity_sweep.py": "sweep.yml with a capacity search (real Triton, demo model)",
    "tests/integration/test_sweep_playbook.py": "sweep.yml with a busy port",
    "tests/integration/test_collect_faults_journal.py": "sweep.yml, a journal line cut mid-run",
    "tests/integration/test_speculative_sweep.py": "sweep.yml, one n-gram point (trtllm-serve stand-in)",
    "tests/integration/test_server_identity.py": "real Triton servers (tiny python models)",
    "tests/integration/test_shared_home_local.py": "sweep.yml on 2 local hosts sharing one home (stand-in)",
    "tests/integration/test_run_signals.py": "`trtsweep run` signalled (stand-in server)",
    "tests/integration/test_one_mapping.py": "a lane and the handoff playbook on the tool doubles",
    "tests/integration/test_server_lifecycle.py": "real Triton servers started and stopped",
    "tests/integration/test_perf_openai.py": "`transformers serve` under llm-perf",
    "tests/integration/test_perf_workers.py": "llm-perf's worker processes against the zero server",
    "tests/integration/test_perf_server_id.py": "real Triton (tiny python models) under llm-perf",
    "tests/integration/test_disagg_group.py": "a disaggregated group of hf workers and the stand-in proxy",
    "tests/integration/test_disagg_point_fault.py": "a disaggregated point's worker killed mid-benchmark",
    "tests/unit/test_search_predict.py": "AIConfigurator (its venv, made once) predicting on CPU",
    "tests/unit/test_search_predict_axes.py": "AIConfigurator predicting disaggregated and MoE layouts",
    "tests/unit/test_build_ansible.py": "ansible-playbook of the build roles on the tool doubles, twice",
    "tests/unit/test_perf_search.py": "llm-perf searches against the zero server",
    "tests/unit/test_promptcheck.py": "the demo model's tokenizer (transformers)",
    "tests/unit/test_search_predicted_plan.py": "AIConfigurator's predictions planned into a sweep",
    "tests/unit/test_supervisor.py": "a supervisor and its server whose lease runs out",
}


def group(classname: str) -> str:
    """The scheduling group of a junit test case's module (tests/scheduling.py), the unit tests by module."""
    module = "/".join(classname.split(".")[:3]) + ".py"
    return group_of(module) or module


def read(paths: list[Path]) -> tuple[list[tuple[float, str, str, str]], list[tuple[str, float, int]]]:
    """Every test case (seconds, id, group, step) and each step's (file, wall seconds, tests)."""
    cases, steps = [], []
    for path in paths:
        root = ET.parse(path).getroot()
        suite = root if root.tag == "testsuite" else root.find("testsuite")
        steps.append((path.name, float(suite.get("time", 0)), int(suite.get("tests", 0))))
        for case in root.iter("testcase"):
            classname = case.get("classname", "")
            test = f"{'/'.join(classname.split('.')[:3])}.py::{case.get('name', '')}"
            cases.append((float(case.get("time", 0)), test, group(classname), path.stem))
    return cases, steps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("xml", nargs="+", type=Path)
    parser.add_argument("--top", type=int, default=40)
    parser.add_argument("--write", action="store_true", help="write tests/durations.json")
    args = parser.parse_args()
    cases, steps = read(args.xml)
    print("| step | wall s | tests |\n|---|---:|---:|")
    for name, wall, count in steps:
        print(f"| {name} | {wall:.0f} | {count} |")
    print(f"| all | {sum(s[1] for s in steps):.0f} | {sum(s[2] for s in steps)} |\n")
    print("| s | test | step | group | starts |\n|---:|---|---|---|---|")
    for seconds, test, grp, step in sorted(cases, reverse=True)[: args.top]:
        module = test.split("::", 1)[0]
        starts = STARTS.get(module) or STARTS.get(grp) or "(say what it starts: STARTS in tools/test_durations.py)"
        print(f"| {seconds:.0f} | `{test.split('/', 1)[1]}` | {step} | {grp.removeprefix('tests/')} | {starts} |")
    totals: dict[str, float] = defaultdict(float)
    for seconds, _, grp, _ in cases:
        if not grp.startswith("tests/unit/"):
            totals[grp] += seconds
    if args.write:
        ordered = dict(sorted(((g, round(s, 1)) for g, s in totals.items()), key=lambda kv: -kv[1]))
        DURATIONS.write_text(json.dumps(ordered, indent=1) + "\n")
        print(f"\n{DURATIONS.relative_to(ROOT)}: {len(ordered)} groups, {sum(ordered.values()):.0f} s")


if __name__ == "__main__":
    main()
