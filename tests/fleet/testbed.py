"""A multi-host test bed on one machine: network namespaces on a bridge, each with its own sshd.

Every host is a network namespace ``<prefix>h<N>`` with its own loopback and an ``eth0`` (one end of a veth pair
whose other end sits on a bridge in the root namespace), an address 169.254.77.x and an sshd of its own that
Ansible reaches over real SSH as root with a fresh test key. The hosts share the machine's filesystem and
processes, so each gets its own HOME, cache and work directories under the bed's directory.

Each host's HOME is redirected by its sshd (``SetEnv HOME=<tmp>/hN/home`` in its sshd_config: OpenSSH applies
an admin's SetEnv after the passwd-derived defaults, so it overrides HOME without touching /etc/passwd). That
HOME holds a ``.bashrc`` that puts a bare Python first on PATH, as ``conda init`` does on real GPU hosts: bash
reads ``~/.bashrc`` when SSH_CLIENT is set and SHLVL is below 2, so every shell that a command started over SSH
spawns sees the bare ``python3`` first.

Several beds may run at once: names carry a random token, and each bed takes a free /26 block of
169.254.77.0/24 (the first block gives the bridge 169.254.77.1 and the hosts 169.254.77.11, .12, ...), chosen
under a file lock.

Use::

    with TestBed(tmp_dir, count=3) as bed:
        inventory = bed.write_inventory()
        bed.hosts[1].cut()

or from a shell (the bed stays up until ``down``)::

    python -m tests.fleet.testbed up <tmp_dir> --count 3
    python -m tests.fleet.testbed down <tmp_dir>
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import fcntl
import ipaddress
import json
import os
import re
import secrets
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import FrameType, TracebackType
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[2]
# Debian's paths; a machine without OpenSSH installed names a relocated copy (tools/device_kit.py makes one)
SSHD = Path(os.environ.get("TRTSWEEP_BED_SSHD", "/usr/sbin/sshd"))
SFTP_SERVER = Path(os.environ.get("TRTSWEEP_BED_SFTP_SERVER", "/usr/lib/openssh/sftp-server"))
BARE_PYTHON = Path(os.environ.get("TRTSWEEP_BED_PYTHON", "/usr/bin/python3"))
NETWORK = ipaddress.IPv4Network("169.254.77.0/24")
BLOCK_PREFIX = 26
MAX_HOSTS = 50  # host addresses are block base + 10 + N, below the block's broadcast address
STATE_FILE = "testbed.json"
LOCK_FILE = Path("/run/lock/trtsweep-testbed.lock")
SSH_PORT = 22
# The bed's own ssh calls notice a cut link within ServerAliveInterval * ServerAliveCountMax (6 to 8 s) on an open
# connection and within ConnectTimeout (5 s) on a new one; Ansible's connections take ansible.cfg's ssh_args first
# (ssh keeps the first value of an option): 15 s and 10 s. Host keys are checked against the bed's own known_hosts
# file, which the bed writes from the keys it gave its hosts (as a fleet enrols its hosts' keys with ssh-keyscan).
CONNECT_TIMEOUT = 5
SSH_OPTIONS = (
    "-o UserKnownHostsFile={known_hosts} -o StrictHostKeyChecking=yes -o ConnectTimeout={timeout}"
    " -o ServerAliveInterval=2 -o ServerAliveCountMax=3"
)
BASHRC = """\
# Written by the trtsweep test bed: what `conda init` does on a real GPU host, a bare Python first on PATH.
# bash reads this file even for non-interactive commands when SSH_CLIENT is set and SHLVL is below 2.
export PATH="{bare_bin}:$PATH"
"""


class TestBedError(RuntimeError):
    """A test bed could not be created or torn down."""

    __test__ = False  # not a pytest test class


def _ip() -> str:
    for candidate in (shutil.which("ip"), "/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip"):
        if candidate and Path(candidate).is_file():
            return candidate
    raise TestBedError("no `ip` command (install iproute2)")


def _run(argv: Sequence[str], check: bool = True, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout, check=False)
    if check and proc.returncode != 0:
        raise TestBedError(f"{shlex.join(argv)} failed ({proc.returncode}): {(proc.stderr or proc.stdout).strip()}")
    return proc


def unavailable_reason() -> str | None:
    """Why hosts cannot be created on this machine, or None when they can."""
    if os.geteuid() != 0:
        return "the fleet test bed needs root (network namespaces, veth links, sshd)"
    try:
        ip = _ip()
    except TestBedError as exc:
        return str(exc)
    if not (SSHD.is_file() and os.access(SSHD, os.X_OK)):
        return f"no {SSHD} (apt-get install openssh-server)"
    for tool in ("ssh", "ssh-keygen"):
        if shutil.which(tool) is None:
            return f"no `{tool}` on PATH (apt-get install openssh-client)"
    if not BARE_PYTHON.is_file():
        return f"no bare Python at {BARE_PYTHON} for the hosts' .bashrc"
    probe = f"tswprobe{secrets.token_hex(2)}"
    try:
        added = _run([ip, "netns", "add", probe], check=False)
        if added.returncode != 0:
            return f"`ip netns add` is not permitted here: {added.stderr.strip()}"
        link = _run([ip, "link", "add", f"{probe}b", "type", "bridge"], check=False)
        if link.returncode != 0:
            return f"`ip link add ... type bridge` is not permitted here: {link.stderr.strip()}"
        pair = [ip, "link", "add", f"{probe}v", "type", "veth", "peer", "name", "eth0", "netns", probe]
        veth = _run(pair, check=False)
        if veth.returncode != 0:
            return f"`ip link add ... type veth` is not permitted here: {veth.stderr.strip()}"
    except (OSError, subprocess.SubprocessError) as exc:
        return f"cannot run `ip`: {exc}"
    finally:
        _run([ip, "link", "del", f"{probe}v"], check=False)
        _run([ip, "link", "del", f"{probe}b"], check=False)
        _run([ip, "netns", "del", probe], check=False)
    try:
        _free_block(ip)
    except TestBedError as exc:
        return str(exc)
    return None


def _used_addresses(ip: str) -> list[ipaddress.IPv4Interface]:
    out = _run([ip, "-j", "-4", "addr", "show"]).stdout
    used = []
    for link in json.loads(out or "[]"):
        for info in link.get("addr_info", []):
            if info.get("family") == "inet":
                used.append(ipaddress.IPv4Interface(f"{info['local']}/{info['prefixlen']}"))
    return used


def _free_block(ip: str) -> ipaddress.IPv4Network:
    used = [iface.network for iface in _used_addresses(ip) if iface.network.overlaps(NETWORK)]
    for block in NETWORK.subnets(new_prefix=BLOCK_PREFIX):
        if not any(block.overlaps(net) for net in used):
            return block
    raise TestBedError(f"no free /{BLOCK_PREFIX} block left in {NETWORK}: {[str(net) for net in used]} are in use")


@dataclass
class Host:
    """One test host: a network namespace with its own sshd, reached as root over SSH."""

    name: str
    index: int
    namespace: str
    veth: str
    address: str
    prefixlen: int
    root: Path
    port: int = SSH_PORT
    shared_home: Path | None = None  # one HOME for every host of the bed (NFS homes), with its default cache

    @property
    def home(self) -> Path:
        return self.shared_home or self.root / "home"

    @property
    def cache_dir(self) -> Path:
        return self.home / ".cache" / "trtsweep" if self.shared_home else self.root / "cache"

    @property
    def work_dir(self) -> Path:
        return self.cache_dir / "work"

    @property
    def bare_bin(self) -> Path:
        return self.root / "bare-bin"

    @property
    def sshd_config(self) -> Path:
        return self.root / "sshd_config"

    @property
    def pid_file(self) -> Path:
        return self.root / "sshd.pid"

    @property
    def host_key(self) -> Path:
        return self.root / "ssh_host_ed25519_key"

    @property
    def sshd_log(self) -> Path:
        return self.root / "sshd.log"

    def cut(self) -> None:
        """Take the host off the network: its link on the bridge goes down."""
        _run([_ip(), "link", "set", self.veth, "down"])

    def restore(self) -> None:
        """Put the host back on the network."""
        _run([_ip(), "link", "set", self.veth, "up"])

    def sshd_pid(self) -> int | None:
        try:
            return int(self.pid_file.read_text().strip())
        except (OSError, ValueError):
            return None


class TestBed:
    """``count`` hosts on a bridge, each a network namespace with its own sshd; a context manager."""

    __test__ = False  # not a pytest test class

    def __init__(self, tmp_dir: Path, count: int = 3, shared_home: bool = False) -> None:
        """`shared_home`: every host logs in to the same HOME (``<tmp_dir>/home``), as on a cluster whose home
        directories are on NFS, and its inventory leaves trtsweep's cache and work directories at their defaults
        (``~/.cache/trtsweep``: one for all)."""
        if not 1 <= count <= MAX_HOSTS:
            raise ValueError(f"count must be within 1..{MAX_HOSTS}, not {count}")
        self.dir = Path(tmp_dir).resolve()
        self.count = count
        self.shared_home = self.dir / "home" if shared_home else None
        self.token = secrets.token_hex(2)
        self.prefix = f"tsw{self.token}"
        self.bridge = f"{self.prefix}br"
        self.key = self.dir / "id_ed25519"
        self.authorized_keys = self.dir / "authorized_keys"
        self.known_hosts = self.dir / "known_hosts"
        self.inventory_path = self.dir / "inventory.yml"
        self.state_path = self.dir / STATE_FILE
        self.hosts: list[Host] = []
        self.bridge_address: str | None = None
        self._state: dict[str, Any] = {}
        self._started = False
        self._stopped = False
        self._previous_handlers: dict[int, Any] = {}

    # -- lifecycle --------------------------------------------------------------------------------------------

    def __enter__(self) -> TestBed:
        self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def start(self) -> TestBed:
        """Create the bridge, the hosts and their sshd; on any failure, remove what was made and raise."""
        if self._started:
            raise TestBedError("this test bed was already started")
        self._started = True
        ip = _ip()
        self.dir.mkdir(parents=True, exist_ok=True)
        self._state = {
            "version": 1,
            "status": "starting",
            "owner_pid": os.getpid(),
            "prefix": self.prefix,
            "bridge": None,
            "namespaces": [],
            "links": [],
            "sshd": [],
        }
        self._save_state()
        self._register_cleanup()
        try:
            self._setup(ip)
        except BaseException as exc:
            try:
                self.stop()
            except TestBedError as cleanup_error:
                if hasattr(exc, "add_note"):  # Python 3.11+
                    exc.add_note(str(cleanup_error))
            raise
        self._state["status"] = "up"
        self._save_state()
        return self

    def stop(self) -> None:
        """Stop every sshd (by PID file) and every process left in the hosts, remove namespaces, links and bridge."""
        if self._stopped:
            return
        self._stopped = True
        self._unregister_cleanup()
        if self._state:
            teardown(self._state)
            self._state["status"] = "down"
            with contextlib.suppress(OSError):
                self._save_state()

    def detach(self) -> None:
        """Leave the bed running after this process exits (``down`` removes it later from its state file)."""
        self._unregister_cleanup()
        self._stopped = True

    # -- setup ------------------------------------------------------------------------------------------------

    def _setup(self, ip: str) -> None:
        _keygen(self.key, f"trtsweep-testbed-{self.token}")
        self.authorized_keys.write_text(self.key.with_name(self.key.name + ".pub").read_text())
        self.authorized_keys.chmod(0o600)
        Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)  # sshd's privilege separation directory

        LOCK_FILE.parent.mkdir(parents=True, exist_ok=True)
        with LOCK_FILE.open("a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            block = _free_block(ip)
            self._state["bridge"] = self.bridge
            self._save_state()
            _run([ip, "link", "add", self.bridge, "type", "bridge"])
            self.bridge_address = str(block.network_address + 1)
            _run([ip, "addr", "add", f"{self.bridge_address}/{block.prefixlen}", "dev", self.bridge])
            _run([ip, "link", "set", self.bridge, "up"])
        self._state["block"] = str(block)

        for index in range(1, self.count + 1):
            host = Host(
                name=f"h{index}",
                index=index,
                namespace=f"{self.prefix}h{index}",
                veth=f"{self.prefix}v{index}",
                address=str(block.network_address + 10 + index),
                prefixlen=block.prefixlen,
                root=self.dir / f"h{index}",
                shared_home=self.shared_home,
            )
            self.hosts.append(host)
            self._make_host(ip, host)
        for host in self.hosts:
            self._start_sshd(host)
        deadline = time.monotonic() + 20
        for host in self.hosts:
            _wait_listening(host, deadline)
        self.enrol()
        self.write_inventory()

    def enrol(self) -> None:
        """Write every host's current key into the bed's known_hosts (again after a `rekey`)."""
        lines = []
        for host in self.hosts:
            # what an operator runs to enrol a host: ssh-keyscan would give the same line

            kind, key = host.host_key.with_name(host.host_key.name + ".pub").read_text().split()[:2]
            name = host.address if host.port == SSH_PORT else f"[{host.address}]:{host.port}"
            lines.append(f"{name} {kind} {key}\n")
        self.known_hosts.write_text("".join(lines))

    def rekey(self, host: Host) -> None:
        """Give the host a new host key (its sshd restarted with it); known_hosts keeps the old one."""
        pid = host.sshd_pid()
        if pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
            deadline = time.monotonic() + 10
            while _alive(pid) and time.monotonic() < deadline:
                time.sleep(0.1)
        for path in (host.host_key, host.host_key.with_name(host.host_key.name + ".pub")):
            path.unlink(missing_ok=True)
        _keygen(host.host_key, f"{host.name}-rekeyed@trtsweep-testbed")
        _run([_ip(), "netns", "exec", host.namespace, str(SSHD), "-f", str(host.sshd_config), "-E", str(host.sshd_log)])
        _wait_listening(host, time.monotonic() + 20)

    def _make_host(self, ip: str, host: Host) -> None:
        for directory in (host.root, host.home, host.cache_dir, host.work_dir, host.bare_bin):
            directory.mkdir(parents=True, exist_ok=True)
        python = host.bare_bin / "python3"
        if not python.is_symlink():
            python.symlink_to(BARE_PYTHON)
        (host.home / ".bashrc").write_text(BASHRC.format(bare_bin=host.bare_bin))

        self._state["namespaces"].append(host.namespace)
        self._state["links"].append(host.veth)
        self._save_state()
        _run([ip, "netns", "add", host.namespace])
        _run([ip, "link", "add", host.veth, "type", "veth", "peer", "name", "eth0", "netns", host.namespace])
        _run([ip, "link", "set", host.veth, "master", self.bridge])
        _run([ip, "link", "set", host.veth, "up"])
        _run([ip, "-n", host.namespace, "addr", "add", f"{host.address}/{host.prefixlen}", "dev", "eth0"])
        _run([ip, "-n", host.namespace, "link", "set", "lo", "up"])
        _run([ip, "-n", host.namespace, "link", "set", "eth0", "up"])

    def _start_sshd(self, host: Host) -> None:
        _keygen(host.host_key, f"{host.name}@trtsweep-testbed")
        host.sshd_config.write_text(self._sshd_config(host))
        self._state["sshd"].append({"pid_file": str(host.pid_file), "config": str(host.sshd_config)})
        self._save_state()
        _run([_ip(), "netns", "exec", host.namespace, str(SSHD), "-t", "-f", str(host.sshd_config)])
        _run([_ip(), "netns", "exec", host.namespace, str(SSHD), "-f", str(host.sshd_config), "-E", str(host.sshd_log)])

    def _sshd_config(self, host: Host) -> str:
        lines = [
            f"ListenAddress {host.address}:{host.port}",
            f"HostKey {host.host_key}",
            f"PidFile {host.pid_file}",
            f"AuthorizedKeysFile {self.authorized_keys}",
            # HOME of the test's own: an admin's SetEnv overrides the passwd-derived HOME in the session
            f'SetEnv HOME="{host.home}"',
            "UsePAM no",
            "PermitRootLogin prohibit-password",
            "PubkeyAuthentication yes",
            "PasswordAuthentication no",
            "KbdInteractiveAuthentication no",
            "StrictModes no",
            "PrintMotd no",
            "PrintLastLog no",
            "UseDNS no",
            "X11Forwarding no",
            "MaxSessions 64",
            "MaxStartups 64:30:128",
            "ClientAliveInterval 5",
            "ClientAliveCountMax 3",
            "LogLevel VERBOSE",
        ]
        if SFTP_SERVER.is_file():
            lines.append(f"Subsystem sftp {SFTP_SERVER}")
        return "\n".join(lines) + "\n"

    # -- state ------------------------------------------------------------------------------------------------

    def _save_state(self) -> None:
        tmp = self.state_path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self._state, indent=2) + "\n")
        os.replace(tmp, self.state_path)

    # -- cleanup on signals and at exit ----------------------------------------------------------------------

    def _register_cleanup(self) -> None:
        atexit.register(self.stop)
        for signum in (signal.SIGTERM, signal.SIGHUP):
            with contextlib.suppress(ValueError):  # not the main thread: atexit and the context manager remain
                self._previous_handlers[signum] = signal.signal(signum, self._on_signal)

    def _unregister_cleanup(self) -> None:
        atexit.unregister(self.stop)
        for signum, previous in list(self._previous_handlers.items()):
            with contextlib.suppress(ValueError):
                if signal.getsignal(signum) == self._on_signal:
                    signal.signal(signum, previous)
                    del self._previous_handlers[signum]

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        previous = self._previous_handlers.get(signum, signal.SIG_DFL)
        self.stop()
        if callable(previous):
            previous(signum, frame)
        elif previous == signal.SIG_DFL:
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)

    # -- use --------------------------------------------------------------------------------------------------

    @property
    def ssh_options(self) -> str:
        """The ssh options every connection to a bed host uses (also ansible_ssh_common_args)."""
        return SSH_OPTIONS.format(known_hosts=self.known_hosts, timeout=CONNECT_TIMEOUT)

    @property
    def ssh_args(self) -> list[str]:
        """``ssh`` with the bed's key and options; append ``root@<address>`` and the remote command."""
        return [
            "ssh",
            "-i",
            str(self.key),
            "-o",
            "IdentitiesOnly=yes",
            "-o",
            "BatchMode=yes",
            "-o",
            "LogLevel=ERROR",
            *shlex.split(self.ssh_options),
        ]

    def ssh_command(self, host: Host | str, *argv: str) -> list[str]:
        """The ssh argument list that runs ``argv`` (quoted for the remote shell) on ``host`` as root."""
        target = self.host(host) if isinstance(host, str) else host
        command = ["--", shlex.join(argv)] if argv else []
        return [*self.ssh_args, "-p", str(target.port), f"root@{target.address}", *command]

    def ssh(self, host: Host | str, *argv: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            self.ssh_command(host, *argv), capture_output=True, text=True, timeout=timeout, check=False
        )

    def host(self, name: str) -> Host:
        for host in self.hosts:
            if name in (host.name, host.namespace, host.address):
                return host
        raise KeyError(name)

    def write_inventory(
        self,
        path: Path | None = None,
        host_vars: Mapping[str, Mapping[str, Any]] | None = None,
        group_vars: Mapping[str, Any] | None = None,
    ) -> Path:
        """An Ansible inventory with the hosts in group ``trtsweep_hosts`` (host vars per name, group vars)."""
        target = Path(path) if path is not None else self.inventory_path
        unknown = set(host_vars or {}) - {host.name for host in self.hosts}
        if unknown:
            raise KeyError(f"host vars for hosts the bed does not have: {sorted(unknown)}")
        hosts: dict[str, dict[str, Any]] = {}
        for host in self.hosts:
            hosts[host.name] = {
                "ansible_host": host.address,
                "ansible_port": host.port,
                "ansible_user": "root",
                "ansible_ssh_private_key_file": str(self.key),
                "ansible_ssh_common_args": self.ssh_options,
                # Ansible puts its own -o ConnectTimeout=<timeout> before the common args, and ssh keeps the first
                "ansible_timeout": CONNECT_TIMEOUT,
                **(
                    {}
                    if self.shared_home
                    else {"trtsweep_cache_dir": str(host.cache_dir), "trtsweep_work_dir": str(host.work_dir)}
                ),
                **dict((host_vars or {}).get(host.name, {})),
            }
        group: dict[str, Any] = {"hosts": hosts}
        if group_vars:
            group["vars"] = dict(group_vars)
        document = {"all": {"children": {"trtsweep_hosts": group}}}
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text("---\n" + yaml.safe_dump(document, sort_keys=False))
        return target


