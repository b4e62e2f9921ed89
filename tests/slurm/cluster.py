"""A real Slurm cluster of the tests' own on this machine: started and stopped by the tests, nothing in /etc.

Each cluster ("bed") lives in ``/tmp/trtsweep-slurm/bed-<token>/`` (mode 0711: munged warns of a socket that only
root can reach) and touches nothing in /etc, /run or /var: Debian 12's slurmctld, slurmd, slurmdbd, munged and MariaDB
(22.05.8, 0.5.15, 10.11) read and write only what the bed's files name.

- ``munged`` of its own: ``munge.key`` (1024 random bytes, mode 0400), ``munge.socket``, ``munged.pid``,
  ``munged.seed`` (and ``--log-file munged.log``, which munged in the foreground leaves for stderr, ``munged.out``);
  ``--force`` because it runs as root. ``slurm.conf``'s
  ``AuthInfo=socket=<bed>/munge.socket`` makes every daemon and client command of the cluster (auth/munge and
  cred/munge alike) talk to it, never to a system munged.
- ``slurm.conf``: cluster ``trtsweep-test``, slurmctld on localhost, free loopback ports for slurmctld and each node,
  state in ``state/``, each node's spool, pid and log file through ``%n`` (``spool-n1/``, ``slurmd-n1.pid``,
  ``slurmd-n1.log``), ``SlurmdParameters=config_overrides`` (a node may declare more CPUs than the machine has),
  proctrack/linuxproc and task/cgroup, select/cons_tres with CR_Core, ``GresTypes=gpu``,
  ``ReturnToService=2``, jobcomp/filetxt into ``jobcomp.txt``, accounting through the bed's slurmdbd
  (``AccountingStoragePass=<bed>/munge.socket``: its connection's munge socket; ``AccountingStorageTRES=gres/gpu``,
  so that sacct's AllocTRES counts GPUs), short timeouts,
  one partition ``gpu`` (default, every node, no time limit). Nodes ``n1``..``nN``, all ``localhost`` /
  ``127.0.0.1`` (Debian's build has --enable-multiple-slurmd), each with ``Gres=gpu:<gpus_per_node>``. The
  stackable-plugin config is ``plugstack.conf`` next to slurm.conf (the pyxis double alone, ``pyxis_double.c`` built
  into the bed: pyxis's srun options, each step's recorded in ``pyxis.log``), so /etc/slurm's is not read either.
- ``gres.conf``: each node's GPUs are character devices ``dev/<node>/nvidia<i>`` (``c <240+k> <i>`` for node ``nk``:
  numbers of the range Linux leaves for local use, no driver behind them, so opening one fails with ENXIO; Slurm
  refuses regular files), so that each step gets ``CUDA_VISIBLE_DEVICES`` / ``SLURM_STEP_GPUS`` as on a GPU node.
- ``cgroup.conf``: devices constrained as most GPU sites do (``ConstrainDevices=yes``, cgroup/v1 under
  /sys/fs/cgroup, ``slurm_<node>/uid_0/job_J/step_S``): a step may open its own GPUs' device nodes alone (the others:
  EPERM), and Slurm counts its GPUs from 0 in ``CUDA_VISIBLE_DEVICES`` while ``SLURM_STEP_GPUS`` keeps the node's
  indices. Stopping the bed removes the cgroups its nodes left.
- Accounting: a MariaDB of the bed's own (``mariadb-install-db`` into ``db/``, ``mariadbd`` on a free loopback port
  with ``--skip-grant-tables``: no password anywhere) and ``slurmdbd`` on it (``slurmdbd.conf`` beside slurm.conf, mode
  0600, as slurmdbd demands), the cluster added with ``sacctmgr``: ``sacct`` shows every job and step, a few seconds
  after the fact. About 1.3 s more at start and 11 MB of packages.
- The daemons run in the foreground (``munged -F``, ``mariadbd``, ``slurmdbd -D``, ``slurmctld -D``,
  ``slurmd -D -N <node>``) in sessions of their
  own, their pids in ``pids.json`` (and in their pid files), their stdout in ``<daemon>.out``, their environment
  holding ``SLURM_CONF`` (which job steps' slurmstepd inherit). ``owner.json`` records the process that started the
  bed (pid and start time), so that a later session can tell a bed whose owner was killed.

The client commands (sinfo, squeue, salloc, srun, sbatch, scancel, scontrol, sacct) reach the cluster through
``SLURM_CONF=<bed>/slurm.conf`` (``Cluster.env()``); ``Cluster.run("sinfo", ...)`` runs one with it. As on a real
cluster, a step takes CPUs of its job's: steps that are to run at once within one allocation need the job to hold
a CPU for each (``--ntasks-per-node`` / ``-c``), else the next one waits ("Requested nodes are busy") and then gets
the GPUs the first one freed. The daemons log "mpi/pmix_v4: ... can not load PMIx library" at start (Debian's
slurm-wlm loads every MPI plugin; MpiDefault=none): harmless.

Stopping is by PID: every job of the cluster cancelled (best effort), then TERM to the slurmd's, slurmctld, slurmdbd,
mariadbd and munged in that order (KILL after a grace), then any process left whose command line names the
directory or whose environment's ``SLURM_CONF`` is the bed's (slurmstepd, tasks, an srun still waiting), then the
nodes' cgroups and the directory removed.
``start`` first stops every bed whose owner is gone (a session killed before its teardown).

Use::

    cluster = start(nodes=3, gpus_per_node=4)
    try:
        cluster.run("salloc", "--no-shell", "-N", "2", "--gres=gpu:2")
    finally:
        cluster.stop()
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import shutil
import socket
import stat
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from tests import beds as beds_mod
from tests.beds import locked, terminate
from tests.beds import names_bed as _names_bed
from tests.beds import read as _read
from tests.beds import start_time as _start_time
from tests.conftest import free_ports

SBIN = Path("/usr/sbin")
BIN = Path("/usr/bin")
DAEMONS = ("munged", "slurmctld", "slurmd", "slurmstepd", "slurmdbd", "mariadbd")
CLIENTS = (
    "srun",
    "salloc",
    "sbatch",
    "scancel",
    "scontrol",
    "squeue",
    "sinfo",
    "sacct",
    "sacctmgr",
    "mariadb-install-db",
)
INSTALL = "apt-get install slurmctld slurmd slurm-client munge slurmdbd mariadb-server libslurm-dev gcc"
PYXIS_DOUBLE = Path(__file__).with_name("pyxis_double.c")  # pyxis's srun options, recorded (tests/slurm/pyxis_double.c)
# Short on purpose: munge.socket's path must fit a sockaddr_un (108 bytes).
BEDS = Path(os.environ.get("TRTSWEEP_TEST_SLURM_BEDS", "/tmp/trtsweep-slurm"))
DAEMON_PATH = "/usr/sbin:/usr/bin:/sbin:/bin"
CLUSTER_NAME = "trtsweep-test"
PARTITION = "gpu"
START_TIMEOUT_S = 60.0
STOP_GRACE_S = 10.0
REAL_MEMORY_MB = 4000
# a job's states once it ended (`squeue --json`'s job_state); plain squeue lists none of them
ENDED = frozenset(
    {"BOOT_FAIL", "CANCELLED", "COMPLETED", "DEADLINE", "FAILED", "NODE_FAIL", "OUT_OF_MEMORY", "PREEMPTED", "TIMEOUT"}
)
SLURM_CONF = """\
# Written by tests/slurm/cluster.py: a test cluster of its own, every file in {root}.
ClusterName={cluster}
SlurmctldHost=localhost
SlurmctldPort={ctld_port}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={root}/munge.socket
StateSaveLocation={root}/state
SlurmctldPidFile={root}/slurmctld.pid
SlurmctldLogFile={root}/slurmctld.log
SlurmctldDebug=info
SlurmdSpoolDir={root}/spool-%n
SlurmdPidFile={root}/slurmd-%n.pid
SlurmdLogFile={root}/slurmd-%n.log
SlurmdDebug=info
SlurmdParameters=config_overrides
PlugStackConfig={root}/plugstack.conf
TmpFS={root}/tmp
ProctrackType=proctrack/linuxproc
TaskPlugin=task/cgroup
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
GresTypes=gpu
ReturnToService=2
MpiDefault=none
SwitchType=switch/none
JobCompType=jobcomp/filetxt
JobCompLoc={root}/jobcomp.txt
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=localhost
AccountingStoragePort={dbd_port}
AccountingStoragePass={root}/munge.socket
AccountingStorageTRES=gres/gpu
MailProg=/bin/true
JobAcctGatherType=jobacct_gather/none
SlurmdTimeout=30
MessageTimeout=5
KillWait=5
InactiveLimit=0
MinJobAge=5
# one node per slurmd, all on this machine (Debian's build has --enable-multiple-slurmd)
{nodes}
PartitionName={partition} Nodes={node_list} Default=YES MaxTime=INFINITE State=UP
"""
CGROUP_CONF = """\
# Written by tests/slurm/cluster.py: steps confined to their GPUs' device nodes, as most GPU sites configure Slurm.
CgroupPlugin=cgroup/v1
CgroupAutomount=no
CgroupMountpoint=/sys/fs/cgroup
ConstrainDevices=yes
ConstrainCores=no
ConstrainRAMSpace=no
"""
CGROUPS = Path("/sys/fs/cgroup")
NODE_LINE = (
    "NodeName={name} NodeHostname=localhost NodeAddr=127.0.0.1 Port={port} CPUs={cpus} "
    "RealMemory={memory} Gres=gpu:{gpus} State=UNKNOWN"
)


SLURMDBD_CONF = """\
# Written by tests/slurm/cluster.py: the test cluster's accounting, its MariaDB of its own in {root}/db.
AuthType=auth/munge
AuthInfo=socket={root}/munge.socket
DbdHost=localhost
DbdPort={dbd_port}
SlurmUser=root
PidFile={root}/slurmdbd.pid
LogFile={root}/slurmdbd.log
DebugLevel=info
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort={db_port}
StorageUser=root
StorageLoc=slurm_acct_db
"""


class SlurmError(RuntimeError):
    """A test cluster could not be started or stopped, or one of its commands failed."""


def unavailable_reason() -> str | None:
    """Why a test cluster cannot run on this machine (None when it can)."""
    if os.geteuid() != 0:
        return "a test Slurm cluster needs root (its daemons run as root, its GPUs are device nodes it makes)"
    for path in [*(SBIN / d for d in DAEMONS), *(BIN / c for c in CLIENTS)]:
        if not (path.is_file() and os.access(path, os.X_OK)):
            return f"no {path} ({INSTALL})"
    if not Path("/usr/include/slurm/spank.h").is_file() or shutil.which("cc") is None:
        return f"no spank.h or no C compiler for the pyxis double ({INSTALL})"
    if not os.access(CGROUPS / "devices" / "devices.allow", os.W_OK):
        return f"no writable cgroup v1 devices controller at {CGROUPS / 'devices'} (the bed constrains devices)"
    return None


def gpu_device(node: str, index: int) -> int:
    """The device number of GPU `index` of node `node` (n1, n2, ...): major 240 + the node's number, minor the index
    (240-254: Linux's range for local use, no driver behind it)."""
    return os.makedev(240 + int(node.lstrip("n")), index)


@dataclass
class Cluster:
    """One running test cluster: its directory, its config and the nodes slurmctld knows."""

    root: Path
    nodes: list[str]
    gpus_per_node: int
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)
    db_port: int = 0  # MariaDB's, for slurmdbd
    dbd_port: int = 0  # slurmdbd's
    start_s: float = 0.0
    stop_s: float | None = None

    @property
    def conf(self) -> Path:
        return self.root / "slurm.conf"

    def env(self, base: dict[str, str] | None = None) -> dict[str, str]:
        """The environment for a client command of this cluster: SLURM_CONF set, Slurm's input variables of an
        enclosing job (SLURM_JOB_ID and the like, which srun and scontrol would act on) removed."""
        env = {k: v for k, v in (os.environ if base is None else base).items() if not k.startswith("SLURM_")}
        env["SLURM_CONF"] = str(self.conf)
        return env

    def run(self, *argv: str, check: bool = True, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        """Run a client command (`sinfo`, `srun`, ...) of this cluster; raise with its stderr when it fails and
        `check` is set."""
        proc = subprocess.run(list(argv), env=self.env(), capture_output=True, text=True, timeout=timeout, check=False)
        if check and proc.returncode != 0:
            raise SlurmError(f"{' '.join(argv)} failed ({proc.returncode}): {proc.stderr.strip()}")
        return proc

    def jobs(self, job_id: int | None = None, ended: bool = False) -> list[dict[str, object]]:
        """The cluster's jobs as `squeue --json` lists them, only `job_id`'s when given (22.05's `squeue --json -j`
        ignores -j and lists every job, so the filter is here). `squeue --json` also lists the jobs that ended and
        that slurmctld still holds (MinJobAge, a few seconds here), which plain `squeue` leaves out: so does this,
        unless `ended` is set."""
        jobs: list[dict[str, object]] = json.loads(self.run("squeue", "--json").stdout)["jobs"]
        return [
            job
            for job in jobs
            if (job_id is None or job.get("job_id") == job_id) and (ended or job.get("job_state") not in ENDED)
        ]

    def node_states(self) -> dict[str, str]:
        """Each node's state as `sinfo -N` prints it (idle, alloc, mix, down*, ...)."""
        out = self.run("sinfo", "-h", "-N", "-o", "%N %t", timeout=10).stdout
        return dict(line.split() for line in out.splitlines() if line.strip())

    def stop(self) -> None:
        """Stop the cluster and remove everything of the bed (idempotent); records how long it took."""
        started = time.monotonic()
        stop_bed(self.root, self.processes)
        self.stop_s = time.monotonic() - started


# -- starting ---------------------------------------------------------------------------------------------------------


def start(nodes: int = 3, gpus_per_node: int = 4, cpus_per_node: int = 8, beds: Path = BEDS) -> Cluster:
    """A fresh cluster in a bed of its own, every node idle; stale beds of killed sessions are stopped first."""
    began = time.monotonic()
    root = _new_bed(beds)
    cluster = Cluster(root=root, nodes=[f"n{i}" for i in range(1, nodes + 1)], gpus_per_node=gpus_per_node)
    try:
        _prepare(cluster, cpus_per_node)
        _launch(cluster, "munged", _munged_argv(root))
        _wait_for(lambda: (root / "munge.socket").exists(), cluster, "munged's socket")
        _start_accounting(cluster)
        _launch(cluster, "slurmctld", [str(SBIN / "slurmctld"), "-D", "-f", str(cluster.conf)])
        for node in cluster.nodes:
            _launch(cluster, f"slurmd-{node}", [str(SBIN / "slurmd"), "-D", "-f", str(cluster.conf), "-N", node])
        _wait_for(lambda: _all_idle(cluster), cluster, "every node idle")
        cluster.start_s = time.monotonic() - began
    except BaseException:
        stop_bed(root, cluster.processes)
        raise
    return cluster


def _new_bed(beds: Path) -> Path:
    """A new bed directory with its owner recorded, after stopping every bed whose owner is gone (under a lock)."""
    beds.mkdir(mode=0o755, parents=True, exist_ok=True)
    with locked(beds / ".lock"):
        for stale in stale_beds(beds):
            stop_bed(stale)
        root = beds / f"bed-{secrets.token_hex(4)}"
        root.mkdir(mode=0o711)  # searchable: munged warns of a socket that only root can reach
        (root / "owner.json").write_text(json.dumps({"pid": os.getpid(), "start": _start_time(os.getpid())}))
    return root


def _prepare(cluster: Cluster, cpus: int) -> None:
    """The bed's directories, munge key, GPU device nodes, slurm.conf, gres.conf and plugstack.conf (the pyxis
    double)."""
    root = cluster.root
    for name in ("state", "tmp", *(f"spool-{n}" for n in cluster.nodes)):
        (root / name).mkdir(mode=0o700)
    key = root / "munge.key"
    fd = os.open(key, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o400)
    with os.fdopen(fd, "wb") as handle:
        handle.write(os.urandom(1024))
    gres = []
    for node in cluster.nodes:
        devices = root / "dev" / node
        devices.mkdir(mode=0o755, parents=True)
        for index in range(cluster.gpus_per_node):
            try:
                os.mknod(devices / f"nvidia{index}", 0o666 | stat.S_IFCHR, gpu_device(node, index))
            except OSError as exc:
                raise SlurmError(f"cannot make the GPU device node {devices / f'nvidia{index}'}: {exc}") from exc
        last = cluster.gpus_per_node - 1
        gres.append(f"NodeName={node} Name=gpu File={devices}/nvidia[0-{last}]")
    (root / "gres.conf").write_text("\n".join(gres) + "\n")
    (root / "cgroup.conf").write_text(CGROUP_CONF)
    _build_pyxis_double(root)
    ctld_port, cluster.dbd_port, cluster.db_port, *node_ports = free_ports(3 + len(cluster.nodes))
    node_lines = [
        NODE_LINE.format(name=node, port=port, cpus=cpus, memory=REAL_MEMORY_MB, gpus=cluster.gpus_per_node)
        for node, port in zip(cluster.nodes, node_ports, strict=True)
    ]
    cluster.conf.write_text(
        SLURM_CONF.format(
            root=root, cluster=CLUSTER_NAME, ctld_port=ctld_port, dbd_port=cluster.dbd_port,
            nodes="\n".join(node_lines), partition=PARTITION,
            node_list=",".join(cluster.nodes),
        )
    )  # fmt: skip
    dbd_conf = root / "slurmdbd.conf"  # slurmdbd reads it beside SLURM_CONF, and wants it private
    fd = os.open(dbd_conf, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(SLURMDBD_CONF.format(root=root, dbd_port=cluster.dbd_port, db_port=cluster.db_port))


def _build_pyxis_double(root: Path) -> None:
    """pyxis_double.c built into the bed and named in its plugstack.conf (srun and slurmstepd load it), its record
    in ``pyxis.log``."""
    built = subprocess.run(["cc", "-shared", "-fPIC", "-Wall", "-o", str(root / "pyxis_double.so"), str(PYXIS_DOUBLE)],
                           capture_output=True, text=True, check=False)  # fmt: skip
    if built.returncode != 0:
        raise SlurmError(f"cannot build {PYXIS_DOUBLE.name} ({INSTALL}): {built.stderr.strip()}")
    (root / "plugstack.conf").write_text(f"required {root / 'pyxis_double.so'} {root / 'pyxis.log'}\n")


def _start_accounting(cluster: Cluster) -> None:
    """MariaDB of the bed's own (``db/``, on loopback) and slurmdbd on it, answering before slurmctld starts."""
    root = cluster.root
    made = subprocess.run([str(BIN / "mariadb-install-db"), "--no-defaults", f"--datadir={root / 'db'}",
                           "--user=root", "--skip-test-db", "--auth-root-authentication-method=normal"],
                          capture_output=True, text=True, check=False, cwd=root)  # fmt: skip
    if made.returncode != 0:
        raise SlurmError(f"mariadb-install-db failed ({made.returncode}): {made.stderr.strip()[-2000:]}")
    _launch(cluster, "mariadbd", [
        str(SBIN / "mariadbd"), "--no-defaults", f"--datadir={root / 'db'}", "--user=root", "--bind-address=127.0.0.1",
        f"--port={cluster.db_port}", f"--socket={root / 'mariadb.sock'}", f"--pid-file={root / 'mariadb.pid'}",
        "--skip-grant-tables", "--skip-log-bin", "--innodb-buffer-pool-size=16M", "--performance-schema=OFF",
    ])  # fmt: skip
    _wait_for(lambda: _listening(cluster.db_port), cluster, "MariaDB listening")
    _launch(cluster, "slurmdbd", [str(SBIN / "slurmdbd"), "-D"])
    _wait_for(lambda: _listening(cluster.dbd_port), cluster, "slurmdbd listening")
    cluster.run("sacctmgr", "-i", "add", "cluster", CLUSTER_NAME)


def _listening(port: int) -> bool:
    with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.5):
        return True
    return False


def _munged_argv(root: Path) -> list[str]:
    """munged's command line for the bed at `root`: every file of its own in the bed, in the foreground."""
    return [
        str(SBIN / "munged"), "-F", "--force",
        "--key-file", str(root / "munge.key"),
        "--socket", str(root / "munge.socket"),
        "--pid-file", str(root / "munged.pid"),
        "--log-file", str(root / "munged.log"),
        "--seed-file", str(root / "munged.seed"),
    ]  # fmt: skip


def _launch(cluster: Cluster, name: str, argv: list[str]) -> None:
    """Start one daemon in the foreground, in a session of its own, its stdout in `<name>.out`; its pid recorded in
    pids.json (in start order) at once, so that a start that fails half-way still stops what it started."""
    root = cluster.root
    env = {"PATH": DAEMON_PATH, "HOME": str(root), "TMPDIR": str(root / "tmp"), "SLURM_CONF": str(cluster.conf)}
    with open(root / f"{name}.out", "wb") as out:
        process = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=root,
            start_new_session=True,
        )  # fmt: skip
    cluster.processes.append(process)
    pids = _pids(root)
    pids[name] = process.pid
    (root / "pids.json").write_text(json.dumps(pids))


