"""A disaggregated point's servers as one group: its context and generation workers (trtllm-serve, or the hf backend's
stand-in) and the `trtllm-serve disaggregated` proxy in front of them (or its stand-in, serve/disagg_proxy.py).

    start_workers(workers, state_file)   every worker started at once (server.start: its own supervisor under the
                                         run's lease, its own port, GPUs and log, its own link named the group's
                                         model id); the group's state file lists them
    start_proxy(group, proxy)            the proxy, once the workers are ready (the real one waits for them only
                                         its server_start_timeout), under its own supervisor and the lease
    wait_ready(group, timeout_s)         every member ready: a worker alive and answering GET /v1/models with the
                                         group's model id on its own port, and /health; the proxy alive and its
                                         /health 200 (which the proxy answers once all its servers answer theirs)
    gone(group)                          why the group no longer serves, naming the member that went first
    stop(group)                          the proxy, then every worker (TERM, then KILL), whatever state each is in
    record(group)                        each member's role, GPUs, port, pids, log and command, for the point's record

A member that exits, or a port answered by another server, fails the wait naming the member; every member is
stopped then, and by the caller whatever happens (the lane stops the group in a `finally`), and each member's
supervisor stops it when the run's lease lapses, so none outlives the point. The group's state file (JSON) names the
members' state files, so another process can stop exactly these servers by PID.
"""

from __future__ import annotations

import contextlib
import json
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from trtsweep.common.fileio import atomic_write_text
from trtsweep.errors import TrtsweepError
from trtsweep.serve import server
from trtsweep.serve.command import server_environment
from trtsweep.serve.identity import check_identity
from trtsweep.serve.logs import failure_cause, log_tail
from trtsweep.serve.probes import accepting, busy_ports, health_ready
from trtsweep.serve.spec import ServerSpec, ServerState, new_server_id, probe_host


@dataclass
class WorkerStart:
    """One worker to start: its name (context0, generation1, ...), role, GPUs and server spec (an openai spec whose
    `flags` are the worker's; its model id is set by start_workers)."""

    name: str
    role: str
    gpus: list[int]
    spec: ServerSpec


@dataclass
class ProxyStart:
    """The proxy to start: its command (the config file in it), port and log; `spec` gives the bind address, the
    lease and the runtime."""

    argv: list[str]
    spec: ServerSpec
    held: list[str] | None = None  # what its runtime leaves beside its process (trtsweep.runtime): in an image


@dataclass
class Member:
    name: str  # context0, generation0, ..., proxy
    role: str  # context | generation | proxy
    gpus: list[int]
    port: int
    state_file: str


@dataclass
class GroupState:
    model_id: str  # the id every worker's GET /v1/models answers with (the requests' model)
    state_file: str
    members: list[Member] = field(default_factory=list)

    def save(self) -> None:
        atomic_write_text(Path(self.state_file), json.dumps(asdict(self), indent=2) + "\n")

    @classmethod
    def load(cls, path: Path) -> GroupState:
        data = json.loads(path.read_text())
        return cls(data["model_id"], data["state_file"], [Member(**m) for m in data["members"]])

    def state(self, member: Member) -> ServerState:
        return ServerState.load(Path(member.state_file))

    def describe(self, member: Member) -> str:
        what = "the proxy" if member.role == "proxy" else f"{member.role} worker {member.name}"
        return f"{what} (port {member.port})"


def _member_file(state_file: Path, name: str) -> Path:
    return state_file.with_name(f"{state_file.stem}.{name}.json")


def start_workers(workers: list[WorkerStart], state_file: Path) -> GroupState:
    """Start every worker; return the group's state (saved to `state_file`). A worker that cannot start stops the
    ones started before it."""
    group = GroupState(new_server_id(), str(state_file))
    try:
        for worker in workers:
            if worker.spec.openai is None:
                raise TrtsweepError(f"disaggregated worker {worker.name}: not an OpenAI server spec")
            worker.spec.openai.model_id = group.model_id
            path = _member_file(state_file, worker.name)
            server.start(worker.spec, path)
            group.members.append(Member(worker.name, worker.role, worker.gpus, worker.spec.http_port, str(path)))
            group.save()
    except TrtsweepError as exc:
        with contextlib.suppress(TrtsweepError):  # the start's failure is the one to tell
            stop(group)
        raise TrtsweepError(f"disaggregated worker {worker.name}: {exc}") from exc
    return group


def _health_url(spec: ServerSpec) -> str:
    host = probe_host(spec.bind_address)
    return f"http://{f'[{host}]' if ':' in host else host}:{spec.http_port}/health"


