"""One point, built two ways, the same artifacts: a sweep's lane (trtsweep.lane.point.PointRun) and the handoff
(playbooks/handoff.yml, its artifacts through the roles) map a point onto its stages one way.

The engine flow against the TensorRT-LLM tool doubles, on this machine: the lane builds an int8_sq point calibrated on
the sweep's prompts, on a host whose inventory sets two options that shape the checkpoint and the engine, from a model
whose `main` names commit A. Then `main` moves to commit B, the point is handed off (`trtsweep handoff`'s bundle) and
the handoff's playbook makes its artifacts on a serving host with its own settings and caches (`--tags
handoff_artifacts`: no server, which needs a GPU for this backend). The checkpoint and the engine must be the sweep's
byte for byte: the same content keys (model commit, options, calibration data), the same files, the same commands; a
second run changes nothing.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import ROOT
from tests.unit import build_env
from trtsweep.handoff.bundle import write_bundle
from trtsweep.lane.point import PointRun
from trtsweep.lane.spec import ROLES, HostSpec
from trtsweep.sweep import planning
from trtsweep.toolchain.artifacts import MARKER

REPO_ID = "acme/Tiny-LM"
MEASURED, MOVED = "a" * 40, "b" * 40  # the commits `main` names at the sweep and at the handoff
PROMPTS = "data/prompts.jsonl"
# the sweep host's inventory: settings that shape what is made (the serving host keeps the roles' defaults)
SWEEP_HOST = {"quantize_smoothquant_alpha": 0.8, "trtllm_build_max_num_tokens": 2048}
RECORDS = {"checkpoint": "checkpoint_dir", "trtllm_build": "engine_dir"}


def hub_commit(hub: Path, commit: str, config: dict[str, Any]) -> None:
    """A snapshot of the model in the hub cache, named by `main`."""
    entry = hub / f"models--{REPO_ID.replace('/', '--')}"
    (entry / "snapshots" / commit).mkdir(parents=True)
    (entry / "snapshots" / commit / "config.json").write_text(json.dumps(config))
    (entry / "refs").mkdir(exist_ok=True)
    (entry / "refs" / "main").write_text(commit)


def planned_point(fake: build_env.FakeTrtllm) -> dict[str, Any]:
    sweep = {
        "name": "one", "backend": "tensorrtllm",
        "trtllm": {"version": os.environ["TRTSWEEP_FAKE_TRTLLM_VERSION"], "family": "qwen", "dir": str(fake.root),
                   "python": sys.executable, "kv_cache_dtype": "int8", "calibrate_on_prompts": True},
        "models": [{"repo_id": REPO_ID, "name": "tiny", "revision": "main"}], "precisions": ["int8_sq"],
        "parallelism": [{"tp": 1, "pp": 1}], "max_batch_sizes": [4], "lengths": [{"input": 512, "output": 64}],
        "streaming": [True], "triton": {}, "benchmark": {"concurrency": [1], "input_data": PROMPTS},
    }  # fmt: skip
    (point,) = planning.expand(sweep, base_dir=ROOT)
    # placed on host h; the plan checked the prompts (no tokenizer in this model)
    return {**point, "prompt_check": "checked", "host": "h", "lane": "h--lane0", "gpus": [0], "visible_devices": "0",
            "ports": {"http": 8000, "grpc": 8001, "metrics": 8002}}  # fmt: skip


def sweep_settings(tmp_path: Path, hub: Path, trtllm_build: str) -> dict[str, Any]:
    """The sweep host's settings as the controller hands them to its lanes: the roles' defaults, the inventory's."""
    found: dict[str, Any] = {}
    for role in ROLES:
        found.update(yaml.safe_load((ROOT / "roles" / role / "defaults" / "main.yml").read_text()) or {})
    return {**found, **SWEEP_HOST, "trtllm_build_trtllm_build": trtllm_build,
            "trtsweep_work_dir": str(tmp_path / "sweep-work"), "trtsweep_cache_dir": str(tmp_path / "sweep-cache"),
            "trtsweep_hf_cache_dir": str(hub), "trtsweep_hf_offline": True, "trtsweep_triton_runtime": "native",
            "trtsweep_triton_bind_address": "127.0.0.1", "trtsweep_triton_container_image": None,
            "trtsweep_server_lease_ttl": 20}  # fmt: skip


def measure(tmp_path: Path, point: dict[str, Any], settings: dict[str, Any]) -> Path:
    """The lane's stages that make the point's artifacts; its results as the controller keeps them (the server and
    the benchmark need a GPU for this backend: the point is recorded measured)."""
    spec = HostSpec(run_id="run-1", sweep="one", journal_dir=tmp_path / "journal", lease_file=tmp_path / "lease",
                    settings=settings, inputs={PROMPTS: str(ROOT / PROMPTS)}, lanes=[])  # fmt: skip
    spec.journal_dir.mkdir()
    run = PointRun(spec, point, spec.journal(point["lane"]), "h")
    for stage in (run._preflight, run._download, run._quantize, run._build, run._repository):
        stage()
    results = tmp_path / "results" / "one"
    shutil.copytree(run.paths.results, results / point["id"])
    (results / point["id"] / "status.json").write_text(json.dumps({"status": "ok", "host": "h", "run_id": "run-1"}))
    (results / point["id"] / "llm_perf.summary.json").write_text(json.dumps({"levels": []}))
    return results


