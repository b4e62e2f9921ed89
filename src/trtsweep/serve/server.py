"""A server's lifecycle: refuse busy ports, start under a supervisor, wait for readiness, watch, stop.

Its parts live beside it: what a server is started from and what is kept of it (spec.py), its command line
(command.py), probes of GPUs and ports (probes.py), whether it is ours (identity.py), its log (logs.py).

A started server is described by a small JSON state file (pid, process start time, ports, command, server
id, repository hash) so that a different process (a later Ansible task, a handler, a test's teardown) can
stop exactly that server by PID, and never a process that happened to reuse the PID.

Every start gets a random server id (`--id=trtsweep-<hex>`, which Triton returns as `name` in its server
metadata). Ready means: the process we started is alive, and the HTTP and gRPC ports answer with *that*
id. A port answered by another server (another sweep's Triton that holds it while ours failed to bind) is
an error, never a ready server.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from trtsweep import runtime
from trtsweep.common.procs import Started, alive, bound_child, start_ticks
from trtsweep.errors import TrtsweepError
from trtsweep.serve import openai_server, supervisor
from trtsweep.serve.command import build_command, held, runtime_of, server_environment
from trtsweep.serve.identity import check_identity, served_hash
from trtsweep.serve.logs import failure_cause, log_tail
from trtsweep.serve.probes import Answer, accepting, busy_ports, health_ready
from trtsweep.serve.spec import ServerSpec, ServerState, new_server_id

KIND_NAMES = {"triton": "Triton", "openai": "trtllm-serve", "proxy": "trtllm-serve disaggregated"}


def _check_ports(spec: ServerSpec) -> None:
    if len(set(spec.ports().values())) != len(spec.ports()):
        raise TrtsweepError(f"http, grpc and metrics ports must differ, got {spec.ports()}")
    busy = busy_ports(spec.bind_address, spec.ports())
    if busy:
        which = ", ".join(f"{role} port {port}" for role, port in busy.items())
        raise TrtsweepError(f"{which} on {spec.bind_address} already in use; stop that server or pick free ports")


def is_running(state: ServerState) -> bool:
    """True while the very process that was started is alive (a reaped zombie or a reused PID is not)."""
    with contextlib.suppress(ChildProcessError):
        os.waitpid(state.pid, os.WNOHANG)  # reap it if it is our exited child
    return start_ticks(state.pid) == state.start_ticks


def supervisor_gone(state: ServerState) -> str | None:
    """Why the server's supervisor no longer watches it (killed: the server goes with it), or None."""
    keeper = state.supervisor
    if keeper is None or keeper.get("pid") is None or alive(int(keeper["pid"]), keeper.get("start_ticks")):
        return None
    return f"its supervisor (pid {keeper['pid']}) is gone, and with it the server (it dies with its supervisor)"


def start(spec: ServerSpec, state_file: Path) -> ServerState:
    """Start the server in its own process group; return at once (see `wait_ready`)."""
    if not spec.model_repository.is_dir():
        raise TrtsweepError(f"model repository {spec.model_repository} does not exist")
    _check_ports(spec)
    server_id = new_server_id()
    if spec.openai is not None:  # its identity: the model id it answers with, the name of a link of its own
        openai_server.link(spec.openai, server_id)
    notes = runtime_of(spec).prepare()  # what its runtime adapted to this host (the container's limits)
    argv, env = build_command(spec, server_id)
    repo_hash = served_hash(spec)
    spec.log_file.parent.mkdir(parents=True, exist_ok=True)
    if notes:
        with open(spec.log_file, "a", encoding="utf-8") as log:
            log.writelines(f"trtsweep: {note}\n" for note in notes)
    leaves = held(spec)
    pid, ticks, keeper = supervised(spec, argv, env, state_file, leaves)
    state = ServerState(
        pid=pid,
        start_ticks=ticks,
        argv=argv,
        ports=spec.ports(),
        bind_address=spec.bind_address,
        health_url=spec.health_url(),
        log_file=str(spec.log_file),
        held=leaves,
        server_id=server_id,
        repository_hash=repo_hash,
        visible_devices=spec.visible_devices,
        lease_file=str(spec.lease_file) if spec.lease_file else None,
        state_file=str(state_file),
        kind=spec.kind,
        supervisor=keeper,
        model_id=(spec.openai.model_id or "") if spec.openai is not None else "",
        notes=notes,
    )
    state.save(state_file)
    return state


