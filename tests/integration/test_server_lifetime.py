"""A point's Triton server never outlives the run that started it, a server that dies mid-benchmark fails
its point, and a run never touches another run's server (real sweep.yml runs, real Triton, the demo model).

The run's heartbeat renews the host's lease; the supervisor on the host stops the server when the lease is not
renewed for `trtsweep_server_lease_ttl` seconds (8 here), and the benchmark stops with its server. The server
dies with its supervisor, and a sweep's results belong to one run at a time.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import ROOT, benchmark_under_way, free_ports
from trtsweep.common.procs import start_ticks
from trtsweep.serve import supervisor
from trtsweep.serve.probes import busy_ports
from trtsweep.serve.spec import ServerState

SWEEP = "smollm2-cpu-demo"
POINT = "smollm2-135m_float32_tp1pp1_bs4_isl1024osl128_stream"
TTL = 8
# the embedded sweep with shorter answers and fewer of them: a benchmark still runs long enough to be interrupted, and
# one run to its end (a second run refused meanwhile) costs CI a minute, not three
SHORT = yaml.safe_load((ROOT / "group_vars" / "all" / "sweep.yml").read_text())["trtsweep_sweep"]
SHORT["benchmark"] |= {"max_tokens": 32, "num_requests": 8, "concurrency": [1, 2]}
GRACE = 5  # the supervisor's TERM -> KILL grace


class Run:
    """One `ansible-playbook sweep.yml` of one point, in its own session (so Ctrl-C can reach its group); `extra`
    and `env` add to (or override) its variables and environment, `ports` its three ports."""

    def __init__(self, tmp_path: Path, log: str = "ansible.log", extra: dict[str, Any] | None = None,
                 env: dict[str, str] | None = None, ports: list[int] | None = None) -> None:  # fmt: skip
        self.tmp = tmp_path
        self.log_path = tmp_path / log
        self.ports = ports or free_ports(3)
        variables = {
            "trtsweep_results_dir": str(tmp_path / "results"), "trtsweep_work_dir": str(tmp_path / "work"),
            "trtsweep_triton_http_port": self.ports[0], "trtsweep_triton_grpc_port": self.ports[1],
            "trtsweep_triton_metrics_port": self.ports[2], "trtsweep_only": POINT,
            "trtsweep_server_lease_ttl": TTL, "trtsweep_sweep": SHORT, "trtsweep_sweep_dir": str(ROOT), **(extra or {}),
        }  # fmt: skip
        (tmp_path / "extra.json").write_text(json.dumps(variables))
        env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}", **(env or {})}
        self.log = open(self.log_path, "wb")  # noqa: SIM115 - closed in finish()
        self.proc = subprocess.Popen([str(Path(sys.executable).parent / "ansible-playbook"), "sweep.yml", "-e",
                                      f"@{tmp_path / 'extra.json'}"], cwd=ROOT, env=env, stdout=self.log,
                                     stderr=subprocess.STDOUT, start_new_session=True)  # fmt: skip

    @property
    def results(self) -> Path:
        return self.tmp / "results" / SWEEP

    def wait_benchmark(self, after_s: float = 3.0, point: str = POINT) -> ServerState:
        """Wait until the point's benchmark runs (llm-perf started); return the server's state."""
        deadline = time.monotonic() + 600
        while True:
            assert self.proc.poll() is None, self.output()
            assert time.monotonic() < deadline, self.output()
            states = list((self.tmp / "work").glob(f"{SWEEP}/{point}/runs/*/triton_server.json"))
            if states and benchmark_clients(self.tmp) and benchmark_under_way(self.tmp / "work" / SWEEP / point):
                time.sleep(after_s)
                return ServerState.load(states[0])
            time.sleep(0.5)

    def output(self) -> str:
        return self.log_path.read_text(errors="replace")

    def finish(self, timeout_s: float = 600) -> int:
        try:
            return self.proc.wait(timeout=timeout_s)
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.log.close()


def gone(pid: int) -> bool:
    return start_ticks(pid) is None


def descendants(pid: int) -> list[int]:
    """Every live process below `pid` (Triton's python-backend stubs below tritonserver)."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, ValueError, IndexError):
            fields = stat.read_text().rsplit(")", 1)[1].split()
            children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def processes(module: bytes, tmp_path: Path) -> list[int]:
    """Live `python -m <module>` processes working in this test's directories."""
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        with contextlib.suppress(OSError):
            argv = cmdline.read_bytes().split(b"\0")
            if module in argv and any(str(tmp_path).encode() in arg for arg in argv):
                found.append(int(cmdline.parent.name))
    return found


def benchmark_clients(tmp_path: Path) -> list[int]:
    """Live llm-perf processes writing into this test's directories (started for their benchmark, or warm:
    started with the server, handed their benchmark once it is ready)."""
    return processes(b"trtsweep.perf.cli", tmp_path) + processes(b"trtsweep.perf.warm", tmp_path)


def lane_runners(tmp_path: Path) -> list[int]:
    """Live lane runners (python -m trtsweep.lane) of this test's runs: their host spec is under its directory."""
    return processes(b"trtsweep.lane", tmp_path)


def ports_free(ports: list[int]) -> bool:
    """As a new server (and the lane preflight) sees them: bindable with SO_REUSEADDR."""
    return not busy_ports("127.0.0.1", dict(enumerate(ports)))


@pytest.fixture
def run(tmp_path: Path) -> Iterator[Run]:
    started = Run(tmp_path)
    yield started
    started.finish(timeout_s=60)
    for pid in lane_runners(tmp_path):  # leave nothing running (a failed test's runner)
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    for state_file in (tmp_path / "work").glob("*/*/runs/*/triton_server.json"):  # leave nothing running
        state = ServerState.load(state_file)
        if start_ticks(state.pid) == state.start_ticks:
            os.killpg(state.pid, signal.SIGKILL)


@pytest.mark.e2e
@pytest.mark.timeout(900)
@pytest.mark.parametrize("how", [
    pytest.param("ctrl-c", marks=pytest.mark.fault("Ctrl-C of ansible-playbook mid-benchmark",
                                                   "server and benchmark gone within TTL + grace")),
    pytest.param("sigterm", marks=pytest.mark.fault("SIGTERM to ansible-playbook mid-benchmark",
                                                    "server and benchmark gone within TTL + grace")),
])  # fmt: skip
def test_an_interrupted_run_leaves_no_server(run, how):
    state = run.wait_benchmark()
    if how == "ctrl-c":  # the terminal sends SIGINT to the whole foreground process group
        os.killpg(run.proc.pid, signal.SIGINT)
    else:
        run.proc.send_signal(signal.SIGTERM)
    interrupted = time.monotonic()
    assert run.finish(timeout_s=120) != 0
    took = 0.0
    # the supervisor records why it stopped the server once the server is gone: that record ends the wait too
    exit_record = supervisor.exit_file(Path(state.log_file).parent.parent / "triton_server.json")
    while not (gone(state.pid) and ports_free(run.ports) and exit_record.exists()):
        took = time.monotonic() - interrupted
        assert took < TTL + GRACE + 10, f"server pid {state.pid} still running {took:.0f} s after {how}"
        time.sleep(0.2)
    print(f"{how}: server gone and ports free {took:.1f} s after the interrupt (lease ttl {TTL} s)")
    record = json.loads(exit_record.read_text())
    assert record["reason"] == "lease expired"
    deadline = time.monotonic() + 15  # the benchmark stops with its server: no llm-perf left sending to nothing
    while benchmark_clients(run.tmp):
        assert time.monotonic() < deadline, f"llm-perf still running: {benchmark_clients(run.tmp)}"
        time.sleep(0.2)
    deadline = time.monotonic() + 30  # and the host's lane runner ends when the lease lapses: nothing is left
    while lane_runners(run.tmp):
        assert time.monotonic() < deadline, f"lane runner still running: {lane_runners(run.tmp)}"
        time.sleep(0.2)


@pytest.mark.e2e
@pytest.mark.timeout(900)
@pytest.mark.fault("a server's supervisor killed -9 mid-benchmark", "server, its stubs and the benchmark gone")
def test_a_killed_supervisor_takes_its_server_stubs_and_benchmark_with_it(run):
    """The OOM killer or kill -9 takes the supervisor, and the run is interrupted too: nothing of the point's
    serving stays (the server dies with its supervisor, Triton's stubs with Triton, llm-perf with its server)."""
    state = run.wait_benchmark()
    stubs = descendants(state.pid)
    assert stubs, "Triton's python-backend stubs were not found below tritonserver"
    assert state.supervisor is not None
    os.kill(int(state.supervisor["pid"]), signal.SIGKILL)
    os.killpg(run.proc.pid, signal.SIGINT)
    killed = time.monotonic()
    run.finish(timeout_s=120)
    while not (gone(state.pid) and all(gone(pid) for pid in stubs) and not benchmark_clients(run.tmp)):
        took = time.monotonic() - killed
        left = [pid for pid in [state.pid, *stubs, *benchmark_clients(run.tmp)] if not gone(pid)]
        assert took < 30, f"still running {took:.0f} s after the supervisor was killed: {left}"
        time.sleep(0.2)
    assert ports_free(run.ports)


@pytest.mark.e2e
@pytest.mark.timeout(900)
def test_a_second_run_of_the_sweep_is_refused_and_the_first_measures_on(run):
    """A second run refused while the first measures; once it has ended, `trtsweep_force` measures the point again."""
    state = run.wait_benchmark()
    second = Run(run.tmp, log="second.log")
    assert second.finish(timeout_s=120) != 0
    refusal = [line for line in second.output().splitlines() if "is in use by run" in line]
    assert refusal, second.output()[-3000:]
    lock = json.loads((run.results / ".run.lock").read_text())
    for part in (f"run {lock['run_id']}", f"pid {run.proc.pid}", f"started {lock['started_at']}", "wrote nothing"):
        assert part in refusal[0], refusal[0]
    assert "TASK [Plan]" not in second.output()  # refused before anything was written
    assert not gone(state.pid), "the second run stopped the first run's server"
    assert run.finish() == 0, run.output()[-3000:]
    status = json.loads((run.results / POINT / "status.json").read_text())
    assert (status["status"], status["run_id"]) == ("ok", lock["run_id"]), status
    assert not (run.results / ".run.lock").exists()  # released at the end of the run

    # forced: the point runs again on what the first run made (its repository as it is), under a new run id
    repository = run.tmp / "work" / SWEEP / POINT / "triton_repo"
    made = {f: f.stat().st_mtime_ns for f in repository.rglob("*") if f.is_file()}
    assert made, repository
    forced = Run(run.tmp, log="forced.log", ports=run.ports, extra={"trtsweep_force": True})
    assert forced.finish() == 0, forced.output()[-3000:]
    again = json.loads((run.results / POINT / "status.json").read_text())
    assert again["status"] == "ok" and again["run_id"] != lock["run_id"], again
    assert {f: f.stat().st_mtime_ns for f in repository.rglob("*") if f.is_file()} == made, "repository rewritten"


@pytest.mark.e2e
@pytest.mark.timeout(900)
@pytest.mark.fault("the server killed mid-benchmark", "the point fails with the server's exit, the run ends non-zero")
def test_a_server_killed_mid_benchmark_fails_the_point_and_the_run(run):
    state = run.wait_benchmark()
    os.kill(state.pid, signal.SIGKILL)
    assert run.finish() != 0
    status = json.loads((run.results / POINT / "status.json").read_text())
    assert (status["status"], status["stage"]) == ("failed", "benchmark"), status
    assert "killed by signal 9 (SIGKILL)" in status["cause"], status["cause"]
    assert status["log_tail"], status
    assert POINT in run.output().split("TASK [Every point of this run finished ok]", 1)[1]  # the run says so


@pytest.mark.e2e
@pytest.mark.timeout(900)
def test_a_run_never_touches_another_runs_server(tmp_path):
    """The same sweep's point directory with a live server of another run: the shared state file of the old
    layout and another run's own directory both name a running process; this run must leave both alone."""
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(900)"], start_new_session=True)
    try:
        point_dir = tmp_path / "work" / SWEEP / POINT
        for state_file in (point_dir / "triton_server.json", point_dir / "runs" / "other-run" / "triton_server.json"):
            state_file.parent.mkdir(parents=True, exist_ok=True)
            ports = free_ports(3)
            ServerState(pid=other.pid, start_ticks=start_ticks(other.pid) or -1, argv=["tritonserver"],
                        ports=dict(zip(["http", "grpc", "metrics"], ports, strict=True)), bind_address="127.0.0.1",
                        health_url=f"http://127.0.0.1:{ports[0]}/v2/health/ready", log_file=str(tmp_path / "o.log"),
                        server_id="trtsweep-otherrun").save(state_file)  # fmt: skip
        mine = Run(tmp_path)
        assert mine.finish(timeout_s=800) == 0, mine.output()[-3000:]
        assert other.poll() is None, "this run stopped another run's server"
        status = json.loads((mine.results / POINT / "status.json").read_text())
        assert status["status"] == "ok"
    finally:
        other.kill()
        other.wait()
