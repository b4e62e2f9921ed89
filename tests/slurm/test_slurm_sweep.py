"""`ansible-playbook sweep.yml` on the real Slurm cluster the tests start: the inventory names no host, only
`trtsweep_slurm.allocate`; the run makes the allocation (salloc), its three nodes become the hosts with the job's
GPUs there, each lane runs as a step of the job (srun --exact) on the GPUs Slurm bound to it, every point's record
names its job, step, node and GPUs, and the allocation is released at the end. The points are served by the
sleep-bound stand-in server (benchmarks/standin_tritonserver.py): what is tested is where they run."""

from __future__ import annotations

import contextlib
import csv
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from tests.conftest import ROOT, free_block
from tests.integration.standin_run import all_gone, playbook_argv, playbook_env, write_run
from trtsweep.fleet.slurm import GRANTED

pytestmark = [pytest.mark.slurm, pytest.mark.e2e, pytest.mark.timeout(600)]
GPUS_PER_NODE = 2  # of each node's 4: the job's GRES


def slurm_run(tmp_path: Path, cluster, slurm: dict, load_s: float = 0.5, token_ms: float = 5.0,
              num_requests: int = 8, extra: dict | None = None) -> tuple[list[str], dict[str, str]]:  # fmt: skip
    """(argv, environment) of `ansible-playbook sweep.yml` with three stand-in points on the cluster: the inventory
    names no host, only `trtsweep_slurm` (`slurm`), and each node's connection and ports (all three run on this
    machine: each its own ports); `extra`: more variables."""
    extravars = write_run(tmp_path, "slurm", load_s, 20, token_ms=token_ms, points=3)
    values = yaml.safe_load(extravars.read_text())
    for key in ("trtsweep_triton_http_port", "trtsweep_triton_grpc_port", "trtsweep_triton_metrics_port"):
        del values[key]  # each node's own (the inventory's): extra vars would give all three the same
    values["trtsweep_gpus"] = cluster.gpus_per_node  # each node's GPUs; the job has GPUS_PER_NODE of them
    values["trtsweep_sweep"]["benchmark"]["num_requests"] = num_requests
    values.update(extra or {})
    extravars.write_text(yaml.safe_dump(values))
    nodes, block = {}, free_block(3 * len(cluster.nodes))
    for number, name in enumerate(cluster.nodes):
        base = block + 3 * number
        nodes[name] = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable,
                       "trtsweep_triton_http_port": base, "trtsweep_triton_grpc_port": base + 1,
                       "trtsweep_triton_metrics_port": base + 2}  # fmt: skip
    inventory = tmp_path / "slurm.yml"
    inventory.write_text(yaml.safe_dump({"all": {"vars": {"trtsweep_slurm": slurm},
                                                 "children": {"trtsweep_slurm_nodes": {"hosts": nodes}}}}))  # fmt: skip
    return [*playbook_argv(extravars), "-i", str(inventory)], {**playbook_env(), **cluster.env()}


OWN = {"allocate": {"nodes": 3, "gpus_per_node": GPUS_PER_NODE, "time": "10"}}


