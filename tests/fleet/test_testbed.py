"""The fleet test bed itself: real hosts (network namespaces with their own sshd) reached over real SSH."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tests.fleet.conftest import require_testbed
from tests.fleet.testbed import (
    REPO,
    TestBed,
    TestBedError,
    ansible_ping,
    load_state,
    resources_left,
)

VENV_BIN = Path(sys.executable).parent


def _netns_names() -> list[str]:
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=True).stdout
    return [line.split()[0] for line in out.splitlines() if line.strip()]


def _link_names() -> list[str]:
    out = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True, check=True).stdout
    return [line.split(":")[1].strip().split("@")[0] for line in out.splitlines() if line.strip()]


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[-1].split()[0] != "Z"


def _assert_nothing_left(prefix: str, tmp_dir: Path, pids: list[int]) -> None:
    assert [ns for ns in _netns_names() if ns.startswith(prefix)] == []
    assert [link for link in _link_names() if link.startswith(prefix)] == []
    assert [pid for pid in pids if _alive(pid)] == []
    assert resources_left(load_state(tmp_dir)) == []


def test_ssh_reaches_each_host_through_its_own_network_stack(testbed: TestBed) -> None:
    others = {host.address for host in testbed.hosts}
    for host in testbed.hosts:
        proc = testbed.ssh(host, "ip", "-4", "-o", "addr", "show")
        assert proc.returncode == 0, proc.stderr
        assert f"inet {host.address}/" in proc.stdout
        assert "inet 127.0.0.1/8" in proc.stdout
        assert [addr for addr in others - {host.address} if f"inet {addr}/" in proc.stdout] == []
        assert testbed.ssh(host, "cat", "/proc/self/net/dev").stdout.count("eth0:") == 1


def test_ansible_pings_every_host_over_ssh(testbed: TestBed) -> None:
    statuses, proc = ansible_ping(testbed.inventory_path)
    assert statuses == {"h1": "SUCCESS", "h2": "SUCCESS", "h3": "SUCCESS"}, proc.stdout + proc.stderr


def test_cut_host_is_unreachable_and_restore_brings_it_back(testbed: TestBed) -> None:
    host = testbed.host("h2")
    statuses, proc = ansible_ping(testbed.inventory_path)  # also leaves a ControlPersist master to go stale
    assert statuses == {"h1": "SUCCESS", "h2": "SUCCESS", "h3": "SUCCESS"}, proc.stdout + proc.stderr
    host.cut()
    try:
        started = time.monotonic()
        statuses, proc = ansible_ping(testbed.inventory_path)
        elapsed = time.monotonic() - started
        assert statuses == {"h1": "SUCCESS", "h2": "UNREACHABLE!", "h3": "SUCCESS"}, proc.stdout + proc.stderr
        # ansible.cfg's ssh_args come before the bed's own options (ssh keeps the first): the stale master gives up
        # after ServerAliveInterval 5 x ServerAliveCountMax 3, then the direct attempt after ConnectTimeout 10
        assert elapsed < 40, f"a cut host took {elapsed:.1f} s to be reported unreachable"
    finally:
        host.restore()
    deadline = time.monotonic() + 30
    while True:
        statuses, proc = ansible_ping(testbed.inventory_path, pattern="h2")
        if statuses == {"h2": "SUCCESS"} or time.monotonic() > deadline:
            break
        time.sleep(1)
    assert statuses == {"h2": "SUCCESS"}, proc.stdout + proc.stderr


def test_hosts_reproduce_the_bashrc_trap_of_gpu_hosts(testbed: TestBed) -> None:
    """Over SSH a child bash reads the host's own ~/.bashrc, which puts a bare Python first on PATH."""
    venv_path = f"PATH={VENV_BIN}:/usr/local/bin:/usr/bin:/bin"
    for host in testbed.hosts:
        assert testbed.ssh(host, "printenv", "HOME").stdout.strip() == str(host.home)
        assert testbed.ssh(host, "printenv", "SSH_CLIENT").stdout.split()[0] == testbed.bridge_address
        plain = testbed.ssh(host, "bash", "-c", "command -v python3")
        assert plain.stdout.strip() == str(host.bare_bin / "python3"), plain.stderr
        # what a server started from the venv hands to its children's `bash -c`: the venv first, yet the bare
        # python wins because SSH_CLIENT is inherited ...
        trapped = testbed.ssh(host, "env", venv_path, "bash", "-c", 'python3 -c "import sys; print(sys.prefix)"')
        assert trapped.stdout.strip() == "/usr", trapped.stderr
        # ... and without SSH_CLIENT the same command keeps the venv
        clean = testbed.ssh(host, "env", "-u", "SSH_CLIENT", venv_path, "bash", "-c", "command -v python3")
        assert clean.stdout.strip() == str(VENV_BIN / "python3"), clean.stderr


