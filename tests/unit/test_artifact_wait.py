"""Lanes sharing a checkpoint (issue 23): real processes make the same artifact with the tool doubles. The second
waits for the first's lock and reuses what it made; a holder killed with -9 is taken over; another artifact never
waits. A gate in front of the tool holds the first maker inside its step until the test lets it go."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import asdict
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.unit import build_env
from trtsweep.common.procs import running
from trtsweep.toolchain import artifacts, pipeline
from trtsweep.toolchain.commands import CheckpointSpec
from trtsweep.toolchain.runner import Runtime

VERSION = "0.16.0"
DEADLINE_S = 60


def checkpoint_spec(tmp: Path, precision: str) -> CheckpointSpec:
    model = str(tmp / "models" / "Tiny-LM")
    return CheckpointSpec(family="llama", precision=precision, version=VERSION, model_dir=model, tp=2,
                          model_id="acme/tiny", model_revision="abc123")  # fmt: skip


def worker(tmp: str, precision: str, python: str) -> None:
    """One lane's quantize step in its own process (`python -c`): prints its outcome as JSON."""
    runtime = Runtime(python=python, trtllm_dir=str(Path(tmp) / "TensorRT-LLM"))
    outcome = pipeline.prepare_checkpoint(checkpoint_spec(Path(tmp), precision), Path(tmp) / "cache", runtime)
    print(json.dumps(asdict(outcome)))


def gate(tmp_path: Path) -> Path:
    """A python for the tools that records its pid, then waits for `go` before running the real one."""
    script = tmp_path / "gated-python"
    script.write_text(f'#!/bin/sh\necho $$ >> {tmp_path}/gate.pids\nwhile [ ! -e {tmp_path}/go ]; do sleep 0.05; done\n'
                      f'exec {sys.executable} "$@"\n')  # fmt: skip
    script.chmod(0o755)
    return script


def start(tmp_path: Path, precision: str, python: Path | str) -> subprocess.Popen:
    code = "import sys; from tests.unit.test_artifact_wait import worker; worker(*sys.argv[1:])"
    argv = [sys.executable, "-c", code, str(tmp_path), precision, str(python)]
    return subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def until(condition, what: str) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while not condition():
        assert time.monotonic() < deadline, f"gave up waiting: {what}"
        time.sleep(0.05)


def gated(tmp_path: Path) -> list[int]:
    pids = tmp_path / "gate.pids"
    return [int(line) for line in pids.read_text().split()] if pids.exists() else []


def waiting_on(proc: subprocess.Popen, lock_file: Path) -> bool:
    """The process has the lock file open and sleeps: it tried the lock and polls it (it must not end)."""
    if proc.poll() is not None:
        raise AssertionError(f"ended instead of waiting: {proc.communicate()[1].strip().splitlines()[-1:]}")
    try:
        fds = [os.readlink(f) for f in Path(f"/proc/{proc.pid}/fd").iterdir()]
        state = Path(f"/proc/{proc.pid}/stat").read_text().rpartition(")")[2].split()[0]
    except OSError:
        return False
    return str(lock_file) in fds and state == "S"


def finish(proc: subprocess.Popen) -> dict:
    out, err = proc.communicate(timeout=DEADLINE_S)
    assert proc.returncode == 0, err
    return json.loads(out)


@pytest.fixture
def lanes(tmp_path, monkeypatch):
    """The fake TensorRT-LLM, the gate, and the processes started (killed if a test leaves one running)."""
    fake = build_env.make(tmp_path, monkeypatch, VERSION)
    procs: list[subprocess.Popen] = []
    yield fake, gate(tmp_path), procs
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()


def two_lanes(tmp_path: Path, fake, python: str, procs: list, leave_half: bool = False):
    """The first lane makes the int8_wo checkpoint (its tool held at the gate), the second waits on its lock."""
    target = Path(pipeline.prepare_checkpoint(checkpoint_spec(tmp_path, "int8_wo"), fake.cache_dir, fake.runtime,
                                              check_mode=True).path)  # fmt: skip
    first = start(tmp_path, "int8_wo", python)
    procs.append(first)
    until(lambda: gated(tmp_path), "the first lane's tool to start")
    if leave_half:
        (target / "rank0.safetensors").write_bytes(b"half")  # what a killed tool leaves behind
    second = start(tmp_path, "int8_wo", python)
    procs.append(second)
    until(lambda: waiting_on(second, target.with_name(target.name + ".lock")), "the second lane to wait")
    return target, first, second


def test_a_second_lane_waits_for_the_checkpoint_and_reuses_it(tmp_path, lanes):
    fake, python, procs = lanes
    target, first, second = two_lanes(tmp_path, fake, python, procs)
    # another checkpoint has its own lock: made while the first is held
    other = start(tmp_path, "fp16", sys.executable)
    assert finish(other)["changed"] and first.poll() is None and second.poll() is None
    (tmp_path / "go").touch()
    made, reused = finish(first), finish(second)
    assert made["changed"] and made["path"] == reused["path"] == str(target)
    assert reused["reused"] and not reused["changed"] and reused["entry"]["duration_s"] == made["entry"]["duration_s"]
    assert reused["entry"]["waited_for"].startswith(f"pid {first.pid} on ") and reused["entry"]["waited_s"] > 0
    assert "waited_for" not in made["entry"]
    assert len(gated(tmp_path)) == 1  # the tool ran once for both lanes (and once for the other checkpoint)
    assert [c["tool"] for c in fake.calls()] == ["convert_checkpoint.py", "convert_checkpoint.py"]
    assert artifacts.marker(target) is not None


def test_a_holder_killed_with_9_is_taken_over(tmp_path, lanes):
    fake, python, procs = lanes
    target, first, second = two_lanes(tmp_path, fake, python, procs, leave_half=True)
    first.send_signal(signal.SIGKILL)
    first.communicate()
    tool = gated(tmp_path)[0]
    until(lambda: not running(tool), "the killed holder's tool to die with it")
    (tmp_path / "go").touch()
    taken = finish(second)
    assert taken["changed"] and taken["removed_partial"] and taken["path"] == str(target)
    assert taken["entry"]["waited_for"].startswith(f"pid {first.pid} on ")
    assert len(gated(tmp_path)) == 2 and [c["tool"] for c in fake.calls()] == ["convert_checkpoint.py"]
    assert (target / "rank0.safetensors").read_bytes() != b"half" and artifacts.marker(target) is not None