def test_a_sweep_on_its_own_allocation_runs_each_lane_as_a_step_on_the_gpus_slurm_bound(tmp_path, slurm_cluster):
    argv, env = slurm_run(tmp_path, slurm_cluster, OWN)
    done = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=500)
    assert done.returncode == 0, done.stdout[-5000:] + done.stderr[-2000:]
    results = tmp_path / "results" / "slurm"
    records = [json.loads(p.read_text()) for p in sorted(results.glob("*/status.json"))]
    assert [r["status"] for r in records] == ["ok"] * 3
    jobs = {r["slurm"]["job_id"] for r in records}
    assert len(jobs) == 1  # one allocation, a step per lane
    assert sorted(r["host"] for r in records) == sorted(slurm_cluster.nodes)  # a point on each node
    assert {r["slurm"]["node"] for r in records} == set(slurm_cluster.nodes)
    assert len({(r["slurm"]["node"], r["slurm"]["step_id"]) for r in records}) == 3
    for record in records:
        assert len(record["gpus"]) == 1 and record["gpus"][0] in range(GPUS_PER_NODE), record  # the job's (IDX 0-1)
        assert record["slurm"]["cpus"] == "2", record  # the node's lane takes the job's 2 CPUs there (one per GPU)
    with (results / "results.csv").open() as handle:  # results.csv names each point's step
        rows = {row["point"]: row["slurm_step"] for row in csv.DictReader(handle)}
    assert rows == {r["point"]: f"{r['slurm']['job_id']}.{r['slurm']['step_id']}" for r in records}
    # the report names the allocation: the job squeue and sacct show, its partition, nodes and steps
    (job,) = jobs
    named = (f"Slurm allocation: job {job} (partition gpu) on 3 node(s) ("
             f"{', '.join(r['slurm']['node'] for r in records)}): 3 point(s) in ")  # fmt: skip
    assert named in (results / "report.md").read_text() and named in (results / "report.html").read_text()
    assert slurm_cluster.jobs() == []  # the run's allocation released at its end
    # accounting names what the run did (within seconds): its allocation, released, and each lane's step, completed
    wanted = {f"{job}|trtsweep-slurm|CANCELLED by 0",
              *(f"{job}.{r['slurm']['step_id']}|trtsweep-slurm-{r['lane']}|COMPLETED" for r in records)}  # fmt: skip
    deadline = time.monotonic() + 30
    while not wanted <= set(
        booked := slurm_cluster.run("sacct", "-n", "-P", "-j", job, "--format=JobID,JobName,State").stdout.splitlines()
    ):
        assert time.monotonic() < deadline, (wanted, booked)
        time.sleep(0.5)
    assert len({r["lane"] for r in records}) == 3
    # the handoff's sbatch script: its directives are ones this cluster takes (sbatch --test-only), for the point's GPU
    bundle = tmp_path / "bundle"
    made = subprocess.run([sys.executable, "-m", "trtsweep.cli", "handoff", str(results), "--out", str(bundle),
                           "--image", "nvcr.io/nvidia/tritonserver:25.01-py3"], capture_output=True, text=True,
                          env=env)  # fmt: skip
    assert made.returncode == 0, made.stderr
    (script,) = (bundle / "slurm").glob("*.sbatch")
    assert "#SBATCH --gres=gpu:1\n" in script.read_text() and "srun \\\n  --container-image=" in script.read_text()
    assert subprocess.run(["sh", "-n", str(script)]).returncode == 0
    tested = slurm_cluster.run("sbatch", "--test-only", "--time=5", str(script), check=False)
    assert tested.returncode == 0 and "to start at" in tested.stderr, tested.stderr


def test_an_allocation_that_exists_is_used_and_kept(tmp_path, slurm_cluster):
    granted = slurm_cluster.run("salloc", "--no-shell", "--nodes=3", "--ntasks-per-node=2",
                                f"--gres=gpu:{GPUS_PER_NODE}", "--time=10", "--job-name=given")  # fmt: skip
    job = GRANTED.search(granted.stderr).group(1)
    try:
        argv, env = slurm_run(tmp_path, slurm_cluster, {"job_id": int(job)})
        done = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=500)
        assert done.returncode == 0, done.stdout[-5000:]
        records = [json.loads(p.read_text()) for p in sorted((tmp_path / "results" / "slurm").glob("*/status.json"))]
        assert {r["slurm"]["job_id"] for r in records} == {job} and [r["status"] for r in records] == ["ok"] * 3
        assert [j["job_id"] for j in slurm_cluster.jobs()] == [int(job)]  # still running: not the run's to release
        assert f"Slurm allocation: job {job} (partition gpu) on 3 node(s)" in (
            tmp_path / "results" / "slurm" / "report.md").read_text()  # fmt: skip
    finally:
        slurm_cluster.run("scancel", job)


@pytest.mark.fault(
    "Ctrl-C of a run on its own Slurm allocation mid-benchmark",
    "the lanes' steps, the allocation and every process of the run gone within a minute",
)
def test_an_interrupted_run_leaves_no_step_and_no_allocation(tmp_path, slurm_cluster):
    argv, env = slurm_run(tmp_path, slurm_cluster, OWN, token_ms=200, num_requests=40)  # a benchmark of ~2 min
    run = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                           start_new_session=True)  # fmt: skip
    try:
        deadline = time.monotonic() + 180
        while not (steps(slurm_cluster) and list((tmp_path / "work").glob("slurm/*/runs/*/results/triton_server.log"))):
            assert run.poll() is None and time.monotonic() < deadline, "no lane step served"
            time.sleep(0.5)
        time.sleep(2)
        os.killpg(run.pid, signal.SIGINT)
        start = time.monotonic()
        while slurm_cluster.jobs() or steps(slurm_cluster):
            assert time.monotonic() - start < 60, (slurm_cluster.jobs(), steps(slurm_cluster))
            time.sleep(0.5)
        print(f"no step and no allocation {time.monotonic() - start:.1f} s after the interrupt")
        took = all_gone(str(tmp_path), 60)  # nor a server, lane or runner of the run
        print(f"no process of the run {time.monotonic() - start:.1f} s after the interrupt ({took:.1f} s more)")
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(run.pid, signal.SIGKILL)
        run.wait()


