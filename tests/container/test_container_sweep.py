"""The container runtime for real: the embedded sweep's points served by the real tritonserver in the test image on
the test's dockerd, the GPU check answered from the container's own processes, and no container left after any
fault (the docker CLI or the supervisor killed -9, the run interrupted); the best point's handoff bundle launched
with its own launch/container.sh on the same image, answering its smoke test."""

from __future__ import annotations

import csv
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import ROOT, free_block
from tests.container.dockerd import Dockerd
from tests.container.sweep_run import FLOAT32, INT8, container_run, status, sweep_with
from tests.integration.test_disagg_sweep import DISAGGREGATED
from tests.integration.test_disagg_sweep import SWEEP as DISAGG_SWEEP
from tests.integration.test_server_lifetime import GRACE, TTL
from trtsweep.runtime.docker import hard_limit

pytestmark = [pytest.mark.container, pytest.mark.e2e, pytest.mark.timeout(1200)]
LONG = sweep_with(num_requests=64, max_tokens=64)  # a benchmark still running when the fault comes


def running(dockerd: Dockerd) -> list[str]:
    """The names of the daemon's running containers."""
    return [c["Names"] for c in dockerd.containers() if c["State"] == "running"]


def wait_until(done: Callable[[], bool], limit_s: float, what: str) -> float:
    """Seconds until `done()`; fails after `limit_s` naming `what`."""
    start = time.monotonic()
    while not done():
        assert time.monotonic() - start < limit_s, f"{what} not within {limit_s:g} s"
        time.sleep(0.2)
    return time.monotonic() - start


def test_the_embedded_sweeps_points_are_served_in_containers_on_their_gpu_none_left(tmp_path, dockerd, container_image):
    run = container_run(tmp_path, dockerd, container_image.name)
    assert run.finish() == 0, run.output()[-4000:]
    allowed = hard_limit("memlock")
    for point in (FLOAT32, INT8):
        assert status(run, point)["status"] == "ok"
        # the server's processes are the container's (not the docker CLI's): NVML sees them on the GPU docker gave
        seen = json.loads((run.results / point / "server_gpus.json").read_text())
        assert seen["given"] == [0]
        assert [gpu["index"] for gpu in seen["seen"]] == [0] and seen["seen"][0]["pids"]
        made = json.loads((run.results / point / "container.json").read_text())
        assert made["name"] == f"trtsweep-{point}-{run.ports[0]}"
        assert made["limits"]["memlock"] == allowed
        if allowed == -1:
            assert made["notes"] == []
        else:  # this host refuses unlimited memlock: the container got its hard limit, and the point says so
            assert made["notes"] and made["notes"][0].startswith("memlock: this host refuses unlimited")
            assert f"trtsweep: {made['notes'][0]}" in (run.results / point / "triton_server.log").read_text()
    assert dockerd.container_names() == []
    launched_from_its_bundle(run, dockerd, container_image.name, tmp_path)