def _pids(root: Path) -> dict[str, int]:
    """The bed's daemons' pids by name (munged, slurmctld, slurmd-<node>), in start order."""
    try:
        return {str(k): int(v) for k, v in json.loads((root / "pids.json").read_text()).items()}
    except (OSError, ValueError, AttributeError):
        return {}


def _all_idle(cluster: Cluster) -> bool:
    """Whether sinfo lists every node of the cluster as idle (False while slurmctld does not answer yet)."""
    try:
        states = cluster.node_states()
    except (SlurmError, subprocess.TimeoutExpired):
        return False
    return all(states.get(node) == "idle" for node in cluster.nodes)


def _wait_for(ready: Callable[[], bool], cluster: Cluster, what: str) -> None:
    """Until `ready()` holds; raise with the logs' tails if a daemon exits or it takes over START_TIMEOUT_S."""
    deadline = time.monotonic() + START_TIMEOUT_S
    while not ready():
        exited = [p for p in cluster.processes if p.poll() is not None]
        if exited:
            raise SlurmError(f"{exited[0].args[0]} exited ({exited[0].returncode}) at start:\n{_logs(cluster.root)}")
        if time.monotonic() > deadline:
            raise SlurmError(f"not {what} within {START_TIMEOUT_S:.0f} s:\n{_logs(cluster.root)}")
        time.sleep(0.1)