def all_serving(run: subprocess.Popen, tmp_path: Path, cluster) -> None:
    """Wait until the three lanes' steps run and their servers serve, then a few seconds into the benchmarks."""
    deadline = time.monotonic() + 180
    served = "slurm/*/runs/*/results/triton_server.log"
    while len(steps(cluster)) < 3 or len(list((tmp_path / "work").glob(served))) < 3:
        assert run.poll() is None and time.monotonic() < deadline, "the lanes' steps did not all serve"
        time.sleep(0.5)
    time.sleep(3)  # benchmarking


def steps(cluster) -> list[str]:
    """The cluster's running steps (squeue -s), but each job's extern and batch steps."""
    out = cluster.run("squeue", "-h", "-s", "-o", "%i").stdout.split()
    return [s for s in out if not s.endswith((".extern", ".batch"))]


@pytest.mark.fault(
    "scancel of one lane's step and scancel --signal=KILL of another's mid-benchmark",
    "their points lost with Slurm's word as the cause (slurmstepd's line; srun's and accounting's), the third lane's "
    "point ok; the rerun runs them",
)
def test_cancelled_steps_lose_their_points_with_slurms_word_and_the_rerun_runs_them(tmp_path, slurm_cluster):
    argv, env = slurm_run(tmp_path, slurm_cluster, OWN, token_ms=40, num_requests=40)  # benchmarks of ~30 s
    run = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           start_new_session=True)  # fmt: skip
    try:
        all_serving(run, tmp_path, slurm_cluster)
        cancelled, killed = steps(slurm_cluster)[:2]
        slurm_cluster.run("scancel", cancelled)
        slurm_cluster.run("scancel", "--signal=KILL", killed)  # no slurmstepd line: srun's, and sacct's record
        out, _ = run.communicate(timeout=300)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(run.pid, signal.SIGKILL)
    assert run.returncode != 0, out[-3000:]
    records = {r["point"]: r for r in (json.loads(p.read_text()) for p in (tmp_path / "results" / "slurm").glob(
        "*/status.json"))}  # fmt: skip
    lost = {f"{r['slurm']['job_id']}.{r['slurm']['step_id']}": r for r in records.values() if r["status"] != "ok"}
    assert sorted(lost) == sorted([cancelled, killed]) and {r["status"] for r in lost.values()} == {"lost"}, lost
    assert lost[cancelled]["cause"].startswith(f"Slurm: STEP {cancelled} ON {lost[cancelled]['host']} CANCELLED AT ")
    assert lost[killed]["cause"].startswith(f"Slurm: {lost[killed]['host']}: task 0: Killed; sacct: step {killed} "
                                            "CANCELLED, exit code 0:9 "), lost[killed]  # fmt: skip
    rerun = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert rerun.returncode == 0, rerun.stdout[-4000:]
    for record in lost.values():
        again = json.loads((tmp_path / "results" / "slurm" / record["point"] / "status.json").read_text())
        assert again["status"] == "ok" and again["run_id"] != record["run_id"]
    assert slurm_cluster.jobs() == []


@pytest.mark.fault(
    "a node of the allocation set down mid-benchmark (scontrol update state=down)",
    "the run ends within a minute, its unfinished points lost with Slurm's word, nothing left",
)
def test_a_node_set_down_ends_the_run_in_bounded_time_with_slurms_word(tmp_path, slurm_cluster):
    node = slurm_cluster.nodes[1]

    def down() -> str:
        slurm_cluster.run("scontrol", "update", f"nodename={node}", "state=down", "reason=trtsweep-test")
        return f"{node} went down"

    try:
        run, out = run_into(tmp_path, slurm_cluster, OWN, down)
    finally:
        slurm_cluster.run("scontrol", "update", f"nodename={node}", "state=resume", check=False)
    all_lost_to_slurm(tmp_path, run, out, slurm_cluster)