def test_each_host_has_its_own_loopback(testbed: TestBed, tmp_path: Path) -> None:
    """Two hosts bind 127.0.0.1:8000 at the same time and each reaches its own listener."""
    script = textwrap.dedent(
        """\
        import pathlib, socket, sys, time
        marks = pathlib.Path(sys.argv[1])
        server = socket.socket()
        server.bind(("127.0.0.1", 8000))
        server.listen()
        (marks / sys.argv[2]).touch()
        deadline = time.monotonic() + 30
        while len(list(marks.iterdir())) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        client = socket.create_connection(("127.0.0.1", 8000), timeout=5)
        conn, _ = server.accept()
        conn.sendall(sys.argv[2].encode())
        print(len(list(marks.iterdir())), client.recv(16).decode())
        """
    )
    marks = tmp_path / "bound"
    marks.mkdir()
    procs = {
        name: subprocess.Popen(
            testbed.ssh_command(name, "python3", "-c", script, str(marks), name),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for name in ("h1", "h2")
    }
    results = {name: proc.communicate(timeout=60) for name, proc in procs.items()}
    for name, (out, err) in results.items():
        assert out.split() == ["2", name], err


def test_teardown_leaves_no_namespace_link_or_process(tmp_path: Path) -> None:
    require_testbed()
    with TestBed(tmp_path, count=2) as bed:
        sshd_pids = [pid for pid in (host.sshd_pid() for host in bed.hosts) if pid is not None]
        assert len(sshd_pids) == 2 and all(_alive(pid) for pid in sshd_pids)
        assert {f"{bed.prefix}h1", f"{bed.prefix}h2"} <= set(_netns_names())
        started = _background_sleep(bed)
        assert _alive(started)
    _assert_nothing_left(bed.prefix, tmp_path, [*sshd_pids, started])


def _background_sleep(bed: TestBed) -> int:
    """A process left running on h1 by an SSH session (as a server started with nohup would be)."""
    proc = bed.ssh("h1", "bash", "-c", "setsid sleep 600 </dev/null >/dev/null 2>&1 & echo $!")
    assert proc.returncode == 0, proc.stderr
    return int(proc.stdout.strip())


def test_setup_failing_halfway_removes_what_it_made(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    require_testbed()
    original = TestBed._start_sshd

    def start_sshd(self: TestBed, host: object) -> None:
        if getattr(host, "name", "") == "h2":
            raise TestBedError("injected failure")
        original(self, host)  # type: ignore[arg-type]

    monkeypatch.setattr(TestBed, "_start_sshd", start_sshd)
    bed = TestBed(tmp_path, count=3)
    with pytest.raises(TestBedError, match="injected failure"):
        bed.start()
    assert load_state(tmp_path)["sshd"], "h1's sshd was started before the failure"
    pid = bed.hosts[0].sshd_pid()
    _assert_nothing_left(bed.prefix, tmp_path, [pid] if pid else [])


def test_cli_up_leaves_a_bed_running_and_down_removes_it(tmp_path: Path) -> None:
    require_testbed()
    cli = [sys.executable, "-m", "tests.fleet.testbed"]
    up = subprocess.run([*cli, "up", str(tmp_path), "--count", "1"], capture_output=True, text=True, cwd=REPO)
    assert up.returncode == 0, up.stderr
    try:
        assert Path(up.stdout.strip()) == tmp_path / "inventory.yml"
        state = load_state(tmp_path)
        assert state["status"] == "up"
        assert resources_left(state) != []
        statuses, proc = ansible_ping(tmp_path / "inventory.yml")
        assert statuses == {"h1": "SUCCESS"}, proc.stdout + proc.stderr
        pid = int((tmp_path / "h1" / "sshd.pid").read_text())
    finally:
        down = subprocess.run([*cli, "down", str(tmp_path)], capture_output=True, text=True, cwd=REPO)
    assert down.returncode == 0, down.stderr
    _assert_nothing_left(state["prefix"], tmp_path, [pid])


def test_sigterm_removes_the_bed_and_still_terminates(tmp_path: Path) -> None:
    require_testbed()
    program = textwrap.dedent(
        """\
        import sys, time
        from pathlib import Path
        from tests.fleet.testbed import TestBed
        bed = TestBed(Path(sys.argv[1]), count=1)
        with bed:
            print("up", flush=True)
            time.sleep(120)
        """
    )
    proc = subprocess.Popen([sys.executable, "-c", program, str(tmp_path)], stdout=subprocess.PIPE, text=True, cwd=REPO)
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "up"
    state = load_state(tmp_path)
    pid = int((tmp_path / "h1" / "sshd.pid").read_text())
    assert _alive(pid)
    os.kill(proc.pid, signal.SIGTERM)
    assert proc.wait(timeout=60) == -signal.SIGTERM  # the previous (default) handler ran after the cleanup
    _assert_nothing_left(state["prefix"], tmp_path, [pid])
