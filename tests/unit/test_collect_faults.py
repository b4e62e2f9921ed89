"""What the controller's collector (trtsweep.fleet.collect) does with what goes wrong on the way from a host: a broken
journal line is a warning and the collection goes on; an archive that cannot be unpacked or fetched fails its point
in one line, not the host; a record that cannot be written ends the host's collection (ControllerFailed); giving a
host up keeps the cause for its unfinished points and ends its heartbeat; action plugin trtsweep_lanes gives a host up
(and removes its lease over the connection when it still answers) whenever its collection ends before its lanes did.

Fails on a collector that let a broken archive's tarfile error (or a fetch's) abort the collection of the host, and
that left the heartbeat of a host it gave up beating (its runner went on running points nobody collected)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import wait_for
from tests.unit.test_journal_runner_start import lanes_plugin
from trtsweep.common.procs import alive, start_ticks
from trtsweep.errors import TrtsweepError
from trtsweep.fleet import status
from trtsweep.fleet.collect import Collector, ControllerFailed, FetchFailed

RUN = "run-1"
LANE = "h--lane0"


def plan(*ids: str) -> dict[str, Any]:
    points = [{"id": i, "sweep": "s", "host": "h", "lane": LANE, "benchmark": {"input_data": "p.jsonl"}} for i in ids]
    return {"run_id": RUN, "sweep": "s", "points": points,
            "lanes": [{"name": LANE, "host": "h", "ports": {}, "points": list(ids)}]}  # fmt: skip


def start(point: str) -> dict[str, Any]:
    return {"event": "start", "point": point, "t": 1.0}


def end(point: str, archive: str | None, state: str = "ok") -> dict[str, Any]:
    return {"event": "end", "point": point, "status": state, "stage": "benchmark", "archive": archive,
            "failure": {"msg": "boom"} if state == "failed" else None, "failed_task": None,
            "stage_times": {"preflight": 1.0, "end": 2.0}}  # fmt: skip


def copy(remote: str, local: Path) -> None:
    local.parent.mkdir(parents=True, exist_ok=True)
    local.write_bytes(Path(remote).read_bytes())


def good_archive(tmp_path: Path) -> Path:
    (tmp_path / "host").mkdir(exist_ok=True)
    (tmp_path / "host" / "llm_perf.summary.json").write_text("{}")
    archive = tmp_path / "good.tar.gz"
    subprocess.run(["tar", "-czf", str(archive), "-C", str(tmp_path / "host"), "."], check=True)
    return archive


def test_a_broken_journal_line_is_a_warning_of_the_run_and_of_the_lanes_point_and_the_point_ends_ok(tmp_path):
    results = tmp_path / "results"
    collector = Collector(results, plan("a"), "h")
    broken = {"event": "broken", "offset": 120, "text": '{"event": "sta'}
    collector.take({LANE: [start("a"), broken, end("a", str(good_archive(tmp_path))), {"event": "lane_end"}]}, copy)
    said = f"""h: a broken line of journal {LANE} (byte 120) was skipped: '{{"event": "sta'"""
    record = status.read(results, "a")
    assert record is not None and (record["status"], record["cause"], record["warnings"]) == ("ok", None, [said])
    assert collector.warnings == [said] and collector.done()
    progress = json.loads((results / ".run" / "progress-h.json").read_text())
    assert progress["warnings"] == [said]


@pytest.mark.parametrize("content", [b"not an archive", b"\x1f\x8b\x08\x00cut short"])
def test_an_archive_that_cannot_be_unpacked_fails_its_point_in_one_line_and_the_next_point_is_collected(
    tmp_path, content
):
    results = tmp_path / "results"
    collector = Collector(results, plan("a", "b"), "h")
    broken = tmp_path / "broken.tar.gz"
    broken.write_bytes(content)
    events = [start("a"), end("a", str(broken)), start("b"), end("b", str(good_archive(tmp_path)))]
    collector.take({LANE: [*events, {"event": "lane_end"}]}, copy)
    a, b = status.read(results, "a"), status.read(results, "b")
    assert a is not None and (a["status"], a["stage"]) == ("failed", "benchmark")
    assert a["cause"].startswith("results archive: could not be unpacked (") and "\n" not in a["cause"]
    assert b is not None and b["status"] == "ok"
    assert collector.summary()["points_failed"] == ["a"] and not list((results / ".fetched").iterdir())


def test_an_archive_that_cannot_be_fetched_fails_its_point_and_a_failed_point_keeps_its_own_cause(tmp_path):
    results = tmp_path / "results"
    collector = Collector(results, plan("a", "b"), "h")

    def fetch(remote: str, local: Path) -> None:
        raise FetchFailed(f"file or module does not exist: {remote}\nmore")

    collector.take({LANE: [start("a"), end("a", "/w/a.tar.gz"), start("b"), end("b", "/w/b.tar.gz", "failed")]},
                   fetch)  # fmt: skip
    a, b = status.read(results, "a"), status.read(results, "b")
    assert a is not None and a["status"] == "failed"
    assert a["cause"] == "results archive: could not be fetched from h:/w/a.tar.gz (file or module does not exist: " \
                         "/w/a.tar.gz)"  # fmt: skip
    assert b is not None and (b["status"], b["cause"]) == ("failed", "boom")
    assert b["warnings"] == ["results archive: could not be fetched from h:/w/b.tar.gz (file or module does not exist: "
                             "/w/b.tar.gz)"]  # fmt: skip


def test_a_record_that_cannot_be_written_ends_the_hosts_collection_in_one_line(tmp_path, monkeypatch):
    collector = Collector(tmp_path / "results", plan("a"), "h")

    def full(results_dir: Path, record: dict[str, Any]) -> Path:
        raise TrtsweepError(f"{results_dir}/a/status.json: no space left on device: writing 300 bytes, 0 bytes free "
                            "(No space left on device)")  # fmt: skip

    monkeypatch.setattr(status, "write", full)
    with pytest.raises(ControllerFailed, match=r"^the controller could not record what h sent: .*No space left"):
        collector.take({LANE: [start("a")]}, copy)


@pytest.fixture
def heartbeat(tmp_path: Path) -> Any:
    """A stand-in heartbeat (a process of the test's own) with its record where trtsweep_heartbeat writes it."""
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    wait_for(lambda: start_ticks(proc.pid) is not None, 5)
    record = {"heartbeat": [proc.pid, start_ticks(proc.pid)], "controller": [1, None], "log": "l", "lease_file": "x"}
    (tmp_path / "results" / ".run").mkdir(parents=True)
    (tmp_path / "results" / ".run" / "heartbeat-h.json").write_text(json.dumps(record))
    yield proc
    proc.kill()
    proc.wait()


def test_giving_a_host_up_ends_its_heartbeat_and_its_unfinished_points_are_lost_with_the_cause(tmp_path, heartbeat):
    results = tmp_path / "results"
    the_plan = plan("a", "b")
    collector = Collector(results, the_plan, "h")
    collector.take({LANE: [start("a")]}, copy)
    collector.give_up("h: reading the lanes' journals failed (status 1): MemoryError")
    heartbeat.wait(timeout=15)  # ended (TERM), not left beating for a host nobody collects
    assert not alive(heartbeat.pid, None) and collector.done()
    records = {r["point"]: r for r in status.close_run(results, the_plan)}
    cause = "h: reading the lanes' journals failed (status 1): MemoryError"
    assert (records["a"]["status"], records["a"]["cause"]) == ("lost", f"{cause} (during stage preflight)")
    assert (records["b"]["status"], records["b"]["cause"]) == ("lost", f"{cause} (before the point started)")


def test_a_runner_death_ends_the_hosts_heartbeat_too(tmp_path, heartbeat):
    collector = Collector(tmp_path / "results", plan("a"), "h")
    collector.take_runner_death(["this python will not run trtsweep.lane"], "(pid 7) ended before it registered")
    heartbeat.wait(timeout=15)
    assert collector.done()
    cause = json.loads((tmp_path / "results" / ".run" / "runner-h.json").read_text())["cause"]
    assert cause == ("the lane runner on h (pid 7) ended before it registered "
                     "(runner.log: this python will not run trtsweep.lane)")  # fmt: skip


class Host:
    """Action plugin trtsweep_lanes's collection (`_collect`) against a host that answers with `polls` (one a poll,
    an exception raised), recording every command it sends."""

    def __init__(self, polls: list[Any]) -> None:
        self.action = lanes_plugin().ActionModule.__new__(lanes_plugin().ActionModule)
        self.polls, self.sent = polls, []
        self.action._poll = self.poll
        self.action._remote = lambda argv, what: self.sent.append(argv) or ""
        self.action._fetch = copy
        self.action._refresh_report = lambda *args: None
        self.action._keep_heartbeat = lambda *args: None  # (action plugin trtsweep_heartbeat: tested on its own)

    def poll(self, python: str, folder: str, offsets: dict[str, int], wait_s: float = 15.0) -> dict[str, Any]:
        answer = self.polls[0] if len(self.polls) == 1 else self.polls.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    def collect(self, collector: Collector) -> dict[str, Any]:
        spec = {"journal_dir": "/w/s/.runs/run-1-h", "lease_file": "/w/.leases/run-1-h.lease"}
        return self.action._collect(collector, "python3", spec, {"results_dir": "r", "unreachable_after_s": 0.5}, {})


LEASE_GONE = ["rm", "-f", "--", "/w/.leases/run-1-h.lease"]
SPEC_GONE = ["rm", "-f", "--", "/w/s/.runs/run-1-h/host.json"]


def polled(*events: dict[str, Any], **more: Any) -> dict[str, Any]:
    return {"events": {LANE: list(events)} if events else {}, "offsets": {}, "runner_alive": True, **more}


def test_a_host_whose_polls_keep_failing_is_given_up_and_stopped_its_heartbeat_ended_its_lease_removed(
    tmp_path, heartbeat
):
    host = Host([polled(start("a")), RuntimeError("reading the lanes' journals failed (status 1): MemoryError")])
    out = host.collect(Collector(tmp_path / "results", plan("a", "b"), "h"))
    assert out["failed"] and out["msg"] == "h: reading the lanes' journals failed (status 1): MemoryError"
    assert out["points_unfinished"] == ["a", "b"]
    heartbeat.wait(timeout=15)
    assert LEASE_GONE in host.sent and SPEC_GONE in host.sent


def test_a_controller_that_cannot_record_gives_the_host_up_at_once_and_stops_it(tmp_path, heartbeat, monkeypatch):
    def full(results_dir: Path, record: dict[str, Any]) -> Path:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(status, "write", full)
    host = Host([polled(start("a"))])
    out = host.collect(Collector(tmp_path / "results", plan("a"), "h"))
    assert out["failed"] and out["msg"] == ("h: the controller could not record what h sent: "
                                            "[Errno 28] No space left on device")  # fmt: skip
    heartbeat.wait(timeout=15)
    assert LEASE_GONE in host.sent


def test_a_host_that_stays_unreachable_is_stopped_by_its_heartbeat_and_ansibles_failure_is_raised(tmp_path, heartbeat):
    from ansible.errors import AnsibleConnectionFailure

    host = Host([AnsibleConnectionFailure("Failed to connect to the host via ssh")])
    with pytest.raises(AnsibleConnectionFailure):
        host.collect(Collector(tmp_path / "results", plan("a"), "h"))
    heartbeat.wait(timeout=15)
    assert host.sent == []  # nothing more is sent over a link that is down: the lease lapses within its TTL


def test_a_runner_that_died_stops_the_host(tmp_path, heartbeat):
    dead = polled(runner_alive=False, runner_ended="(pid 7) ended before it registered", runner_log=["no python"])
    host = Host([dead])
    out = host.collect(Collector(tmp_path / "results", plan("a"), "h"))
    assert out["points_unfinished"] == ["a"] and not out.get("failed")
    heartbeat.wait(timeout=15)
    assert LEASE_GONE in host.sent and SPEC_GONE in host.sent


def test_a_host_whose_lanes_ended_keeps_its_heartbeat_and_loses_its_host_spec(tmp_path, heartbeat):
    host = Host([polled(start("a"), end("a", str(good_archive(tmp_path))), {"event": "lane_end"})])
    out = host.collect(Collector(tmp_path / "results", plan("a"), "h"))
    assert out["points_ok"] == ["a"] and host.sent == [SPEC_GONE]
    assert heartbeat.poll() is None


class Hung(RuntimeError):
    """A poll over a link that just went down: it hangs until ssh's keep-alives end it, then fails."""

    def __init__(self, seconds: float) -> None:
        super().__init__("Shared connection to 169.254.77.12 closed.")
        self.seconds = seconds


def test_a_poll_that_hung_counts_toward_giving_the_host_up(tmp_path, heartbeat):
    polls: list[Any] = [polled(start("a")), Hung(2.5), RuntimeError("ssh: connect to host: Connection timed out")]
    host = Host(polls)
    hung = host.poll

    def poll(python: str, folder: str, offsets: dict[str, int], wait_s: float = 15.0) -> dict[str, Any]:
        if isinstance(host.polls[0], Hung):
            time.sleep(host.polls.pop(0).seconds)
            raise RuntimeError("Shared connection to 169.254.77.12 closed.")
        return hung(python, folder, offsets)

    host.action._poll = poll
    spec = {"journal_dir": "/w/s/.runs/run-1-h", "lease_file": "/w/.leases/run-1-h.lease"}
    began = time.monotonic()
    out = host.action._collect(Collector(tmp_path / "results", plan("a"), "h"), "python3", spec,
                               {"results_dir": "r", "unreachable_after_s": 3}, {})  # fmt: skip
    given_up = time.monotonic() - began
    assert out["failed"] and "Connection timed out" in out["msg"]
    # 3 s without an answer (2.5 s of it in the hung poll), asked again once: given up at about 3.5 s, not 2.5 + 3
    assert 3.0 < given_up < 5.0, given_up
    heartbeat.wait(timeout=15)
