"""Shared fixtures: the demo model, free loopback ports, a real local Triton server, a live process to point
at, and waiting for a condition. Also the fault suite's table: every test marked
`@pytest.mark.fault(fault, outcome)` is listed at the end of the run with its result (`pytest -m fault` runs
only them)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from trtsweep.common.paths import cache_dir
from trtsweep.hub.demo_model import DemoModel, materialize
from trtsweep.serve import server
from trtsweep.serve.spec import ServerSpec, ServerState
from trtsweep.triton import repository

ROOT = Path(__file__).resolve().parent.parent
PROMPTS = ROOT / "data" / "prompts.jsonl"
_BUILTIN_INTERN = sys.intern
pytest_plugins = ["tests.scheduling"]


@pytest.fixture
def builtin_sys_intern(monkeypatch: pytest.MonkeyPatch) -> None:
    """For a test that loads a model in-process after an earlier test of the session imported ansible (which replaces
    sys.intern): the builtin back for the test's duration."""
    monkeypatch.setattr(sys, "intern", _BUILTIN_INTERN)


def pytest_collection_finish(session: pytest.Session) -> None:
    """Importing ansible-core replaces sys.intern process-wide, and torch._dynamo then refuses to load any model
    in-process (every transformers reference of the session errors): no test module may import ansible at
    collection. Fails the session at once, before any test runs, instead of ten errors an hour later."""
    if sys.intern is not _BUILTIN_INTERN:
        raise pytest.UsageError(
            "a test module imported ansible while pytest collected it (sys.intern is now "
            f"{type(sys.intern).__module__}.{type(sys.intern).__name__}, which breaks torch in later tests): "
            "import ansible inside the test that needs it"
        )


def wait_for(predicate: Callable[[], object], timeout_s: float) -> float:
    """Seconds until predicate() held; fails the test after timeout_s."""
    start = time.monotonic()
    while not predicate():
        assert time.monotonic() - start < timeout_s, f"not within {timeout_s} s"
        time.sleep(0.05)
    return time.monotonic() - start


@pytest.fixture
def sleeper() -> Iterator[subprocess.Popen[bytes]]:
    """A live process of the test's own (a stand-in for another run or the controller), killed at the end."""
    proc = subprocess.Popen(["sleep", "600"])
    yield proc
    proc.kill()
    proc.wait()


def free_ports(count: int) -> list[int]:
    """Ports the kernel hands out on loopback right now (held open together so they differ)."""
    socks = []
    try:
        for _ in range(count):
            sock = socket.socket()
            sock.bind(("127.0.0.1", 0))
            socks.append(sock)
        return [s.getsockname()[1] for s in socks]
    finally:
        for sock in socks:
            sock.close()


def free_block(size: int) -> int:
    """A base port whose `size` ports are all free on loopback now (a lane's port block). Each parallel test worker
    (pytest-xdist) looks in a range of its own, so that two workers asking at once do not get the same block."""
    # TEST_PORT_SLOT: a session beside another (make test's waiting tests) takes a range no worker of the other has.
    # Slots 0-3 (20000-31999) lie below Linux's ephemeral range (32768-60999), from which the kernel picks the local
    # port of every outgoing connection: a long-lived one made between this check and the server's bind (the test
    # Slurm cluster's daemons keep loopback connections to their accounting) can hold a block's port for good there
    # (a rehearsal saw a lane's port "still in use after waiting 15 s" with the waiting session's block at 53000).
    slot = os.environ.get("TEST_PORT_SLOT") or os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw")
    worker = int(slot or 0)
    start = 20000 + 3000 * (worker % 12)
    for base in [*range(start, 60000, 97), *range(20000, start, 97)]:
        socks = []
        try:
            for port in range(base, base + size):
                sock = socket.socket()
                socks.append(sock)
                sock.bind(("127.0.0.1", port))
            return base
        except OSError:
            continue
        finally:
            for sock in socks:
                sock.close()
    raise AssertionError("no free block of loopback ports")


@pytest.fixture(scope="session")
def demo_model() -> DemoModel:
    return materialize(cache_dir())


def start_server(repo: Path, workdir: Path) -> tuple[ServerState, ServerSpec]:
    http, grpc, metrics = free_ports(3)
    spec = ServerSpec(
        model_repository=repo,
        log_file=workdir / "triton.log",
        http_port=http,
        grpc_port=grpc,
        metrics_port=metrics,
    )
    state = server.start(spec, workdir / "server.json")
    server.wait_ready(state, 180)
    return state, spec


def hf_repo(out: Path, model_dir: Path, **params: object) -> Path:
    files = repository.render({"engine_dir": str(model_dir), "tokenizer_dir": str(model_dir), **params})
    repository.write(files, out)
    return out


@contextmanager
def served(repo: Path, workdir: Path) -> Iterator[ServerSpec]:
    """A real Triton server on the repository, stopped (and checked gone) at the end."""
    state, spec = start_server(repo, workdir)
    try:
        yield spec
    finally:
        server.stop(state)
        assert not server.is_running(state)


@pytest.fixture(scope="session")
def hf_server(demo_model: DemoModel, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerSpec]:
    """The demo model behind the real Triton server (decoupled ensemble), stopped at the end."""
    work = tmp_path_factory.mktemp("hf_server")
    repo = hf_repo(work / "repo", demo_model.hf_dir, triton_max_batch_size=4)
    with served(repo, work) as spec:
        yield spec


@pytest.fixture
def spooled(monkeypatch: pytest.MonkeyPatch) -> list:
    """Every request result llm-perf reads back from its spool in this test (what the files are made of)."""
    from trtsweep.perf.spool import Spool

    kept: list = []
    read_back = Spool.results

    def keep(self: Spool) -> Iterator:
        for result in read_back(self):
            kept.append(result)
            yield result

    monkeypatch.setattr(Spool, "results", keep)
    return kept


FAULTS: list[tuple[str, str, str, str, float]] = []  # fault, required outcome, test, result, seconds


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    """A fault test's report carries its fault and outcome (a report is what reaches the controlling process when
    the tests run in parallel workers, the marker is not)."""
    report = yield
    marker = item.get_closest_marker("fault")
    if marker is not None:
        report.user_properties.append(("fault", list(marker.args)))
    return report


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    fault = dict(report.user_properties).get("fault")
    if fault is not None and (report.when == "call" or report.outcome != "passed"):
        test = report.nodeid.split("::", 1)[0].rsplit("/", 1)[-1] + "::" + report.nodeid.split("::")[-1]
        FAULTS.append((*fault, test, report.outcome, report.duration))


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if not FAULTS:
        return
    terminalreporter.section("fault suite")
    terminalreporter.write_line("| fault injected | outcome it must have | test | result | s |")
    terminalreporter.write_line("|---|---|---|---|---|")
    for fault, outcome, test, result, seconds in FAULTS:
        terminalreporter.write_line(f"| {fault} | {outcome} | {test} | {result} | {seconds:.0f} |")


def benchmark_under_way(work: Path) -> bool:
    """Whether a point's llm-perf measures under `work` (a host's work directory, or one point's there): its
    request log is made as its first level starts (a warm llm-perf runs from the server's start, before it)."""
    return any(work.rglob("llm_perf.requests.jsonl"))
