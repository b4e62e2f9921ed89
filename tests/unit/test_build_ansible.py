"""The two build modules through the real Ansible: ansible-playbook runs tests/playbooks/build.yml (the
quantize and trtllm_build roles) against the tool doubles, twice; the second run changes nothing."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.unit import build_env
from trtsweep.common.procs import running

ROOT = Path(__file__).resolve().parents[2]
PROMPTS = ROOT / "data" / "prompts.jsonl"
SECRET = "hf_PlAyBoOkSeCrEt42"


def playbook_argv(fake: build_env.FakeTrtllm, tmp_path: Path, *extra: str) -> list[str]:
    extravars = {
        "build_version": os.environ["TRTSWEEP_FAKE_TRTLLM_VERSION"],
        "build_model_dir": str(fake.model_dir),
        "build_trtllm_dir": str(fake.root),
        "build_trtllm_build": fake.runtime.trtllm_build,
        "build_calib_data": str(PROMPTS),
        "build_hf_token": SECRET,
        "build_cache_dir": str(fake.cache_dir),
        "build_results_dir": str(tmp_path / "results"),
    }
    return [str(Path(sys.executable).parent / "ansible-playbook"), "tests/playbooks/build.yml", "-e",
            json.dumps(extravars), *extra]  # fmt: skip


def playbook_env(tmp_path: Path) -> dict[str, str]:
    """The playbook's environment; its temporary files in the test's folder (TMPDIR: a module killed -9 leaves its
    unpacked payload there, not in the machine's /tmp)."""
    (tmp_path / "tmp").mkdir(exist_ok=True)
    return {**os.environ, "ANSIBLE_NOCOLOR": "1", "ANSIBLE_LOCAL_TEMP": str(tmp_path / "ansible-tmp"),
            "TMPDIR": str(tmp_path / "tmp")}  # fmt: skip


def playbook(fake: build_env.FakeTrtllm, tmp_path: Path, *extra: str) -> tuple[int, str]:
    proc = subprocess.run(playbook_argv(fake, tmp_path, *extra), cwd=ROOT, env=playbook_env(tmp_path),
                          capture_output=True, text=True, timeout=300, check=False)  # fmt: skip
    return proc.returncode, proc.stdout + proc.stderr


def changed(output: str) -> int:
    match = re.search(r"localhost\s+:\s+ok=\d+\s+changed=(\d+)", output)
    assert match, output[-3000:]
    return int(match.group(1))


def test_playbook_builds_then_changes_nothing(tmp_path, monkeypatch):
    fake = build_env.make(tmp_path, monkeypatch, "0.13.0")
    (tmp_path / "results").mkdir()
    rc, out = playbook(fake, tmp_path)
    assert rc == 0, out[-4000:]
    assert changed(out) == 3  # checkpoint, engine, artifacts.json
    assert [c["tool"] for c in fake.calls()] == ["convert_checkpoint.py", "trtllm-build"]
    artifacts = json.loads((tmp_path / "results" / "artifacts.json").read_text())
    assert Path(artifacts["engine_dir"], "rank1.engine").is_file()
    assert "--kv_cache_type" in json.loads((tmp_path / "results" / "trtllm_build.json").read_text())["command"]

    rc, out = playbook(fake, tmp_path)
    assert rc == 0, out[-4000:]
    assert changed(out) == 0
    assert len(fake.calls()) == 2  # nothing ran again

    rc, out = playbook(fake, tmp_path, "--check")
    assert rc == 0 and changed(out) == 0, out[-4000:]
    assert SECRET not in out and SECRET not in (tmp_path / "results" / "checkpoint.log").read_text()


def test_playbook_fails_with_one_line_on_a_bad_combination(tmp_path, monkeypatch):
    fake = build_env.make(tmp_path, monkeypatch, "0.8.0")  # no Qwen checkpoint flow before 0.9
    (tmp_path / "results").mkdir()
    rc, out = playbook(fake, tmp_path)
    assert rc != 0
    assert "int8_sq+kv_int8 for qwen on TensorRT-LLM 0.8 is not supported" in out
    assert fake.calls() == []


def test_killing_the_playbook_mid_build_rebuilds_only_that_artifact(tmp_path, monkeypatch):
    fake = build_env.make(tmp_path, monkeypatch, "0.13.0")
    (tmp_path / "results").mkdir()
    env = {**playbook_env(tmp_path), "TRTSWEEP_FAKE_FAIL": "hang:engine"}  # trtllm-build stops half-way
    run = subprocess.Popen(playbook_argv(fake, tmp_path), cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, start_new_session=True)  # fmt: skip
    tool_pid = None
    try:
        deadline = time.monotonic() + 120
        while not list(fake.cache_dir.glob("engines/*/rank0.engine")):
            assert run.poll() is None and time.monotonic() < deadline, "the build never started"
            time.sleep(0.2)
        tool_pid = fake.calls()[-1]["pid"]
        step_pid = int(Path(f"/proc/{tool_pid}/stat").read_text().split(") ")[1].split()[1])  # the module process
        os.killpg(run.pid, signal.SIGKILL)  # the whole run dies outright: the playbook ...
        os.kill(step_pid, signal.SIGKILL)  # ... and the module (Ansible runs it in a session of its own)
        run.wait()
        deadline = time.monotonic() + 10
        while running(tool_pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not running(tool_pid), "trtllm-build outlived the step that ran it"
    finally:
        if run.poll() is None:
            os.killpg(run.pid, signal.SIGKILL)
            run.wait()
        if tool_pid and running(tool_pid):
            os.kill(tool_pid, signal.SIGKILL)

    rc, out = playbook(fake, tmp_path)
    assert rc == 0, out[-4000:]
    assert [c["tool"] for c in fake.calls()] == ["convert_checkpoint.py", "trtllm-build", "trtllm-build"]
    results = tmp_path / "results"
    assert json.loads((results / "checkpoint.json").read_text())["reused"] is True
    build = json.loads((results / "trtllm_build.json").read_text())
    assert build["reused"] is False and build["removed_partial"] is True
