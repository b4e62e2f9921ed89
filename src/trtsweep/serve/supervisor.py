"""The parent of every server trtsweep starts: it lives only as long as the run that started it.

    python -m trtsweep.serve.supervisor --state S [--lease L --ttl T] [--held KIND A B] -- argv...

Starts `argv` in a session of its own (its process group holds the python-backend stubs too), bound to die
with the supervisor (PR_SET_PDEATHSIG: a supervisor killed by the OOM killer or `kill -9` takes its server with
it), writes `<S>.server` = {pid, start_ticks, supervisor: {pid, start_ticks}} once started, then watches it
twice a second:
- the server exits by itself: `<S>.exit` records its exit status or signal (`reason: exited`), what is left
  of its process group (stubs) is killed, what its runtime left ended (`--held`, trtsweep.runtime: a named container
  removed, since a killed `docker run` CLI leaves its container running; a pyxis server's Slurm step cancelled, since a
  killed srun client may leave its step), and the supervisor ends; the run reads the record to say why a point's
  server died mid-benchmark;
- the lease file `L` lapsed (common/lease.py): its counter did not advance for `T` seconds of this host's
  monotonic clock (the run's heartbeat stopped renewing it: a cut SSH link, a crashed controller), or it was
  there and is gone (the heartbeat's `end`: the run ended or was interrupted; at once); a lease not written yet
  gets `T` seconds from the supervisor's start. The server's group gets TERM, KILL after the grace period
  (STOP_GRACE_S), what its runtime left is ended, `<S>.exit` says `lease expired` and the log why;
- the supervisor itself gets TERM / INT / HUP: the same stop, `reason: supervisor signalled`.
Without `--lease` only the exit status is recorded (a server started on its own, e.g. the standalone role).
The server's environment comes in TRTSWEEP_SUPERVISED_ENV (JSON), so the supervisor's own Python does not run
with the server's library path.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from trtsweep import runtime
from trtsweep.common.fileio import atomic_write_text
from trtsweep.common.lease import LeaseWatch
from trtsweep.common.procs import bound_child, start_ticks

ENV_VAR = "TRTSWEEP_SUPERVISED_ENV"
POLL_S = 0.5
STOP_GRACE_S = 5.0  # TERM to KILL when stopping a server: nothing is measured any more, no long goodbyes


def server_file(state_file: Path) -> Path:
    return state_file.with_name(state_file.name + ".server")


def exit_file(state_file: Path) -> Path:
    return state_file.with_name(state_file.name + ".exit")


def describe_exit(record: dict[str, object]) -> str:
    """'exited with status 1', 'killed by signal 9 (SIGKILL)', plus why the supervisor stopped it."""
    sig = record.get("signal")
    if isinstance(sig, int):
        how = f"killed by signal {sig} ({signal.Signals(sig).name})"
    else:
        how = f"exited with status {record.get('returncode')}"
    reason = record.get("reason")
    return how if reason == "exited" else f"{how}: stopped by its supervisor ({reason})"


def _stop(proc: subprocess.Popen[bytes], grace_s: float, leftover: Callable[[], None]) -> None:
    for sig, wait in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 10.0)):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, sig)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=wait)
            break
    leftover()


def _record(state_file: Path, proc: subprocess.Popen[bytes], reason: str) -> None:
    code = proc.returncode
    record = {"returncode": code, "signal": -code if code is not None and code < 0 else None, "reason": reason,
              "at": time.time()}  # fmt: skip
    atomic_write_text(exit_file(state_file), json.dumps(record) + "\n")


def supervise(argv: list[str], state_file: Path, lease: Path | None, ttl_s: float, grace_s: float,
              leftover: Callable[[], None] = lambda: None) -> int:  # fmt: skip
    """Run and watch `argv` (see the module docstring); `leftover` removes what the server leaves outside its process
    group (its container, its Slurm step)."""
    env = json.loads(os.environ.pop(ENV_VAR, "null")) or dict(os.environ)
    watch = LeaseWatch(lease, ttl_s) if lease is not None else None  # a lease not written yet: the TTL from now
    stopping: list[str] = []
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, lambda *_: stopping.append("supervisor signalled"))
    me = os.getpid()
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, env=env, **bound_child())
    record = {"pid": proc.pid, "start_ticks": start_ticks(proc.pid),
              "supervisor": {"pid": me, "start_ticks": start_ticks(me)}}  # fmt: skip
    atomic_write_text(server_file(state_file), json.dumps(record))
    while proc.poll() is None:
        lapsed = watch.lapsed() if watch is not None else None
        if lapsed:
            print(f"trtsweep supervisor: {lapsed}", flush=True)
            stopping.append("lease expired")
        if stopping:
            print(f"trtsweep supervisor: stopping the server (pid {proc.pid}): {stopping[0]}", flush=True)
            _stop(proc, grace_s, leftover)
            _record(state_file, proc, stopping[0])
            return 0
        time.sleep(POLL_S)
    _record(state_file, proc, "exited")
    with contextlib.suppress(ProcessLookupError):  # what the dead server leaves (its stubs) goes with it
        os.killpg(proc.pid, signal.SIGKILL)
    leftover()  # a `docker run` CLI that died (killed, OOM) leaves its container running, an srun its step
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m trtsweep.serve.supervisor")
    parser.add_argument("--state", type=Path, required=True)
    parser.add_argument("--lease", type=Path)
    parser.add_argument("--ttl", type=float, default=30.0)
    parser.add_argument("--grace", type=float, default=STOP_GRACE_S)
    parser.add_argument("--held", nargs=3, metavar=("KIND", "A", "B"), help="what its runtime leaves: trtsweep.runtime")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("the server's command line goes after --")
    return supervise(command, args.state, args.lease, args.ttl, args.grace, lambda: runtime.end(args.held))


if __name__ == "__main__":
    sys.exit(main())