# -- helpers ----------------------------------------------------------------------------------------------------


def _keygen(path: Path, comment: str) -> None:
    if path.exists():
        return
    _run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", str(path)])


def _wait_listening(host: Host, deadline: float) -> None:
    last = "no attempt"
    while time.monotonic() < deadline:
        if host.sshd_pid() is not None:
            try:
                with socket.create_connection((host.address, host.port), timeout=1) as sock:
                    sock.settimeout(2)
                    if sock.recv(64).startswith(b"SSH-"):
                        return
            except OSError as exc:
                last = str(exc)
        time.sleep(0.05)
    log = host.sshd_log.read_text(errors="replace")[-2000:] if host.sshd_log.exists() else ""
    raise TestBedError(f"sshd of {host.name} ({host.address}:{host.port}) did not come up: {last}\n{log}")


def _netns_inode(namespace: str) -> int | None:
    try:
        return os.stat(f"/run/netns/{namespace}").st_ino
    except OSError:
        return None


def _process_netns_inode(pid: int) -> int | None:
    try:
        return os.stat(f"/proc/{pid}/ns/net").st_ino
    except OSError:
        return None


def _is_our_sshd(pid: int, config: str, namespaces: Sequence[str]) -> bool:
    """The PID still names the sshd this bed started (not a reused PID)."""
    try:
        exe = os.readlink(f"/proc/{pid}/exe")
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return False
    if Path(exe.removesuffix(" (deleted)")) != SSHD:
        return False
    inode = _process_netns_inode(pid)
    in_our_netns = inode is not None and inode in {_netns_inode(ns) for ns in namespaces}
    return config in cmdline or in_our_netns


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[-1].split()[0] != "Z"


