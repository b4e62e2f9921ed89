"""A helper HTTP service run as a child process: started in its own session, awaited, stopped by PID."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

from trtsweep.errors import TrtsweepError


@contextlib.contextmanager
def http_service(cmd: list[str], health_url: str, timeout_s: float, log: Path | None = None) -> Iterator[int]:
    """Run `cmd` until the block ends; enter once `health_url` answers; yield the PID.

    Any HTTP answer counts as up. The process group is sent TERM, then KILL after 15 s, on the way out.
    """
    out = open(log, "wb") if log else subprocess.DEVNULL  # noqa: SIM115 - closed below
    try:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    finally:
        if log:
            out.close()  # type: ignore[union-attr]
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                urllib.request.urlopen(health_url, timeout=2).close()
                break
            except urllib.error.HTTPError:
                break
            except OSError as exc:
                if proc.poll() is not None or time.monotonic() > deadline:
                    why = f"exited with status {proc.returncode}" if proc.poll() is not None else "no answer"
                    raise TrtsweepError(f"{Path(cmd[0]).name} did not come up at {health_url}: {why}") from exc
                time.sleep(0.1)
        yield proc.pid
    finally:
        for sig, wait in ((signal.SIGTERM, 15), (signal.SIGKILL, 10)):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, sig)
            try:
                proc.wait(timeout=wait)
                break
            except subprocess.TimeoutExpired:
                continue