def handoff_artifacts(tmp_path: Path, bundle: Path, trtllm_build: str, hub: Path) -> subprocess.CompletedProcess:
    extravars = {"handoff_bundle": str(bundle), "trtsweep_work_dir": str(tmp_path / "serve-work"),
                 "trtsweep_cache_dir": str(tmp_path / "serve-cache"), "trtsweep_hf_cache_dir": str(hub),
                 "trtsweep_hf_offline": True, "trtsweep_triton_runtime": "native",
                 "trtllm_build_trtllm_build": trtllm_build}  # fmt: skip
    argv = [str(Path(sys.executable).parent / "ansible-playbook"), "playbooks/handoff.yml", "--tags",
            "handoff_artifacts", "-e", json.dumps(extravars)]  # fmt: skip
    env = {**os.environ, "ANSIBLE_NOCOLOR": "1", "ANSIBLE_LOCAL_TEMP": str(tmp_path / "ansible-tmp")}
    return subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=False)


def changed(proc: subprocess.CompletedProcess) -> int:
    match = re.search(r"localhost\s+:\s+ok=\d+\s+changed=(\d+)\s+unreachable=0\s+failed=0", proc.stdout)
    assert match, proc.stdout[-4000:] + proc.stderr[-2000:]
    return int(match.group(1))


def artifact(record_dir: Path, record: str) -> tuple[Path, dict[str, Any]]:
    """(the artifact a build record names, the record)."""
    recorded = json.loads((record_dir / f"{record}.json").read_text())
    return Path(recorded[RECORDS[record]]), recorded


def files(directory: Path) -> dict[str, bytes]:
    """An artifact's files, byte for byte, but for its log and its marker's record of when and how long."""
    found = {str(p.relative_to(directory)): p.read_bytes() for p in directory.rglob("*")
             if p.is_file() and p.name != MARKER and not p.name.endswith(".log")}  # fmt: skip
    found[MARKER] = json.dumps(json.loads((directory / MARKER).read_text())["inputs"], sort_keys=True).encode()
    return found


@pytest.mark.e2e
@pytest.mark.timeout(600)
def test_the_handoff_builds_the_point_the_sweep_measured_byte_for_byte(tmp_path, monkeypatch):
    fake = build_env.make(tmp_path, monkeypatch, "0.13.0")
    trtllm_build = fake.runtime.trtllm_build
    hub = tmp_path / "hf-hub"
    hub_commit(hub, MEASURED, {"architectures": ["QWenForCausalLM"]})
    point = planned_point(fake)
    results = measure(tmp_path, point, sweep_settings(tmp_path, hub, trtllm_build))
    bundle = tmp_path / "bundle"
    manifest = write_bundle(results, point["id"], bundle, image="nvcr.io/nvidia/tritonserver:24.09-trtllm-python-py3",
                            base_dir=ROOT)  # fmt: skip
    assert manifest["model_revision"] == MEASURED
    hub_commit(hub, MOVED, {"architectures": ["QWenForCausalLM"], "moved": True})  # `main` moved since the sweep

    first = handoff_artifacts(tmp_path, bundle, trtllm_build, hub)
    assert changed(first) > 0
    measured, handed = results / point["id"], tmp_path / "serve-work" / "handoff" / manifest["name"] / "artifacts"
    sweep_cache, serve_cache = tmp_path / "sweep-cache", tmp_path / "serve-cache"
    for record, made in (("checkpoint", "rank0.safetensors"), ("trtllm_build", "rank0.engine")):
        ours, ours_record = artifact(measured, record)
        theirs, theirs_record = artifact(handed, record)
        assert theirs.relative_to(serve_cache) == ours.relative_to(sweep_cache)  # the same content key
        assert made in files(ours) and files(theirs) == files(ours)
        commands = [[a.replace(str(cache), "<cache>") for a in r["command"]]
                    for cache, r in ((serve_cache, theirs_record), (sweep_cache, ours_record))]  # fmt: skip
        assert commands[0] == commands[1]
    assert [c["tool"] for c in fake.calls()] == ["convert_checkpoint.py", "trtllm-build"] * 2

    second = handoff_artifacts(tmp_path, bundle, trtllm_build, hub)
    assert changed(second) == 0, second.stdout[-4000:]  # idempotent: found in the caches, nothing ran again
    assert len(fake.calls()) == 4