def _terminate(pids: Sequence[int], grace: float = 5.0) -> None:
    """SIGTERM, then SIGKILL after ``grace`` seconds for what is still alive."""
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and any(_alive(pid) for pid in pids):
        time.sleep(0.05)
    for pid in pids:
        if _alive(pid):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and any(_alive(pid) for pid in pids):
        time.sleep(0.05)


def _namespace_pids(ip: str, namespace: str) -> list[int]:
    if _netns_inode(namespace) is None:
        return []
    proc = _run([ip, "netns", "pids", namespace], check=False)
    own = os.getpid()
    return [int(word) for word in proc.stdout.split() if word.isdigit() and int(word) != own]


def teardown(state: Mapping[str, Any]) -> list[str]:
    """Remove what a bed's state lists; tolerant of what is already gone. Returns the errors met (also raised)."""
    errors: list[str] = []
    try:
        ip = _ip()
    except TestBedError as exc:
        return [str(exc)]
    namespaces = list(state.get("namespaces", []))
    # 1. every sshd by its PID file (the listeners; their sessions are processes of the namespaces, below)
    sshd_pids = []
    for entry in state.get("sshd", []):
        try:
            pid = int(Path(entry["pid_file"]).read_text().strip())
        except (OSError, ValueError):
            continue
        if _is_our_sshd(pid, entry["config"], namespaces):
            sshd_pids.append(pid)
    _terminate(sshd_pids)
    # 2. what still runs inside the hosts: ssh sessions and whatever they started (servers, benchmarks)
    for _ in range(3):
        leftovers = [pid for ns in namespaces for pid in _namespace_pids(ip, ns)]
        if not leftovers:
            break
        _terminate(leftovers)
    # 3. links (deleting the root end removes the eth0 in the namespace too), namespaces, bridge
    for link in state.get("links", []):
        if Path(f"/sys/class/net/{link}").exists():
            proc = _run([ip, "link", "del", link], check=False)
            if proc.returncode != 0 and Path(f"/sys/class/net/{link}").exists():
                errors.append(f"link {link}: {proc.stderr.strip()}")
    for namespace in namespaces:
        if _netns_inode(namespace) is not None:
            proc = _run([ip, "netns", "del", namespace], check=False)
            if proc.returncode != 0:
                errors.append(f"namespace {namespace}: {proc.stderr.strip()}")
    bridge = state.get("bridge")
    if bridge and Path(f"/sys/class/net/{bridge}").exists():
        proc = _run([ip, "link", "del", bridge], check=False)
        if proc.returncode != 0:
            errors.append(f"bridge {bridge}: {proc.stderr.strip()}")
    if errors:
        raise TestBedError("test bed teardown left things behind: " + "; ".join(errors))
    return errors


