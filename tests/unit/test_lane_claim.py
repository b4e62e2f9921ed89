"""A host's claim on a sweep (trtsweep.lane.claim): one run of a sweep on a machine at a time, whichever controller
started it; another run's claim judged by its lease (renewed: a live run, refused at once; not renewed: an ended
run's runner winding down, waited for up to the bound)."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

from trtsweep.lane import claim


def renewing(lease: Path, stop: threading.Event) -> threading.Thread:
    def beat() -> None:
        count = 0
        while not stop.wait(0.2):
            count += 1
            lease.write_text(str(count))

    thread = threading.Thread(target=beat, daemon=True)
    thread.start()
    return thread


def test_a_live_runs_claim_refuses_another_run_and_an_ended_runs_is_waited_for(tmp_path):
    where = claim.folder(tmp_path / "work", "sweep", "node1")
    lease = tmp_path / "run-a.lease"
    lease.write_text("0")
    held, why = claim.take(where, "run-a", "h1", {"pid": 1, "host": "node1", "lease_file": str(lease)}, 5)
    assert held is not None and why == ""
    stop = threading.Event()
    renewing(lease, stop)
    try:
        started = time.monotonic()
        refused, why = claim.take(where, "run-b", "h1", {"pid": 2, "host": "node1", "lease_file": "x"}, 30)
        assert refused is None and time.monotonic() - started < 5  # the lease renewed: at once, not after 30 s
        assert why.startswith("run run-a (runner pid 1 on node1 since ") and why.endswith(
            ", its lease renewed by its controller: a live run"), why  # fmt: skip
    finally:
        stop.set()
    # run a ended (its lease removed); its runner lets go a second later: run b waits for it, then holds the claim
    lease.unlink()
    threading.Timer(1.0, os.close, [held]).start()
    started = time.monotonic()
    taken, why = claim.take(where, "run-b", "h1", {"pid": 2, "host": "node1", "lease_file": "x"}, 30)
    assert taken is not None and why == "" and 0.5 < time.monotonic() - started < 10
    assert sorted(p.name for p in where.iterdir()) == ["run-b--h1.lock"]  # run a's claim, nobody's now, removed
    # the same run's runners of other inventory hosts on this machine (a shared-home bed) do not exclude each other
    also, why = claim.take(where, "run-b", "h2", {"pid": 3, "host": "node1", "lease_file": "x"}, 5)
    assert also is not None, why
    # a run whose holder never lets go and never renews: refused after the bound, saying so
    stuck, why = claim.take(where, "run-c", "h1", {"pid": 4, "host": "node1", "lease_file": "x"}, 1)
    assert stuck is None and why.endswith(", which did not let go within 1 s"), why
    for fd in (taken, also):
        os.close(fd)