def process_root(state: ServerState) -> int:
    """Where the server's processes start: the container's init (its host pid) in the container runtime, whose
    processes are not the `docker run` CLI's; the step's task in the pyxis runtime (slurmstepd's child, not the srun
    client's); else the process we started."""
    return runtime.root(state.held, state.pid)


def supervised(
    spec: ServerSpec, argv: list[str], env: dict[str, str], state_file: Path, leaves: list[str] | None
) -> tuple[int, int, dict[str, int | None]]:
    """Start `argv` under its supervisor (serve/supervisor.py), which ends what its runtime `leaves` beside it (a
    container, a Slurm step) when it ends; return the server's pid and start ticks, and the supervisor's {pid,
    start_ticks}."""
    command = [sys.executable, "-m", "trtsweep.serve.supervisor", "--state", str(state_file)]
    if spec.lease_file is not None:  # renewed by the run's heartbeat alone (fleet/heartbeat.py), never here
        command += ["--lease", str(spec.lease_file), "--ttl", str(spec.lease_ttl_s)]
    if leaves is not None:
        command += ["--held", *leaves]
    for stale in (supervisor.server_file(state_file), supervisor.exit_file(state_file)):
        stale.unlink(missing_ok=True)
    own_env = {**server_environment(spec, None), supervisor.ENV_VAR: json.dumps(env)}
    with open(spec.log_file, "ab") as log:
        try:
            proc = subprocess.Popen([*command, "--", *argv], stdin=subprocess.DEVNULL, stdout=log,
                                    stderr=subprocess.STDOUT, env=own_env, start_new_session=True)  # fmt: skip
        except OSError as exc:
            raise TrtsweepError(f"cannot start {argv[0]}: {exc.strerror}") from exc
    started = supervisor.server_file(state_file)
    deadline = time.monotonic() + 30
    while not started.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            raise TrtsweepError(f"the server's supervisor did not start {argv[0]}: {failure_cause(spec.log_file)}")
        time.sleep(0.05)
    record = json.loads(started.read_text())
    ticks = record["start_ticks"] if record["start_ticks"] is not None else -1
    return record["pid"], ticks, record["supervisor"]


def exit_record(state_file: Path, wait_s: float = 3.0) -> dict[str, object] | None:
    """What the supervisor recorded when the server ended (see serve/supervisor.py), waiting up to `wait_s`."""
    path, deadline = supervisor.exit_file(state_file), time.monotonic() + wait_s
    while not path.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def gone(state: ServerState) -> str | None:
    """Why a started server no longer serves, in one line (its exit as its supervisor recorded it and the log's
    most telling line, or its supervisor's death), or None while it runs under its supervisor."""
    ident = f", id {state.server_id}" if state.server_id else ""
    name = f"{KIND_NAMES.get(state.kind, state.kind)} (pid {state.pid}{ident})"
    keeper = supervisor_gone(state)
    if is_running(state):
        return f"{name}: {keeper}" if keeper else None
    record = exit_record(Path(state.state_file)) if state.state_file else None
    if record is None and keeper:  # killed with its supervisor: nobody recorded the server's end
        return f"{name}: {keeper}"
    how = supervisor.describe_exit(record) if record else "is gone (no exit record)"
    return f"{name} {how}: {failure_cause(Path(state.log_file))}"


@dataclass
class Watched:
    """A command run while a server serves (`run_while_served`)."""

    returncode: int
    stdout: str
    stderr: str
    server_gone: str | None  # why the command was stopped: the server it talks to went away; None if it ended


def run_while_served(argv: list[str], state_file: Path, poll_s: float = 1.0) -> Watched:
    """Run `argv` (a client of the server that `state_file` names) to its end, or stop it (TERM, then KILL) as
    soon as the server is gone: stopped by its supervisor because the run's lease lapsed (an interrupted run, a
    dead controller, a cut link), crashed, or its supervisor killed. The command dies with this process too, so
    no client outlives the task that started it."""
    state = ServerState.load(state_file)
    return run_while(argv, lambda: gone(state), poll_s)