def start_proxy(group: GroupState, proxy: ProxyStart) -> None:
    """Start the proxy of a group whose workers are ready."""
    spec, state_file = proxy.spec, Path(group.state_file)
    busy = busy_ports(spec.bind_address, {"http": spec.http_port})
    if busy:
        raise TrtsweepError(f"the proxy's port {spec.http_port} on {spec.bind_address} is already in use")
    path = _member_file(state_file, "proxy")
    spec.log_file.parent.mkdir(parents=True, exist_ok=True)
    pid, ticks, keeper = server.supervised(spec, proxy.argv, server_environment(spec), path, proxy.held)
    state = ServerState(pid=pid, start_ticks=ticks, argv=proxy.argv, ports={"http": spec.http_port},
                        bind_address=spec.bind_address, health_url=_health_url(spec), log_file=str(spec.log_file),
                        lease_file=str(spec.lease_file) if spec.lease_file else None, state_file=str(path),
                        kind="proxy", supervisor=keeper, held=proxy.held)  # fmt: skip
    state.save(path)
    group.members.append(Member("proxy", "proxy", [], spec.http_port, str(path)))
    group.save()


def _ready(group: GroupState, member: Member) -> bool:
    """Whether the member serves; TrtsweepError when its port is another server's."""
    state = group.state(member)
    if member.role != "proxy":
        ours, other = check_identity(state)
        if other is not None:
            raise TrtsweepError(f"{group.describe(member)}: port {other.port} is answered by another server "
                                f"({other.describe()}), not the group's model id {group.model_id!r}")  # fmt: skip
        if not ours:
            return False
    return health_ready(state.health_url) and accepting(state.bind_address, member.port) and server.is_running(state)


def wait_ready(group: GroupState, timeout_s: float) -> float:
    """Block until every member serves (see the module's doc); on failure stop the whole group and raise naming the
    member, with its log's tail."""
    started = time.monotonic()
    pending = list(group.members)
    culprit = pending[0] if pending else None
    try:
        while pending:
            for culprit in list(pending):
                if _ready(group, culprit):
                    pending.remove(culprit)
                elif not server.is_running(group.state(culprit)):
                    why = server.gone(group.state(culprit)) or "exited"
                    raise TrtsweepError(f"{group.describe(culprit)} exited before it was ready: {why}")
            if pending and time.monotonic() - started > timeout_s:
                culprit = pending[0]
                names = ", ".join(group.describe(m) for m in pending)
                raise TrtsweepError(f"{names} not ready after {timeout_s:g} s: {_cause(group, culprit)}")
            if pending:
                time.sleep(0.25)
    except TrtsweepError as exc:
        with contextlib.suppress(TrtsweepError):  # why it was not ready is the failure to tell
            stop(group)
        tail = log_tail(Path(group.state(culprit).log_file)) if culprit is not None else ""
        raise TrtsweepError(f"{exc}\n{tail}") from exc
    return time.monotonic() - started


def _cause(group: GroupState, member: Member) -> str:
    state = group.state(member)
    return f"{failure_cause(Path(state.log_file))} (log: {state.log_file})"


def gone(group: GroupState) -> str | None:
    """Why the group no longer serves (the first member gone, named), or None while every member runs."""
    for member in group.members:
        why = server.gone(group.state(member))
        if why is not None:
            return f"{group.describe(member)}: {why}"
    return None


def first_gone_log(group: GroupState) -> Path:
    """The log of the first member no longer running (the proxy's while all run)."""
    states = [group.state(m) for m in group.members]
    gone_first = next((st for st in states if not server.is_running(st)), states[-1])
    return Path(gone_first.log_file)


def stop(group: GroupState) -> list[str]:
    """Stop every member still running, the proxy first; returns the names of those it stopped. A member whose port
    stays held after it stopped does not keep the others running: that error is raised once all were stopped."""
    stopped, errors = [], []
    for member in sorted(group.members, key=lambda m: m.role != "proxy"):
        path = Path(member.state_file)
        try:
            if path.exists() and server.stop(ServerState.load(path)):
                stopped.append(member.name)
        except TrtsweepError as exc:
            stopped.append(member.name)
            errors.append(f"{group.describe(member)}: {exc}")
    if errors:
        raise TrtsweepError("; ".join(errors))
    return stopped


def record(group: GroupState) -> list[dict[str, Any]]:
    """Each member as the point's record keeps it."""
    out = []
    for member in group.members:
        state = group.state(member)
        keeper = state.supervisor or {}
        out.append({"name": member.name, "role": member.role, "gpus": member.gpus, "port": member.port,
                    "pid": state.pid, "supervisor_pid": keeper.get("pid"), "log": Path(state.log_file).name,
                    "argv": state.argv})  # fmt: skip
    return out
