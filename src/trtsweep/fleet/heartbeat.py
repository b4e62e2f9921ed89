"""The run's heartbeat: one per run and host, renewing the lease that keeps the host's servers alive.

    python -m trtsweep.fleet.heartbeat --controller-pid P --log L [--every 2] -- CHANNEL...

Every server a run starts is supervised (serve/supervisor.py) against the host's lease file for the run, and the
host's lanes are tied to it (lane/runner.py). The lease holds a counter that the heartbeat advances: its readers on the
host age it by their own monotonic clock since they last saw the counter change (common/lease.py), never by the file's
modification time or by the controller's clock, so an NTP step on either side changes nothing. While it advances the
servers run; when it stops advancing for the lease's TTL, or the file is removed, they are stopped. The lease is
renewed by one heartbeat per host and by nothing else (not by the lanes, nor by a server waiting to be ready), so a
server's lifetime does not depend on how quickly the controller gets round to its lane, nor on Ansible's forks, and a
dead controller stops its servers within the TTL whatever they are doing.

The heartbeat runs on the controller, started by the action plugin `trtsweep_heartbeat` (one per run and host).
CHANNEL is a command whose standard input reaches the host's `renew_loop` shell: on an SSH host, the ssh
command line Ansible itself would use (its ControlMaster, keys, known hosts and keep-alives), on the local
connection `sh -c` directly. Each line written is the next value of the counter, which the host writes into the
lease whole (a temporary file renamed over it). The heartbeat:

- writes a line every `--every` seconds while the controller process (`--controller-pid`, with its start
  ticks) lives; when it is gone (the run ended, Ctrl-C, SIGTERM, kill -9), it writes `end` (the host removes
  the lease: its servers stop at once), closes the channel and exits; a host it cannot tell (a cut link) sees
  its lease lapse within the TTL;
- ends the same way when it is itself told to stop (SIGTERM, SIGINT, SIGHUP), the controller living on: this is how
  the controller stops one host's lanes and servers (terminate that host's heartbeat);
- restarts a channel that ended (a transient SSH failure, a master connection that dropped) after a second,
  so only a link that stays down for the whole TTL loses the host's servers; the counter goes on across channels;
- logs every channel start and end to `--log` (one line each), for the report of a host that was lost.
"""

from __future__ import annotations

import argparse
import contextlib
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

from trtsweep.common.procs import alive

EVERY_S = 2.0
RESTART_S = 1.0
STOP_CHECK_S = 0.1  # how soon a stop signal ends a pause
END = "end"
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


def renew_loop(lease_file: str) -> str:
    """The host side of a channel, in plain POSIX sh: write every line read (the heartbeat's counter) into
    `lease_file` whole (a temporary file of this host and shell renamed over it); `end` removes it (the run is over:
    the host's servers stop at once); at end of input (a dropped channel) leave it to lapse."""
    lease = shlex.quote(lease_file)
    folder = shlex.quote(str(Path(lease_file).parent))
    return (f"mkdir -p -- {folder} && tmp={lease}.$(uname -n).$$ && while IFS= read -r line; do "
            f'if [ "$line" = {END} ]; then rm -f -- {lease}; exit 0; fi; '
            f"printf '%s\\n' \"$line\" > \"$tmp\" && mv -f -- \"$tmp\" {lease} || exit 1; done")  # fmt: skip


def remote_command(lease_file: str) -> str:
    """`renew_loop` as one command string for a remote login shell (run by `sh`, whatever the login shell)."""
    return "sh -c " + shlex.quote(renew_loop(lease_file))


def _log(log: Path, message: str) -> None:
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    with log.open("a", encoding="utf-8") as handle:
        handle.write(f"{stamp} {message}\n")


def _close(channel: subprocess.Popen[bytes], end: bool) -> None:
    """Close the channel; with `end`, first tell the host the run is over (its lease is removed)."""
    with contextlib.suppress(OSError):
        if channel.stdin:
            if end:
                channel.stdin.write(f"{END}\n".encode())
                channel.stdin.flush()
            channel.stdin.close()
    try:
        channel.wait(timeout=5)
    except subprocess.TimeoutExpired:
        channel.kill()
        channel.wait()


def _pause(seconds: float, stopped: list[int]) -> None:
    """Sleep `seconds`, or less: a stop signal ends the pause within STOP_CHECK_S."""
    deadline = time.monotonic() + seconds
    while not stopped and (left := deadline - time.monotonic()) > 0:
        time.sleep(min(left, STOP_CHECK_S))


def _ended(controller_pid: int, stopped: list[int]) -> str:
    why = f"stopped by {signal.Signals(stopped[0]).name}" if stopped else f"controller (pid {controller_pid}) is gone"
    return f"{why}: the lease is removed, the host's servers stop"


def beat(channel_argv: list[str], controller_pid: int, controller_ticks: int | None, log: Path,
         every_s: float = EVERY_S) -> int:  # fmt: skip
    """Keep the channel open and write the next counter every `every_s` seconds while the controller lives and no
    stop signal came."""
    stopped: list[int] = []
    for sig in STOP_SIGNALS:
        signal.signal(sig, lambda signum, _frame: stopped.append(signum))
    channel: subprocess.Popen[bytes] | None = None
    counter = 0
    ended = False
    errors = log.open("ab")  # the channels' stderr (ssh's messages), one handle for all of them
    try:
        while not stopped and alive(controller_pid, controller_ticks):
            if channel is not None and channel.poll() is not None:
                _log(log, f"channel ended (status {channel.returncode}); restarting in {RESTART_S:g} s")
                channel = None
                _pause(RESTART_S, stopped)
                continue
            if channel is None:
                channel = subprocess.Popen(channel_argv, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                                           stderr=errors)  # fmt: skip
                _log(log, f"channel started (pid {channel.pid})")
            counter += 1
            try:
                assert channel.stdin is not None
                channel.stdin.write(f"{counter}\n".encode())
                channel.stdin.flush()
            except OSError:  # the channel is ending: the next round restarts it
                pass
            _pause(every_s, stopped)
        ended = True
        _log(log, _ended(controller_pid, stopped))
    finally:
        if channel is not None:
            _close(channel, ended)
        errors.close()
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m trtsweep.fleet.heartbeat")
    parser.add_argument("--controller-pid", type=int, required=True)
    parser.add_argument("--controller-ticks", type=int)
    parser.add_argument("--log", type=Path, required=True)
    parser.add_argument("--every", type=float, default=EVERY_S)
    parser.add_argument("channel", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    channel = args.channel[1:] if args.channel[:1] == ["--"] else args.channel
    if not channel:
        parser.error("the channel's command line goes after --")
    return beat(channel, args.controller_pid, args.controller_ticks, args.log, args.every)


if __name__ == "__main__":
    sys.exit(main())