def run_into(tmp_path: Path, cluster, slurm: dict, fault) -> tuple[subprocess.Popen, str]:
    """A run of three ~2-minute benchmarks on the cluster, `fault()` once every lane serves (it says what it did);
    the run's end awaited, printed how long after the fault, and nothing of it left running."""
    argv, env = slurm_run(tmp_path, cluster, slurm, token_ms=200, num_requests=40)
    run = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           start_new_session=True)  # fmt: skip
    try:
        all_serving(run, tmp_path, cluster)
        did = fault()
        done = time.monotonic()
        out, _ = run.communicate(timeout=120)
        print(f"the run ended {time.monotonic() - done:.1f} s after {did}")
        return run, out
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(run.pid, signal.SIGKILL)


def all_lost_to_slurm(tmp_path: Path, run: subprocess.Popen, out: str, cluster, said: tuple[str, ...] = ()) -> None:
    """The run ended non-zero, every point lost with Slurm's own line (holding one of `said`, when given), no job
    and no process of the run left."""
    assert run.returncode != 0, out[-3000:]
    records = [json.loads(p.read_text()) for p in (tmp_path / "results" / "slurm").glob("*/status.json")]
    assert {r["status"] for r in records} == {"lost"}, [(r["point"], r["status"]) for r in records]
    causes = [r["cause"] for r in records]
    assert all(c.startswith("Slurm: ") and (not said or any(w in c for w in said)) for c in causes), causes
    assert cluster.jobs() == []
    all_gone(str(tmp_path), 30)


@pytest.mark.fault(
    "the allocation's time limit reached mid-benchmark (Slurm ends the job: TIMEOUT)",
    "the run ends in bounded time, its unfinished points lost with Slurm's word (time limit), nothing left",
)
def test_the_allocations_time_limit_reached_mid_run_ends_it_with_slurms_word(tmp_path, slurm_cluster):
    limited = {"allocate": {**OWN["allocate"], "time": "1"}}  # a minute: Slurm's shortest

    def time_limit() -> str:
        while slurm_cluster.jobs():  # Slurm ends the job a minute (and its next check) after it began
            time.sleep(0.5)
        return "its allocation's time limit ended the job"

    run, out = run_into(tmp_path, slurm_cluster, limited, time_limit)
    all_lost_to_slurm(tmp_path, run, out, slurm_cluster, ("TIME LIMIT", "TIMEOUT"))


IMAGE = "nvcr.io/nvidia/tritonserver:25.01-trtllm-python-py3"


def test_the_pyxis_runtime_serves_each_point_in_its_image_as_a_step_beside_its_lane(tmp_path, slurm_cluster):
    pyxis = {"trtsweep_triton_runtime": "pyxis", "trtsweep_triton_container_image": IMAGE}
    argv, env = slurm_run(tmp_path, slurm_cluster, OWN, extra=pyxis)
    done = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=500)
    assert done.returncode == 0, done.stdout[-5000:] + done.stderr[-2000:]
    results = tmp_path / "results" / "slurm"
    records = {r["point"]: r for r in (json.loads(p.read_text()) for p in sorted(results.glob("*/status.json")))}
    assert [r["status"] for r in records.values()] == ["ok"] * 3
    (job,) = {r["slurm"]["job_id"] for r in records.values()}
    # what pyxis was asked for, as the double recorded it in each step's task: one server step per point, in the image,
    # beside (not as) its lane's step, the point's model repository mounted at the same place, no entrypoint
    said = [line.split("\t") for line in (slurm_cluster.root / "pyxis.log").read_text().splitlines()]
    servers = [s for s in said if s[0] == job]
    assert len(servers) == 3 and {s[2] for s in servers} == {IMAGE} and {s[5] for s in servers} == {"0"}, servers
    lanes = {r["slurm"]["step_id"] for r in records.values()}
    assert not lanes & {s[1] for s in servers}, (lanes, servers)
    for point in records:
        container = json.loads((results / point / "container.json").read_text())
        assert container["runtime"] == "pyxis" and container["image"] == IMAGE and container["slurm_job"] == job
        mounted = [s[3].split(",") for s in servers if f"/{point}/" in s[3]]  # its own step's mounts
        assert len(mounted) == 1 and any(m.endswith("/triton_repo") for m in mounted[0]), (point, servers)
    assert steps(slurm_cluster) == [] and slurm_cluster.jobs() == []  # no server's step left, the allocation released
