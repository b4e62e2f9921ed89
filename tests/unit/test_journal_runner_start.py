"""A lane runner that dies before it registers (trtsweep.lane.journal's poll, the start of action plugin
trtsweep_lanes): the start records the runner's own pid, and the poll judges an unregistered runner by it, with a
deadline.

Fails on a poll that only knew a registered runner: one that died before registering (a Python that cannot import
trtsweep, a full disk) was "not started yet" forever, and the run hung."""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

from tests.conftest import ROOT, wait_for
from trtsweep.common.procs import alive
from trtsweep.lane import journal


def lanes_plugin() -> ModuleType:
    spec = importlib.util.spec_from_file_location("trtsweep_lanes", ROOT / "action_plugins" / "trtsweep_lanes.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@contextlib.contextmanager
def started(folder: Path, argv: list[str]) -> Iterator[int]:
    """The start command run as a session leader would run it (an ssh or local task's shell); yields the pid it
    printed; the process is killed at the end."""
    command = lanes_plugin().start_command(argv, str(folder / journal.RUNNER_LOG), str(folder / journal.RUNNER_PID))
    done = subprocess.run(command, capture_output=True, text=True, check=True, start_new_session=True, timeout=30)
    pid = int(done.stdout.strip().splitlines()[-1])
    try:
        yield pid
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def spec_file(tmp_path: Path) -> Path:
    path = tmp_path / journal.SPEC_FILE
    path.write_text("{}")
    return path


def test_the_start_gives_the_runners_own_pid_detached_in_a_session_of_its_own(tmp_path):
    spec = spec_file(tmp_path)
    with started(tmp_path, [sys.executable, "-c", "import time; time.sleep(60)", str(spec)]) as pid:
        assert int((tmp_path / journal.RUNNER_PID).read_text()) == pid
        wait_for(lambda: str(spec).encode() in Path(f"/proc/{pid}/cmdline").read_bytes()
                 and b"setsid" not in Path(f"/proc/{pid}/cmdline").read_bytes(), 10)  # fmt: skip
        assert os.getsid(pid) == pid  # its own session: the task's shell ending does not end it
        assert spec.stat().st_mode & 0o777 == 0o600
        polled = journal.poll(tmp_path, {}, wait_s=0)
        assert polled["runner_alive"] is True  # alive, not registered yet


def test_a_runner_that_died_before_it_registered_is_not_alive_with_its_last_words(tmp_path):
    spec = spec_file(tmp_path)
    refuse = "echo 'this python will not run trtsweep.lane' >&2; exit 1"
    with started(tmp_path, ["/bin/sh", "-c", refuse, "python", str(spec)]) as pid:
        wait_for(lambda: not alive(pid, None), 10)
        polled = journal.poll(tmp_path, {}, wait_s=5)  # at once: a dead runner is not waited for
    assert polled["runner_alive"] is False
    assert polled["runner_ended"] == f"(pid {pid}) ended before it registered"
    assert polled["runner_log"] == ["this python will not run trtsweep.lane"]


def test_a_pid_that_is_not_this_runs_runner_is_not_taken_for_it(tmp_path, sleeper):
    spec_file(tmp_path)
    (tmp_path / journal.RUNNER_PID).write_text(f"{sleeper.pid}\n")  # a pid used again by another process
    state = journal.runner_state(tmp_path)
    assert state == (False, f"(pid {sleeper.pid}) ended before it registered")
    assert sleeper.poll() is None  # and left alone


def test_a_runner_that_does_not_register_in_time_is_ended(tmp_path):
    spec = spec_file(tmp_path)
    with started(tmp_path, [sys.executable, "-c", "import time; time.sleep(60)", str(spec)]) as pid:
        wait_for(lambda: b"setsid" not in Path(f"/proc/{pid}/cmdline").read_bytes(), 10)
        assert journal.runner_state(tmp_path, register_s=60) == (True, "")
        assert journal.runner_state(tmp_path, register_s=0) == (
            False, f"(pid {pid}) had not registered 0 s after its start and was ended")  # fmt: skip
        wait_for(lambda: not alive(pid, None), 10)


def test_a_registered_runner_is_judged_by_its_record(tmp_path):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    (tmp_path / journal.RUNNER_PID).write_text(f"{os.getpid()}\n")
    (tmp_path / journal.RUNNER_FILE).write_text(json.dumps({"pid": dead.pid, "ticks": None}))
    assert journal.runner_state(tmp_path) == (False, "ended before its lanes did")
    (tmp_path / "started").mkdir()
    assert journal.runner_state(tmp_path / "started") == (None, "")  # its folder made, the runner not started yet
    gone = journal.runner_state(tmp_path / "none")  # the folder removed (or never there): nothing can go on
    assert gone == (False, f"lost its run folder {tmp_path / 'none'} (removed while the run went on)")