def launched_from_its_bundle(run, dockerd: Dockerd, image: str, tmp_path: Path) -> None:
    """`trtsweep handoff` of the run's best point, its model store made as the bundle's README says, then
    launch/container.sh as written: the server answers the bundle's smoke test; `docker stop` ends it, nothing left."""
    bundle = tmp_path / "bundle"
    made = subprocess.run([sys.executable, "-m", "trtsweep.cli", "handoff", str(run.results), "--out", str(bundle),
                           "--image", image, "--base-dir", str(ROOT)], capture_output=True, text=True)  # fmt: skip
    assert made.returncode == 0, made.stderr
    manifest = json.loads((bundle / "bundle.json").read_text())
    # the bundle's own ports: the README test's `make sweep` uses them too (tests/scheduling.py: one worker runs both)
    assert manifest["ports"] == {"http": 8000, "grpc": 8001, "metrics": 8002}
    store = model_store(bundle, manifest, tmp_path / "store")
    env = {**dockerd.env(), "PATH": os.environ["PATH"], "TRTSWEEP_MODEL_STORE": str(store)}
    with open(tmp_path / "launch.log", "wb") as log:
        launched = subprocess.Popen(["sh", str(bundle / "launch" / "container.sh")], env=env, stdout=log,
                                    stderr=subprocess.STDOUT, start_new_session=True)  # fmt: skip
    try:
        ready = f"http://127.0.0.1:{manifest['ports']['http']}/v2/health/ready"
        wait_until(lambda: launched.poll() is not None or answers(ready), 300, "the bundle's server ready")
        assert launched.poll() is None, (tmp_path / "launch.log").read_text()[-3000:]
        assert dockerd.container_names() == [manifest["name"]]
        tokenizer = str(store / "engine")
        smoke = [arg.replace("/@TRTSWEEP_HOST@", "127.0.0.1").replace("/@TRTSWEEP_TOKENIZER_DIR@", tokenizer)
                 for arg in manifest["smoke_command"]]  # fmt: skip
        done = subprocess.run([str(Path(sys.executable).parent / smoke[0]), *smoke[1:]], cwd=bundle,
                              capture_output=True, text=True, timeout=300)  # fmt: skip
        assert done.returncode == 0 and "concurrency 1: 4/4 ok" in done.stderr, done.stdout + done.stderr
        assert "PyTorch" not in done.stderr, done.stderr  # no advice about the torch it has no need of
        dockerd.docker("stop", manifest["name"], timeout=60)
        assert launched.wait(timeout=60) == 0
        assert dockerd.container_names() == []  # --rm
    finally:
        if manifest["name"] in dockerd.container_names():
            dockerd.docker("rm", "-f", manifest["name"])
        launched.kill()
        launched.wait()


def model_store(bundle: Path, manifest: dict[str, Any], store: Path) -> Path:
    """The bundle's model store: its repository rendered for the store's paths in the container, the weights and
    tokenizer (the hf backend's are one checkpoint: engine/) copied in (links would point out of the mount)."""
    store.mkdir()
    subprocess.run([sys.executable, str(bundle / "render_repository.py"), str(bundle / "model_repository"),
                    str(store / "triton_repo"), "TRTSWEEP_ENGINE_DIR=/models/engine"], check=True)  # fmt: skip
    shutil.copytree(manifest["variables"]["TRTSWEEP_ENGINE_DIR"], store / "engine")  # symlinks followed
    return store


def answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as reply:
            return reply.status == 200
    except OSError:
        return False


@pytest.mark.parametrize("victim", [
    pytest.param("cli", marks=pytest.mark.fault(
        "the docker CLI of a point's server killed -9 mid-benchmark (its container runs on)",
        "the point fails; its container removed within TTL + grace; none left")),
    pytest.param("supervisor", marks=pytest.mark.fault(
        "a point's server supervisor killed -9 mid-benchmark (its docker CLI dies with it, the container runs on)",
        "the point fails; its container removed within TTL + grace; none left")),
])  # fmt: skip
def test_a_killed_docker_cli_or_supervisor_fails_its_point_and_leaves_no_container(tmp_path, dockerd, container_image,
                                                                                    victim):  # fmt: skip
    run = container_run(tmp_path, dockerd, container_image.name, only=FLOAT32, sweep=LONG)
    state = run.wait_benchmark(point=FLOAT32)
    assert state.held is not None and state.held[2] in running(dockerd)
    assert state.supervisor is not None
    os.kill(state.pid if victim == "cli" else int(state.supervisor["pid"]), signal.SIGKILL)
    took = wait_until(lambda: not running(dockerd), TTL + GRACE + 10, "the container's removal")
    print(f"container gone {took:.1f} s after its {victim} was killed")
    assert run.finish(timeout_s=300) != 0
    assert status(run, FLOAT32)["status"] == "failed"
    assert dockerd.container_names() == []


@pytest.mark.fault("Ctrl-C of a container run mid-benchmark", "nothing of the run in docker ps -a within TTL + grace")
def test_an_interrupted_container_run_leaves_nothing(tmp_path, dockerd, container_image):
    run = container_run(tmp_path, dockerd, container_image.name, only=FLOAT32, sweep=LONG)
    run.wait_benchmark(point=FLOAT32)
    os.killpg(run.proc.pid, signal.SIGINT)
    took = wait_until(lambda: not dockerd.container_names(), TTL + GRACE + 10, "the container's removal")
    print(f"nothing in docker ps -a {took:.1f} s after the interrupt")
    assert run.finish(timeout_s=120) != 0


