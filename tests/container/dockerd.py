"""A dockerd of the tests' own: started and stopped by the tests, nothing in /etc, no systemd.

Each daemon ("bed") lives in ``/tmp/trtsweep-dockerd/bed-<token>/``: its ``data`` root (images, containers; the
daemon bind-mounts it onto itself), its ``exec`` root (its own containerd's state), ``docker.sock``, ``dockerd.pid``,
``owner.json`` (the process that started it, so that a later session can tell a bed whose owner was killed) and
``bin/`` with a stand-in ``nvidia-container-runtime-hook`` (a script that logs its arguments and exits 0), which is on
dockerd's PATH so that ``docker run --gpus ...`` is accepted and the container sees NVIDIA_VISIBLE_DEVICES. No
runtime wrapper clamps the containers' rlimits: what the product runs must meet this host's real limits.

The daemon touches nothing outside its directory: no bridge, no iptables rules, no ip_forward sysctl, cgroupfs under
a cgroup parent of its own (``/trtsweep-bed-<token>``, removed at stop), its config file and trust key (which dockerd
20.10 would otherwise write to /etc/docker/key.json) in the directory. A daemon may start seeded with the data root
that a stopped one left (``start(seed=...)``, ``Dockerd.stop(keep_data=...)``): its images without a ``docker load``.

Stopping is by PID: the containers removed through the API, then TERM (KILL after a grace), then any process left
whose command line names the directory or whose cgroup is the bed's, every mount below the directory unmounted (the
data root's, ``exec/netns/default`` where a daemon makes one, overlays a killed daemon left), the cgroups and the
directory removed. ``start`` first stops every bed whose owner is gone (a session killed before its teardown).

Use::

    bed = start()  # or start(seed=<a kept data root>)
    try:
        bed.docker("run", "--rm", image, "/bin/true")
    finally:
        bed.stop()
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from tests import beds as beds_mod
from tests.beds import locked, terminate
from tests.beds import names_bed as _names_bed
from tests.beds import read as _read
from tests.beds import start_time as _start_time

# Debian's docker.io; a standalone 28.x client may sit first on PATH (/usr/local/bin), so the client is named.
DOCKERD = Path(os.environ.get("TRTSWEEP_TEST_DOCKERD", "/usr/sbin/dockerd"))
DOCKER = Path(os.environ.get("TRTSWEEP_TEST_DOCKER", "/usr/bin/docker"))
# Short on purpose: the socket's path must fit a sockaddr_un (108 bytes). On disk, not tmpfs: image layers live here.
BEDS = Path(os.environ.get("TRTSWEEP_TEST_DOCKERD_BEDS", "/tmp/trtsweep-dockerd"))
DAEMON_PATH = "/usr/sbin:/usr/bin:/sbin:/bin"  # Debian's containerd, runc, docker-init; not /usr/local
START_TIMEOUT_S = 60.0
STOP_GRACE_S = 20.0
HOOK = """#!/bin/sh
# Stand-in for NVIDIA's OCI prestart hook (written by tests/container/dockerd.py): dockerd accepts --gpus only when
# `nvidia-container-runtime-hook` is on its PATH. It logs its arguments and exits 0; it configures no device.
echo "$*" >>"{log}"
exit 0
"""


class DockerdError(RuntimeError):
    """A test dockerd could not be started or stopped."""


def unavailable_reason() -> str | None:
    """Why a test dockerd cannot run on this machine (None when it can)."""
    if os.geteuid() != 0:
        return "a test dockerd needs root"
    for path in (DOCKERD, DOCKER):
        if not (path.is_file() and os.access(path, os.X_OK)):
            return f"no {path} (apt-get install docker.io)"
    for tool in ("containerd", "runc"):
        if shutil.which(tool, path=DAEMON_PATH) is None:
            return f"no `{tool}` on {DAEMON_PATH} (apt-get install docker.io, which brings it)"
    if shutil.which("umount") is None:
        return "no `umount` (util-linux)"
    return None


@dataclass
class Dockerd:
    """One running test dockerd: its directory, socket and the Debian client that talks to it."""

    root: Path
    process: subprocess.Popen[bytes] | None = None
    client: Path = DOCKER
    start_s: float = 0.0
    seed_s: float = 0.0  # of start_s: linking the seed's layers into the data root
    stop_s: float | None = None
    info: dict[str, object] = field(default_factory=dict)

    @property
    def socket(self) -> Path:
        return self.root / "docker.sock"

    @property
    def host(self) -> str:
        """The DOCKER_HOST value that reaches this daemon."""
        return f"unix://{self.socket}"

    @property
    def hook_log(self) -> Path:
        """Where the stand-in NVIDIA hook appends its arguments, one line per call."""
        return self.root / "nvidia-hook.log"

    @property
    def log(self) -> Path:
        return self.root / "dockerd.log"

    def env(self, base: dict[str, str] | None = None) -> dict[str, str]:
        """The environment for a docker client of this daemon: DOCKER_HOST set, the client config in the bed."""
        env = dict(os.environ if base is None else base)
        for name in ("DOCKER_CONTEXT", "DOCKER_TLS_VERIFY", "DOCKER_CERT_PATH"):
            env.pop(name, None)
        env["DOCKER_HOST"] = self.host
        env["DOCKER_CONFIG"] = str(self.root / "client")
        return env

    def argv(self, *args: str) -> list[str]:
        """The client's command line for `docker ARGS...` (the binary named: PATH may hold another)."""
        return [str(self.client), *args]

    def docker(self, *args: str, check: bool = True, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        """Run `docker ARGS...` against this daemon; raise with its stderr when it fails and `check` is set."""
        proc = subprocess.run(
            self.argv(*args), env=self.env(), capture_output=True, text=True, timeout=timeout, check=False
        )
        if check and proc.returncode != 0:
            raise DockerdError(f"docker {' '.join(args)} failed ({proc.returncode}): {proc.stderr.strip()}")
        return proc

    def containers(self) -> list[dict[str, str]]:
        """Every container of the daemon (`docker ps -a`), as its JSON fields (ID, Names, Image, State, Status...)."""
        out = self.docker("ps", "-a", "--no-trunc", "--format", "{{json .}}").stdout
        return [json.loads(line) for line in out.splitlines() if line.strip()]

    def container_names(self) -> list[str]:
        """The names of every container of the daemon, running or not."""
        return [c["Names"] for c in self.containers()]

    def stop(self, keep_data: Path | None = None) -> None:
        """Stop the daemon and remove everything of the bed (idempotent); records how long it took. With `keep_data`,
        the stopped daemon's data root (its images) is moved there first, to seed later daemons."""
        started = time.monotonic()
        stop_bed(self.root, self.process, keep_data)
        self.stop_s = time.monotonic() - started


# -- starting ---------------------------------------------------------------------------------------------------------


def start(beds: Path = BEDS, seed: Path | None = None) -> Dockerd:
    """A fresh dockerd in a bed of its own, answering on its socket; stale beds of killed sessions are stopped first.
    With `seed` (the data root a stopped daemon left, see `Dockerd.stop`), the daemon starts with its images."""
    began = time.monotonic()
    root = _new_bed(beds)
    bed = Dockerd(root=root)
    try:
        _prepare(root)
        if seed is not None:
            bed.seed_s = clone_data(seed, root / "data")
        bed.process = _launch(root)
        _wait_ready(bed)
        bed.start_s = time.monotonic() - began
        bed.info = json.loads(bed.docker("info", "--format", "{{json .}}").stdout)
    except BaseException:
        stop_bed(root, bed.process)
        raise
    return bed


def _new_bed(beds: Path) -> Path:
    """A new bed directory with its owner recorded, after stopping every bed whose owner is gone (under a lock)."""
    beds.mkdir(parents=True, exist_ok=True)
    with locked(beds / ".lock"):
        for stale in stale_beds(beds):
            stop_bed(stale)
        root = beds / f"bed-{secrets.token_hex(4)}"
        root.mkdir(mode=0o700)
        (root / "owner.json").write_text(json.dumps({"pid": os.getpid(), "start": _start_time(os.getpid())}))
    return root


def _prepare(root: Path) -> None:
    """The bed's directories, its own daemon config (so /etc/docker/daemon.json is not read) and the stand-in hook."""
    for name in ("data", "exec", "bin", "client", "tmp"):
        (root / name).mkdir(mode=0o700)
    # dockerd 20.10 writes its libtrust key to /etc/docker/key.json unless told otherwise (it has no flag for it)
    (root / "daemon.json").write_text(json.dumps({"deprecated-key-path": str(root / "key.json")}) + "\n")
    hook = root / "bin" / "nvidia-container-runtime-hook"
    hook.write_text(HOOK.format(log=root / "nvidia-hook.log"))
    hook.chmod(0o755)


def clone_data(seed: Path, data: Path) -> float:
    """Fill the empty data root `data` from `seed` (seconds taken). overlay2/ is hard-linked (the image layers' files,
    never written once committed), so that seeding a daemon with a 1.6 GB image takes seconds and removing it frees
    nothing of the seed; then each layer's own small files (`committed` is rewritten when a child layer is made) and
    everything else (bolt databases written in place) are copies."""
    began = time.monotonic()
    same_fs = seed.stat().st_dev == data.stat().st_dev
    for entry in sorted(seed.iterdir()):
        link = ["--link"] if entry.name == "overlay2" and same_fs else []
        _copy([*link, str(entry), str(data)])
    for marker in (p for p in (data / "overlay2").glob("*/*") if p.is_file() and p.stat().st_nlink > 1):
        _copy([str(marker), f"{marker}.copy"])
        os.replace(f"{marker}.copy", marker)
    return time.monotonic() - began


def _copy(args: list[str]) -> None:
    """`cp -a ARGS...` (ownership, modes, xattrs such as overlayfs' opaque markers and timestamps kept)."""
    done = subprocess.run(["cp", "-a", *args], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise DockerdError(f"cp -a {' '.join(args)} failed: {done.stderr.strip()}")


def daemon_argv(root: Path) -> list[str]:
    """dockerd's command line for the bed at `root` (see the module docstring for why each flag)."""
    return [
        str(DOCKERD),
        "--data-root", str(root / "data"),
        "--exec-root", str(root / "exec"),
        "-H", f"unix://{root / 'docker.sock'}",
        "--pidfile", str(root / "dockerd.pid"),
        "--config-file", str(root / "daemon.json"),
        "--bridge=none", "--iptables=false", "--ip6tables=false", "--ip-forward=false", "--ip-masq=false",
        "--userland-proxy=false",
        "--exec-opt", "native.cgroupdriver=cgroupfs",
        "--cgroup-parent", f"/{cgroup_parent(root)}",
    ]  # fmt: skip


def cgroup_parent(root: Path) -> str:
    """The cgroup (below each hierarchy's root) that holds the bed's containers."""
    return f"trtsweep-{root.name}"


def _launch(root: Path) -> subprocess.Popen[bytes]:
    """dockerd in a session of its own (setsid), its output in the bed's dockerd.log."""
    env = {"PATH": f"{root / 'bin'}:{DAEMON_PATH}", "HOME": str(root), "TMPDIR": str(root / "tmp")}
    with open(root / "dockerd.log", "wb") as log:
        return subprocess.Popen(
            daemon_argv(root), stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=env,
            cwd=root, start_new_session=True,
        )  # fmt: skip


def _wait_ready(bed: Dockerd) -> None:
    """Until the daemon answers /_ping on its socket; raise with its log's tail if it exits or takes too long."""
    deadline = time.monotonic() + START_TIMEOUT_S
    while not ping(bed.socket):
        if bed.process is not None and bed.process.poll() is not None:
            raise DockerdError(f"dockerd exited ({bed.process.returncode}) at start:\n{_tail(bed.log)}")
        if time.monotonic() > deadline:
            raise DockerdError(f"dockerd did not answer within {START_TIMEOUT_S:.0f} s:\n{_tail(bed.log)}")
        time.sleep(0.05)


def ping(sock_path: Path) -> bool:
    """Whether the daemon on `sock_path` answers GET /_ping with 200."""
    if not sock_path.exists():
        return False
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(2)
            sock.connect(str(sock_path))
            sock.sendall(b"GET /_ping HTTP/1.0\r\nHost: docker\r\n\r\n")
            return sock.recv(64).split(b"\r\n", 1)[0].endswith(b" 200 OK")
    except OSError:
        return False


def _tail(path: Path, lines: int = 30) -> str:
    with contextlib.suppress(OSError):
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    return "(no log)"


# -- stale beds -------------------------------------------------------------------------------------------------------


def stale_beds(beds: Path = BEDS) -> list[Path]:
    """Beds whose owner process is gone (or was never recorded)."""
    return beds_mod.stale_beds(beds)


# -- stopping ---------------------------------------------------------------------------------------------------------


def stop_bed(root: Path, process: subprocess.Popen[bytes] | None = None, keep_data: Path | None = None) -> None:
    """Stop the bed's daemon and whatever it left (by PID), unmount, remove its cgroups and directory; with
    `keep_data`, the data root is moved there (a rename on one filesystem) before the directory goes."""
    if not root.exists():
        return
    pid = _daemon_pid(root)
    if pid is not None and ping(root / "docker.sock"):
        _remove_containers(root)
    if pid is not None:
        terminate([pid], STOP_GRACE_S)
    if process is not None:
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=5)
    terminate(leftover_pids(root), 5.0)
    unmount_below(root)
    _remove_cgroups(cgroup_parent(root))
    if keep_data is not None:
        _move(root / "data", keep_data)
    shutil.rmtree(root, ignore_errors=True)
    if root.exists():
        raise DockerdError(f"could not remove {root}: {mounts_below(root) or 'not a mount: see its files'}")


def _move(src: Path, dest: Path) -> None:
    """A rename; across filesystems `cp -a` (overlayfs whiteouts are device files and opaque markers xattrs)."""
    try:
        src.rename(dest)
    except OSError:
        _copy([str(src), str(dest)])


def _daemon_pid(root: Path) -> int | None:
    """The bed's dockerd from its pid file, only when that process is still this bed's dockerd."""
    try:
        pid = int((root / "dockerd.pid").read_text().strip())
    except (OSError, ValueError):
        return None
    return pid if _names_bed(pid, root) else None


def _remove_containers(root: Path) -> None:
    """`docker rm -f` of every container of the bed, while its daemon still answers."""
    client = Dockerd(root=root)
    with contextlib.suppress(DockerdError, subprocess.TimeoutExpired):
        ids = client.docker("ps", "-aq", "--no-trunc", timeout=30).stdout.split()
        if ids:
            client.docker("rm", "-f", *ids, timeout=60)


def leftover_pids(root: Path) -> list[int]:
    """Processes of the bed still alive: command line naming its directory (dockerd, containerd, shims) or in its
    containers' cgroup."""
    own, parent = os.getpid(), f"/{cgroup_parent(root)}/"
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == own:
            continue
        pid = int(entry.name)
        if _names_bed(pid, root) or parent in _read(entry / "cgroup"):
            found.append(pid)
    return found


def mounts_below(root: Path) -> list[Path]:
    """Mount points at or below `root`, deepest first (from /proc/self/mountinfo)."""
    found = []
    for line in _read(Path("/proc/self/mountinfo")).splitlines():
        point = Path(_unescape(line.split()[4]))
        if point == root or root in point.parents:
            found.append(point)
    return sorted(set(found), key=lambda p: len(p.parts), reverse=True)


def _unescape(field_: str) -> str:
    """A mountinfo path with its octal escapes (\\040 for a space) decoded."""
    return field_.encode().decode("unicode_escape")


def unmount_below(root: Path) -> None:
    """Unmount everything at or below `root` (exec/netns/default; overlays a killed daemon left), lazily if busy."""
    for point in mounts_below(root):
        done = subprocess.run(["umount", str(point)], capture_output=True, check=False)
        if done.returncode != 0:
            subprocess.run(["umount", "-l", str(point)], capture_output=True, check=False)


def _remove_cgroups(name: str) -> None:
    """Remove the bed's cgroup parent (and any empty cgroup below it) from every hierarchy."""
    base = Path("/sys/fs/cgroup")
    for top in [base / name, *base.glob(f"*/{name}")]:
        if not top.is_dir():
            continue
        for sub in sorted((p for p in top.rglob("*") if p.is_dir()), key=lambda p: len(p.parts), reverse=True):
            with contextlib.suppress(OSError):
                sub.rmdir()
        with contextlib.suppress(OSError):
            top.rmdir()