def _logs(root: Path, lines: int = 12) -> str:
    """The tail of each daemon's output in the bed (in the foreground each copies its log there, and writes there
    what fails before its log file is open)."""
    parts = []
    for path in sorted(root.glob("*.out")):
        with contextlib.suppress(OSError):
            tail = "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
            if tail:
                parts.append(f"--- {path.name}\n{tail}")
    return "\n".join(parts) or "(no log)"


# -- stale beds -------------------------------------------------------------------------------------------------------


def stale_beds(beds: Path = BEDS) -> list[Path]:
    """Beds whose owner process is gone (or was never recorded)."""
    return beds_mod.stale_beds(beds)


# -- stopping ---------------------------------------------------------------------------------------------------------


def stop_bed(root: Path, processes: Sequence[subprocess.Popen[bytes]] = ()) -> None:
    """Stop the bed's cluster and whatever it left (by PID), then remove its directory."""
    if not root.exists():
        return
    pids = {name: pid for name, pid in _pids(root).items() if _of_bed(pid, root)}
    if "slurmctld" in pids:
        _cancel_jobs(root)
    slurmd = [pid for name, pid in pids.items() if name.startswith("slurmd-")]
    for group in (slurmd, *([pids.get(name)] for name in ("slurmctld", "slurmdbd", "mariadbd", "munged"))):
        terminate([pid for pid in group if pid is not None], STOP_GRACE_S)
    for process in processes:  # reap our own children
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=5)
    terminate(leftover_pids(root), 5.0)
    _remove_cgroups(root)
    shutil.rmtree(root, ignore_errors=True)
    if root.exists():
        raise SlurmError(f"could not remove {root}")


