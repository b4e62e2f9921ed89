"""A search over configurations on two hosts over real SSH, one host's link cut for 40 s in its first round.

The sweep is a halving search of two configurations of the demo model (float32, int8; a screening round with half
the requests per level, then the better one in full), one declared GPU per host: round 1 screens one configuration
on each host. As h2's screening point starts, h2's link is cut (ip link set down) for 40 s: the run's lease lapses on
h2 (its server stopped; a TTL of 8 s here, shorter than what is left of the point whichever stage the run sees it
in first: with 20 s a fast point could end before its lease lapsed), and the run either gives h2 up (unreachable:
nothing more is placed on it) or hears from it again. Either way h2's point is no evidence about its
configuration: round 2 measures it again (on h1 when h2 was given up), and the step is judged on both screenings;
round 3 measures the better one in full. Every configuration ends measured or dropped for its own numbers, and
search.json says so, with the GPU-seconds the lost point held counted.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from pathlib import Path

import pytest
import yaml

from tests.conftest import ROOT
from tests.fleet.test_fleet_sweep import fleet, wait_for_stage  # noqa: F401 - fixture
from tests.fleet.test_fleet_sweep import (
    test_bootstrap_installs_the_controllers_trtsweep_on_a_host_with_only_python as bootstrap,
)
from tests.fleet.testbed import TestBed, ansible_bin, ansible_env
from trtsweep.fleet import status
from trtsweep.hub.demo_model import DemoModel

pytestmark = pytest.mark.quiet  # a link cut for 40 s, timed against the collector's give-up: nothing beside it

NAME = "outage"
CONFIGS = [f"smol_{p}_tp1pp1_bs2_isl256osl16_stream" for p in ("float32", "int8")]
SWEEP = {
    "name": NAME, "backend": "hf",
    "models": [{"repo_id": "HuggingFaceTB/SmolLM2-135M-Instruct", "name": "smol"}],
    "precisions": ["float32", "int8"], "parallelism": [{"tp": 1, "pp": 1}], "max_batch_sizes": [2],
    "lengths": [{"input": 256, "output": 16}], "streaming": [True],
    "placement": {"gpus_per_point": 1},
    "triton": {"hf_torch_threads": 1},
    "benchmark": {"protocol": "grpc", "input_data": "data/prompts.jsonl", "num_requests": 8, "warmup_requests": 0,
                  "max_tokens": 4, "chat_template": True,
                  "load": {"search": "slo", "variable": "concurrency", "max": 2, "max_levels": 2}},
    "slo": {"min_success_rate": 0.5},
    "search": {"strategy": "halving", "finalists": 1, "screening": 0.5},
}  # fmt: skip
CUT_S = 40.0
TTL_S = 8  # the run's lease on each host (the heartbeat renews it every 2 s)


@pytest.fixture(scope="module")
def two_hosts(testbed: TestBed, wheelhouse: Path, demo_model: DemoModel, fleet: dict) -> dict:  # noqa: F811
    """h1 and h2 of the bed (one declared GPU each, the fleet tests' bootstrapped venv) and the sweep's vars."""
    written = yaml.safe_load(fleet["inventory"].read_text())
    hosts = written["all"]["children"]["trtsweep_hosts"]["hosts"]
    for name in ("h1", "h2"):
        hosts[name]["trtsweep_gpus"] = 1
    del hosts["h3"]
    inventory = testbed.dir / "outage-inventory.yml"
    inventory.write_text("---\n" + yaml.safe_dump(written, sort_keys=False))
    extravars = testbed.dir / "outage-sweep.yml"
    results = testbed.dir / "results"
    extravars.write_text(yaml.safe_dump({"trtsweep_sweep": SWEEP, "trtsweep_sweep_dir": str(ROOT),
                                         "trtsweep_results_dir": str(results), "trtsweep_server_lease_ttl": TTL_S,
                                         "trtsweep_hf_offline": True}))  # fmt: skip
    return {"inventory": inventory, "extravars": extravars, "results": results / NAME}


@pytest.mark.timeout(1500)
@pytest.mark.fault(
    "a host's link cut for 40 s in a search's first round (ip link set down)",
    "its point measured again (on the other host when it is given up); every configuration measured or dropped for "
    "its own numbers",
)
def test_a_host_outage_in_a_search_is_measured_again_elsewhere_and_never_drops_a_configuration(
    testbed,
    fleet,  # noqa: F811 - the fixture imported above
    two_hosts,
):
    if not (fleet["venv"] / "trtsweep-install.json").exists():  # run alone: bootstrap the shared venv first
        bootstrap(testbed, fleet)
    results, h2 = two_hosts["results"], testbed.host("h2")
    shutil.rmtree(results, ignore_errors=True)
    argv = [ansible_bin("ansible-playbook"), "sweep.yml", "-i", str(two_hosts["inventory"]), "-e",
            f"@{two_hosts['extravars']}"]  # fmt: skip
    log = testbed.dir / "outage-run.log"
    started = time.monotonic()
    with open(log, "w") as out:
        proc = subprocess.Popen(argv, cwd=ROOT, env=ansible_env({"ANSIBLE_STDOUT_CALLBACK": "default"}), stdout=out,
                                stderr=subprocess.STDOUT)  # fmt: skip
        try:
            plan = wait_for_plan(results / "plan.json", proc)
            cut_point = next(p["id"] for p in plan["points"] if p["host"] == "h2")
            wait_for_stage(results / "events.json", "h2--lane0", cut_point, status.STAGES, proc, 600)
            h2.cut()  # as its point starts: the lease lapses on h2 (TTL_S) before the point could end
            time.sleep(CUT_S)
            h2.restore()
            proc.wait(timeout=900)
        finally:
            if proc.poll() is None:
                proc.kill()
            h2.restore()
    print(f"the search with an outage took {time.monotonic() - started:.0f} s")
    text = log.read_text()
    gone = "h2" in json.loads((results / "events.json").read_text()).get("unreachable", {})
    print(f"h2 cut for {CUT_S:.0f} s: {'declared unreachable' if gone else 'back before the run gave it up'}")
    ledger = json.loads((results / "search.json").read_text())
    first = {o["config"]: o for o in ledger["rounds"][0]["outcomes"]}
    lost_config = next(c for c in CONFIGS if cut_point.startswith(c))
    assert first[lost_config]["lost"] and first[lost_config]["gpu_s"] > 0, (first, text[-4000:])
    # round 2: the lost configuration alone, measured again as it was to be (on h1 when h2 was given up)
    (again,) = ledger["rounds"][1]["tasks"]
    assert again["config"] == lost_config and again["point"] == f"{lost_config}_s2" and again["fidelity"] == 0.5
    records = {p.parent.name: json.loads(p.read_text()) for p in results.glob("*/status.json")}
    assert records[again["point"]]["status"] == "ok" and (records[again["point"]]["host"] == "h1" or not gone)
    # round 3: the better screening in full; the other dropped on its numbers, never for the outage
    screened = {c: (first[c] if not first[c]["lost"] else ledger["rounds"][1]["outcomes"][0]) for c in CONFIGS}
    better = max(CONFIGS, key=lambda c: screened[c]["tokens_per_gpu"])
    (final,) = ledger["rounds"][2]["tasks"]
    assert final["point"] == better and records[better]["status"] == "ok" and (records[better]["host"] == "h1" or
                                                                                not gone)  # fmt: skip
    (drop,) = ledger["dropped"]
    assert drop["config"] != better and drop["why"].startswith("rank 2 of 2 (keeping 1)") and not drop["budget"]
    # the cut point: lost with h2 (given up), or failed as its server was stopped when the lease lapsed on h2
    lost = records[cut_point]
    assert (lost["status"] == "lost" and lost["finished_at"]) or "(lease expired)" in lost["cause"], lost
    held = sum(o["gpu_s"] for r in ledger["rounds"] for o in r.get("outcomes", []))
    assert ledger["gpu_minutes"] == pytest.approx(held / 60, abs=1e-3) and first[lost_config]["gpu_s"] > 0
    report = (results / "report.md").read_text()
    assert f"{lost_config}: lost with its host ({cut_point}: " in report and f"answer: {better}:" in report


def wait_for_plan(path: Path, proc: subprocess.Popen, timeout: float = 600) -> dict:
    """The run's first plan, once its lanes are placed."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, "the sweep ended before its plan was written"
        if path.is_file():
            return json.loads(path.read_text())
        time.sleep(0.5)
    raise AssertionError(f"no plan at {path}")