def resources_left(state: Mapping[str, Any]) -> list[str]:
    """What of a bed's state still exists (namespaces, links, bridge, sshd PIDs); empty when all is gone."""
    left = [f"namespace {ns}" for ns in state.get("namespaces", []) if _netns_inode(ns) is not None]
    left += [f"link {link}" for link in state.get("links", []) if Path(f"/sys/class/net/{link}").exists()]
    bridge = state.get("bridge")
    if bridge and Path(f"/sys/class/net/{bridge}").exists():
        left.append(f"bridge {bridge}")
    for entry in state.get("sshd", []):
        with contextlib.suppress(OSError, ValueError):
            pid = int(Path(entry["pid_file"]).read_text().strip())
            if _alive(pid) and _is_our_sshd(pid, entry["config"], []):
                left.append(f"sshd {pid}")
    return left


def ansible_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """Environment for ansible / ansible-playbook run against a bed: the repo's ansible.cfg, the venv first."""
    venv_bin = Path(sys.executable).parent
    env = dict(os.environ)
    env.update(
        {
            "ANSIBLE_CONFIG": str(REPO / "ansible.cfg"),
            "ANSIBLE_STDOUT_CALLBACK": "minimal",
            "ANSIBLE_NOCOLOR": "1",
            "ANSIBLE_FORCE_COLOR": "0",
            "PATH": f"{venv_bin}{os.pathsep}{env.get('PATH', '')}",
        }
    )
    env.update(extra or {})
    return env