def _remove_cgroups(root: Path) -> None:
    """The cgroups the bed's nodes left (``slurm_<node>`` and below, deepest first: a cgroup goes only once it holds no
    process and no child)."""
    nodes = re.findall(r"^NodeName=(\S+)", _read(root / "slurm.conf"), re.MULTILINE)
    for node in nodes:
        for top in CGROUPS.glob(f"*/slurm_{node}"):
            for group in [*sorted((p for p in top.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts)), top]:
                with contextlib.suppress(OSError):
                    group.rmdir()


def _cancel_jobs(root: Path) -> None:
    """`scancel` of every job of the cluster, while its slurmctld still answers (best effort)."""
    env = {**os.environ, "SLURM_CONF": str(root / "slurm.conf")}
    with contextlib.suppress(OSError, subprocess.TimeoutExpired):
        listed = subprocess.run(
            [str(BIN / "squeue"), "-h", "-o", "%A"], env=env, capture_output=True, text=True, timeout=10, check=False
        )
        ids = listed.stdout.split() if listed.returncode == 0 else []
        if ids:
            subprocess.run([str(BIN / "scancel"), *ids], env=env, capture_output=True, timeout=10, check=False)


def leftover_pids(root: Path) -> list[int]:
    """Processes of the bed still alive: command line naming its directory (the daemons) or environment naming its
    slurm.conf (slurmstepd, which inherits slurmd's; the tasks and sruns, which inherit the client's)."""
    spared = _ancestors(os.getpid())
    return [int(e.name) for e in Path("/proc").iterdir()
            if e.name.isdigit() and int(e.name) not in spared and _of_bed(int(e.name), root)]  # fmt: skip


def _of_bed(pid: int, root: Path) -> bool:
    """Whether the process is the bed's: its command line names the directory, or its environment the bed's
    slurm.conf (slurmdbd, whose command line names no file)."""
    return _names_bed(pid, root) or f"SLURM_CONF={root / 'slurm.conf'}" in _read(Path(f"/proc/{pid}/environ")).split(
        "\0"
    )


def _ancestors(pid: int) -> set[int]:
    """`pid` and its ancestors (never stopped as leftovers, whatever their environment says)."""
    found = set()
    while pid > 0 and pid not in found:
        found.add(pid)
        stat_ = _read(Path(f"/proc/{pid}/stat"))
        pid = int(stat_.rsplit(")", 1)[-1].split()[1]) if stat_ else 0
    return found
