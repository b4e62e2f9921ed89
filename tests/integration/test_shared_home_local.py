"""Two hosts that share one home directory (NFS homes, as on most GPU clusters), on this machine: two inventory hosts
with `ansible_connection: local` and one trtsweep cache (so one work directory), each with its own ports, four points
of the stand-in server, the real `ansible-playbook sweep.yml`.

Every point must end ok, and what each host wrote for the run must be its own: a run folder (host spec, runner
record, journals) and a lease per host. Fails on run files named by run only: the hosts overwrote each other's host
spec, one host's runner ran the other's lanes ("port ... answered by another server") and the other's points were
lost ("the lane runner on ha ended before its lanes did").
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import ansible_runner
import pytest
import yaml

from tests.conftest import ROOT
from tests.integration.standin_run import STANDIN, kill_all, procs
from tests.integration.test_lanes_over_forks import free_block
from trtsweep.hub.demo_model import DemoModel

HOSTS = ("ha", "hb")
SWEEP = {
    "name": "shared", "backend": "hf",
    "models": [{"repo_id": "HuggingFaceTB/SmolLM2-135M-Instruct", "name": "smol"}],
    "precisions": ["float32", "int8", "bfloat16", "float16"], "parallelism": [{"tp": 1, "pp": 1}],
    "max_batch_sizes": [2], "lengths": [{"input": 256, "output": 16}], "streaming": [True],
    "placement": {"mode": "exclusive", "gpus_per_point": 1},
    "benchmark": {"input_data": "data/prompts.jsonl", "concurrency": [1], "num_requests": 4, "warmup_requests": 0,
                  "max_tokens": 8, "chat_template": True},
}  # fmt: skip


def shared_cache(tmp_path: Path, demo_model: DemoModel) -> Path:
    """One trtsweep cache for both hosts, holding the demo model (hard links where the file system allows)."""
    cache = tmp_path / "home" / ".cache" / "trtsweep"
    cache.mkdir(parents=True)
    for part in ("models", "hf-hub"):
        source = demo_model.hf_dir.parents[1] / part
        if subprocess.run(["cp", "-al", str(source), str(cache)], check=False).returncode != 0:
            subprocess.run(["cp", "-a", str(source), str(cache)], check=True)
    return cache


def inventory(tmp_path: Path) -> Path:
    hosts, first = {}, free_block(3 * len(HOSTS))
    for number, name in enumerate(HOSTS):
        base = first + 3 * number
        hosts[name] = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable,
                       "fleet_prepare_install": False, "trtsweep_triton_http_port": base,
                       "trtsweep_triton_grpc_port": base + 1, "trtsweep_triton_metrics_port": base + 2}  # fmt: skip
    path = tmp_path / "inventory.yml"
    path.write_text(yaml.safe_dump({"all": {"children": {"trtsweep_hosts": {"hosts": hosts}}}}))
    return path


@pytest.mark.e2e
@pytest.mark.timeout(600)
@pytest.mark.fault("two hosts share one home (one trtsweep cache and work dir)",
                   "every point ok; each host's run folder and lease are its own")  # fmt: skip
def test_two_hosts_sharing_one_home_run_their_own_lanes_and_every_point_ends_ok(tmp_path, demo_model):
    cache = shared_cache(tmp_path, demo_model)
    wrapper = tmp_path / "tritonserver-standin"
    wrapper.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{STANDIN}" --standin-load-s 1 '
                       '--standin-first-token-ms 20 --standin-token-ms 5 "$@"\n')  # fmt: skip
    wrapper.chmod(0o755)
    extravars = {
        "trtsweep_sweep": SWEEP, "trtsweep_sweep_dir": str(ROOT),
        "trtsweep_results_dir": str(tmp_path / "results"), "trtsweep_cache_dir": str(cache),
        "trtsweep_hf_offline": True, "trtsweep_triton_runtime": "native", "triton_serve_tritonserver": str(wrapper),
        "trtsweep_server_lease_ttl": 10, "trtsweep_gpus": 1,
    }  # fmt: skip
    private = tmp_path / "runner"
    private.mkdir()
    try:
        runner = ansible_runner.run(
            private_data_dir=str(private), project_dir=str(ROOT), playbook="sweep.yml", extravars=extravars,
            inventory=str(inventory(tmp_path)), quiet=True, timeout=400,
            envvars={"PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"},
        )  # fmt: skip
        text = runner.stdout.read()
    finally:
        kill_all(list(procs(str(tmp_path))))
    folder = tmp_path / "results" / SWEEP["name"]
    plan = json.loads((folder / "plan.json").read_text())
    records = {p["id"]: json.loads((folder / p["id"] / "status.json").read_text()) for p in plan["points"]}
    assert {k: (r["status"], r.get("cause")) for k, r in records.items()} == {
        p["id"]: ("ok", None) for p in plan["points"]
    }, text[-5000:]
    assert runner.rc == 0, text[-5000:]
    assert len(records) == 4 and {r["host"] for r in records.values()} == set(HOSTS)
    # what each host wrote for the run is its own: a run folder and a lease per host, in the one shared work dir
    runs = sorted(p.name for p in (cache / "work" / SWEEP["name"] / ".runs").iterdir())
    assert runs == [f"{plan['run_id']}-{host}" for host in HOSTS]
    leases = {json.loads((folder / ".run" / f"heartbeat-{host}.json").read_text())["lease_file"] for host in HOSTS}
    assert leases == {f"{cache}/work/.leases/{plan['run_id']}-{host}.lease" for host in HOSTS}
    for run in runs:  # the host spec (it may hold a Hub token) is gone once its lanes ended
        assert not (cache / "work" / SWEEP["name"] / ".runs" / run / "host.json").exists(), run