def ansible_bin(name: str = "ansible") -> str:
    """The ansible executable of the running interpreter's environment (the venv), else the one on PATH."""
    candidate = Path(sys.executable).parent / name
    if candidate.is_file():
        return str(candidate)
    found = shutil.which(name)
    if found is None:
        raise TestBedError(f"no `{name}` next to {sys.executable} nor on PATH")
    return found


_ADHOC_STATUS = re.compile(r"^(\S+) \| (SUCCESS|CHANGED|UNREACHABLE!|FAILED!)", re.MULTILINE)


def ansible_ping(
    inventory: Path, pattern: str = "trtsweep_hosts", timeout: float = 120
) -> tuple[dict[str, str], subprocess.CompletedProcess[str]]:
    """``ansible <pattern> -m ansible.builtin.ping``: each host's status (SUCCESS, UNREACHABLE!, FAILED!)."""
    proc = subprocess.run(
        [ansible_bin(), "-i", str(inventory), pattern, "-m", "ansible.builtin.ping"],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        cwd=REPO,
        env=ansible_env(),
    )
    return dict(_ADHOC_STATUS.findall(proc.stdout)), proc


def load_state(tmp_dir: Path) -> dict[str, Any]:
    return json.loads((Path(tmp_dir) / STATE_FILE).read_text())


