"""Hosts that share one home directory (NFS homes, as on most GPU clusters), over real SSH.

Three test hosts log in to the same HOME and the inventory leaves trtsweep's cache at its default
(`~/.cache/trtsweep`): one venv, one model cache, one work directory for all of them. Six points of the sleep-bound
stand-in server (benchmarks/standin_tritonserver.py; two lanes per host) must all end ok: everything a host writes
for a run (its run folder with the host spec, the runner's pid, the journals, and the run's lease) is the host's
own, and what is shared (the venv, the demo model, the hub cache) is filled safely by all three at once.

Fails on run files named by run alone: each host's spec overwrote the others', a host started another host's
lanes, and every collector watched the last runner (reproduced: rc 2, 1 point of 6 ok).
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tests.conftest import ROOT
from tests.fleet.conftest import require_testbed
from tests.fleet.testbed import TestBed, ansible_bin, ansible_env
from trtsweep.hub.demo_model import DemoModel

SWEEP = {
    "name": "shared-home",
    "backend": "hf",
    "models": [{"repo_id": "HuggingFaceTB/SmolLM2-135M-Instruct", "name": "smol"}],
    "precisions": ["float32", "int8", "bfloat16"],
    "parallelism": [{"tp": 1, "pp": 1}],
    "max_batch_sizes": [2, 4],
    "lengths": [{"input": 256, "output": 16}],
    "streaming": [True],
    "placement": {"mode": "pack", "gpus_per_point": 1},
    "benchmark": {"protocol": "grpc", "concurrency": [1, 2], "input_data": "data/prompts.jsonl", "num_requests": 8,
                  "warmup_requests": 1, "max_tokens": 16, "chat_template": True},
}  # fmt: skip


@pytest.fixture(scope="module")
def shared_bed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestBed]:
    require_testbed()
    with TestBed(tmp_path_factory.mktemp("shared-home"), count=3, shared_home=True) as bed:
        yield bed


@pytest.mark.fault(
    "three hosts share one home (one ~/.cache/trtsweep)", "every point ok; each host's run files are its own"
)
def test_three_hosts_with_one_home_run_their_own_lanes_and_measure_every_point(
    shared_bed: TestBed, wheelhouse: Path, demo_model: DemoModel
) -> None:
    bed = shared_bed
    cache = bed.hosts[0].cache_dir
    assert all(h.cache_dir == cache for h in bed.hosts)  # one ~/.cache/trtsweep for all
    cache.mkdir(parents=True, exist_ok=True)
    for part in ("models", "hf-hub"):  # the hosts have no network: the demo model, as a shared mirror
        subprocess.run(["cp", "-a", str(demo_model.hf_dir.parents[1] / part), str(cache)], check=True)
    # the stand-in runs with the shared venv's Python (the hosts' PATH python is bare)
    wrapper = bed.dir / "tritonserver-standin"
    wrapper.write_text(f'#!/bin/sh\nexec "{cache}/fleet/venv/bin/python" '
                       f'"{ROOT / "benchmarks" / "standin_tritonserver.py"}" --standin-load-s 2 '
                       '--standin-first-token-ms 30 --standin-token-ms 5 "$@"\n')  # fmt: skip
    wrapper.chmod(0o755)
    host_vars = {h.name: {"fleet_prepare_python": "/usr/bin/python3", "fleet_prepare_wheelhouse": str(wheelhouse),
                          "trtsweep_gpus": 2, "trtsweep_triton_runtime": "native",
                          "triton_serve_tritonserver": str(wrapper)} for h in bed.hosts}  # fmt: skip
    inventory = bed.write_inventory(bed.dir / "shared-inventory.yml", host_vars=host_vars)
    results = bed.dir / "results"
    extravars = bed.dir / "shared-sweep.yml"
    extravars.write_text(yaml.safe_dump({"trtsweep_sweep": SWEEP, "trtsweep_sweep_dir": str(ROOT),
                                         "trtsweep_results_dir": str(results),
                                         "trtsweep_hf_offline": True}))  # fmt: skip
    done = subprocess.run(
        [ansible_bin("ansible-playbook"), "sweep.yml", "-i", str(inventory), "-e", f"@{extravars}"],
        cwd=ROOT, env=ansible_env({"ANSIBLE_STDOUT_CALLBACK": "default"}), capture_output=True, text=True,
        timeout=1500,
    )  # fmt: skip
    lines = done.stdout.splitlines()  # a failed task's lines first (which host, which task, why), then the end
    starts = [i for i, line in enumerate(lines) if line.startswith(("fatal:", "failed:"))]
    failed = [line for i in starts for line in lines[i : i + 20]]
    out = "\n".join(failed) + "\n" + done.stdout[-6000:] + done.stderr[-3000:]
    folder = results / SWEEP["name"]
    plan = json.loads((folder / "plan.json").read_text())
    records = {p["id"]: json.loads((folder / p["id"] / "status.json").read_text()) for p in plan["points"]}
    assert {k: (r["status"], r.get("cause")) for k, r in records.items()} == {k: ("ok", None) for k in records}, out
    assert done.returncode == 0, out
    assert len(records) == 6
    assert {r["host"] for r in records.values()} == {"h1", "h2", "h3"}  # every host ran its own points
    # what each host wrote for the run is its own: a run folder and a lease per host, in the one shared work dir
    runs = sorted(p.name for p in (cache / "work" / SWEEP["name"] / ".runs").iterdir())
    assert len(runs) == 3 and all(any(h.name in r for r in runs) for h in bed.hosts), runs
    for run in runs:  # the host spec (it may hold a Hub token) is gone with its runner
        assert not (cache / "work" / SWEEP["name"] / ".runs" / run / "host.json").exists(), run