def test_a_disaggregated_points_workers_each_run_in_their_own_container_on_their_gpu(
    tmp_path, dockerd, container_image
):
    base = free_block(10)
    run = container_run(tmp_path, dockerd, container_image.name, only=DISAGGREGATED, sweep=DISAGG_SWEEP, gpus=3,
                        ports=[base, base + 1, base + 2])  # fmt: skip
    assert run.finish() == 0, run.output()[-4000:]
    point = tmp_path / "results" / DISAGG_SWEEP["name"] / DISAGGREGATED
    assert json.loads((point / "status.json").read_text())["status"] == "ok"
    members = [m["name"] for m in json.loads((point / "disaggregated.json").read_text())["members"]]
    assert members == ["context0", "generation0", "generation1", "proxy"]
    seen = {}
    for name in ("context0", "generation0", "generation1"):
        found = json.loads((point / f"server_gpus_{name}.json").read_text())
        assert [gpu["index"] for gpu in found["seen"]] == found["given"], name
        seen[name] = found["given"][0]  # NVML (the double) saw the worker's processes: those docker gave the GPU
    assert sorted(seen.values()) == [0, 1, 2]  # three containers, three GPUs: one each
    assert dockerd.container_names() == []


DRAFT_REPO = "trtsweep-tests/SmolLM2-135M-Instruct-draft"  # the demo model's weights under a repo id of its own
DRAFT_SWEEP = {**DISAGG_SWEEP, "name": "smollm2-cpu-draft", "disaggregated": ["none"],
               "speculative": [{"name": "draft", "decoding_type": "DraftTarget", "max_draft_len": 3,
                                "draft": {"repo_id": DRAFT_REPO}}]}  # fmt: skip
DRAFTED = "smollm2-135m_float32_tp1pp1_bs2_isl1024osl16_stream_spec-draft_pytorch-serve"


def test_a_trtllm_serve_point_reads_its_draft_model_and_options_inside_its_container(
    tmp_path, dockerd, container_image, demo_model
):
    """A DraftTarget point of the PyTorch flow served by the trtllm-serve stand-in in a container: its options file
    names the draft model's snapshot (an entry of the hub cache of its own, apart from the model's), mounted, loaded
    and drafting inside the container (the demo model's weights: greedy, nearly every drafted token accepted)."""
    hub = hub_with_draft(demo_model, tmp_path / "hf-hub")
    run = container_run(tmp_path, dockerd, container_image.name, only=DRAFTED, sweep=DRAFT_SWEEP,
                        extra={"trtsweep_hf_cache_dir": str(hub), "trtsweep_hf_offline": True})  # fmt: skip
    assert run.finish() == 0, run.output()[-4000:]
    results = tmp_path / "results" / DRAFT_SWEEP["name"]
    assert json.loads((results / DRAFTED / "status.json").read_text())["status"] == "ok"
    draft_dir = Path(yaml.safe_load((results / DRAFTED / "llm_api_options.yml").read_text())["speculative_config"]
                     ["speculative_model"])  # fmt: skip
    assert draft_dir.parent.parent.name == "models--" + DRAFT_REPO.replace("/", "--"), draft_dir
    with (results / "results.csv").open() as handle:
        row = next(csv.DictReader(handle))
    assert (row["speculative"], row["failed"], row["succeeded"]) == ("draft", "0", "4"), row
    assert float(row["acceptance_rate"]) >= 0.8, row
    assert dockerd.container_names() == []


def hub_with_draft(demo, hub: Path) -> Path:
    """A hub cache holding the demo model and, under DRAFT_REPO, the same files (hard links where the filesystem
    allows, else copies): a draft model whose directory is not the model's."""
    source = demo.hub_cache / "models--HuggingFaceTB--SmolLM2-135M-Instruct"
    for entry in (source.name, "models--" + DRAFT_REPO.replace("/", "--")):
        shutil.copytree(source, hub / entry, symlinks=True, copy_function=link_or_copy)
    return hub


def link_or_copy(src: str, dst: str) -> None:
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)