@contextlib.contextmanager
def running_bed(tmp_dir: Path, count: int = 3) -> Iterator[TestBed]:
    """Function form of ``with TestBed(...)``."""
    with TestBed(tmp_dir, count) as bed:
        yield bed


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.fleet.testbed", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    up = sub.add_parser("up", help="create a bed and leave it running; prints the inventory path")
    up.add_argument("tmp_dir", type=Path)
    up.add_argument("--count", type=int, default=3)
    down = sub.add_parser("down", help="remove the bed recorded in <tmp_dir>/testbed.json")
    down.add_argument("tmp_dir", type=Path)
    args = parser.parse_args(argv)

    if args.command == "up":
        reason = unavailable_reason()
        if reason:
            print(f"test bed unavailable: {reason}", file=sys.stderr)
            return 2
        if (args.tmp_dir / STATE_FILE).exists() and load_state(args.tmp_dir).get("status") != "down":
            print(f"{args.tmp_dir} already holds a bed; run `down` first", file=sys.stderr)
            return 2
        bed = TestBed(args.tmp_dir, args.count).start()
        bed.detach()
        print(bed.inventory_path)
        for host in bed.hosts:
            print(f"# {host.name}: {shlex.join(bed.ssh_command(host))}", file=sys.stderr)
        return 0

    state = load_state(args.tmp_dir)
    try:
        teardown(state)
    except TestBedError as exc:
        print(exc, file=sys.stderr)
        return 1
    state["status"] = "down"
    (args.tmp_dir / STATE_FILE).write_text(json.dumps(state, indent=2) + "\n")
    left = resources_left(state)
    if left:
        print("left behind: " + ", ".join(left), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