def run_while(argv: list[str] | Started, why_gone: Callable[[], str | None], poll_s: float = 1.0) -> Watched:
    """Run `argv` (or follow a process already `Started`: a warm llm-perf, perf/warm.py) to its end, or stop it as
    soon as `why_gone()` says why what it talks to is gone (a server, or any server of a disaggregated group:
    serve/group.py). A command that failed is asked about too: a client that saw its server die (connection reset)
    fails before the next poll, and the server's exit is the cause, not the client's error."""
    with contextlib.ExitStack() as files:
        if isinstance(argv, Started):
            proc, out, err = argv.proc, argv.out, argv.err
        else:
            out, err = files.enter_context(tempfile.TemporaryFile()), files.enter_context(tempfile.TemporaryFile())
            proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=err, **bound_child())
        why = None
        while why is None:
            try:
                proc.wait(timeout=poll_s)
                break
            except subprocess.TimeoutExpired:
                why = why_gone()
        if why is None and proc.returncode != 0:  # the client saw the server die before the next poll did
            why = why_gone()
        if why is not None:
            for sig, wait_s in ((signal.SIGTERM, 10.0), (signal.SIGKILL, 10.0)):
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, sig)
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(timeout=wait_s)
                    break
        out.seek(0)
        err.seek(0)
        return Watched(proc.returncode, out.read().decode(errors="replace"), err.read().decode(errors="replace"), why)


def wait_ready(state: ServerState, timeout_s: float) -> float:
    """Block until the process we started is alive, its HTTP and gRPC ports answer server metadata with the
    id this start gave it, /v2/health/ready says ready, and every port it was given accepts connections.

    Triton answers /v2/health/ready before its metrics endpoint listens, so health alone is not enough
    for a client that scrapes metrics right away. On failure stop it and raise with the log tail; a port
    answered by another server fails at once, in one line. Waiting does not renew the run's lease (only the
    controller's heartbeat does): a controller that dies while the model loads has its server stopped within the
    lease's TTL, and the wait ends saying so.
    """
    started = time.monotonic()
    while True:
        ours, other = check_identity(state)
        if other is not None:
            _fail_foreign(state, other)
        if (
            ours
            and health_ready(state.health_url)
            and all(accepting(state.bind_address, p) for p in state.ports.values())
            and is_running(state)
        ):
            return time.monotonic() - started
        if not is_running(state):
            record = exit_record(Path(state.state_file)) if state.state_file else None
            reason = "exited before becoming ready" + (f" ({supervisor.describe_exit(record)})" if record else "")
            break
        if time.monotonic() - started > timeout_s:
            reason = f"not ready after {timeout_s:g} s"
            break
        time.sleep(0.25)
    stop(state)
    tail = log_tail(Path(state.log_file))
    name = "triton" if state.kind == "triton" else "trtllm-serve"
    raise TrtsweepError(
        f"{name} server {reason}: {failure_cause(Path(state.log_file))} (log: {state.log_file})\n{tail}"
    )


def _fail_foreign(state: ServerState, other: Answer) -> None:
    alive = is_running(state)
    stop(state, wait_ports=False)  # the ports are the other server's: never wait for them
    ours = "it was still starting, stopped" if alive else "it exited"
    raise TrtsweepError(
        f"port {other.port} on {state.host} is answered by another server ({other.describe()}), not the one this "
        f"run started (id {state.server_id!r}, pid {state.pid}): {ours}; last log line: "
        f"{failure_cause(Path(state.log_file))} (log: {state.log_file})"
    )


def stop(state: ServerState, grace_s: float = 15.0, wait_ports: bool = True) -> bool:
    """Stop the server's process group (TERM, then KILL after `grace_s`) and end what its runtime left (its container
    or Slurm step, by name: also when the `docker run` or `srun` client is already gone, killed, and it runs on); True
    if the process was running.

    Returns only once the process is gone and (with `wait_ports`) its ports can be bound again.
    """
    running = is_running(state)
    if running:  # never a signal to a pid that is no longer ours
        _end_group(state, grace_s)
    runtime.end(state.held)
    if wait_ports and (running or state.held):
        _wait_ports_free(state)
    return running


def _end_group(state: ServerState, grace_s: float) -> None:
    """TERM the server's process group, KILL it after `grace_s`; returns once the process is gone."""
    for sig, wait in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 10.0)):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(state.pid, sig)
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline and is_running(state):
            time.sleep(0.1)
        if not is_running(state):
            return


def _wait_ports_free(state: ServerState, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while busy := busy_ports(state.bind_address, state.ports):
        if time.monotonic() > deadline:
            raise TrtsweepError(f"server pid {state.pid} stopped but ports {busy} are still in use")
        time.sleep(0.2)
