"""What does the fleet machinery cost? (issue: "the fleet")

Runs `ansible-playbook sweep.yml` for real, over SSH, against a test bed of hosts (tests/fleet/testbed.py:
network namespaces with their own sshd on this machine) and measures:

1. Orchestration overhead per point (target < 10 s): everything a point spends that is neither model load nor
   benchmark. Per point, from the files fetched into results/<sweep>/<point>/:
     wall W  = sum of status.json `stages` (preflight .. benchmark: from the point's first task to its outcome
               record; the stages are the gaps between the lane's stage marks, so they add up exactly);
     load R  = triton_server.log: first log line -> last "Started GRPCInferenceService / HTTPService / Metrics
               Service" line (the server's own start-to-ready time; process exec -> first log line is not in it);
     bench B = llm_perf.json: first request sent -> last response received, over all levels, warm-up included
               (what llm-perf spends measuring; its process start and tokenizer load are not in it);
     overhead O = W - R - B.
   Also shown: "pre" (preflight + download + quantize + build + repository), the serve stage less R (start task,
   readiness polling) and the benchmark stage less B (prompts copy, llm-perf start, stopping the server,
   fetching the results). The outcome record itself (one controller task after W ends) is not in W.
2. A fully cached rerun against the first run (target < 10%): the same sweep and inventory again; every point
   is kept (resume by settings hash), so only the prepare, plan and report plays run. Reported as wall time of
   run 2 / run 1 (run 1 = the first run of the sweep on hosts already prepared). Then a forced rerun
   (-e trtsweep_force=true): models and repositories are cached, every point is measured again.
3. Scaling with 1..N hosts on the same matrix (target: efficiency T1 / (N x TN) >= 0.8), each fleet size run
   --repeat times, interleaved, T_N = the shortest (other users of this machine only ever add time). The plan's
   placement bound (points / (N x most points on one host)) is shown next to it: a placement that gives one host more
   points caps the efficiency whatever the machinery costs.
   With a sleep-bound stand-in server (benchmarks/standin_tritonserver.py, runtime native: a fixed load sleep,
   then fixed first-token / per-token sleeps, no model) so the hosts do not compete for this machine's cores
   through the model; and, unless --skip-real, with the real local Triton serving the demo model (hf backend,
   runtime local; --real-precisions x --real-batch-sizes), where the hosts DO compete for the machine's CPU cores.

Before measuring, the bed is warmed up: one host installs the shared trtsweep venv (fleet_prepare_dir, the hosts
share this machine's filesystem), then every host runs one point (and, for the real server, starts it once).
Everything the script starts stops with it: servers with their sweep's points, the bed with its context manager
(or give --bed-dir of a bed started with `python -m tests.fleet.testbed up DIR`, left running).
cpu_busy (whole-machine CPU use during a run, other users' processes included) says how quiet the machine was.
Run: .venv/bin/python benchmarks/fleet.py [--hosts 3] [--repeat 2] [--protocol grpc] [--skip-real] [--keep DIR]
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import itertools
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from tests.fleet.testbed import TestBed, ansible_env, unavailable_reason  # noqa: E402

from trtsweep.fleet.release import build_id  # noqa: E402
from trtsweep.perf.selftest import format_rows  # noqa: E402

BIN = Path(sys.executable).parent
LANES_PLAY = "Run the plan's lanes"  # sweep.yml's play that runs the points (its name's start)
DEMO_REPO_ID = "HuggingFaceTB/SmolLM2-135M-Instruct"
PRE_STAGES = ("preflight", "download", "quantize", "build", "repository")
TRITON_LINE = re.compile(r"^[IWE](\d{2})(\d{2}) (\d{2}):(\d{2}):(\d{2}(?:\.\d+)?) ")
STARTED = re.compile(r"Started (GRPCInferenceService|HTTPService|Metrics Service)")
# an Ansible callback (written into the run's temporary directory): start and end of every task on every host
TIMES_CALLBACK = """\
import json, os, time
from ansible.plugins.callback import CallbackBase


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "fleetbench_times"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self):
        super().__init__()
        self.out = open(os.environ["FLEETBENCH_TIMES"], "a")
        self.starts = {}

    def _write(self, **fields):
        self.out.write(json.dumps(fields) + "\\n")
        self.out.flush()

    def v2_playbook_on_play_start(self, play):
        self._write(ev="play", name=play.get_name(), t=time.time())

    def v2_runner_on_start(self, host, task):
        self.starts[(host.get_name(), task._uuid)] = time.time()

    def _end(self, result):
        key = (result._host.get_name(), result._task._uuid)
        self._write(ev="task", host=key[0], task=result._task.get_name(), t0=self.starts.pop(key, None), t1=time.time())

    v2_runner_on_ok = v2_runner_on_skipped = v2_runner_on_unreachable = _end

    def v2_runner_on_failed(self, result, ignore_errors=False):
        self._end(result)

    def v2_playbook_on_stats(self, stats):
        self._write(ev="end", t=time.time())
"""
TARGET_OVERHEAD_S = 10.0
TARGET_CACHED = 0.10
TARGET_EFFICIENCY = 0.8


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


# -- preparation ------------------------------------------------------------------------------------------------


def ensure_wheelhouse(path: Path) -> Path:
    """`trtsweep wheelhouse` (the dependency wheels for offline hosts, extras [local]) unless already there."""
    if not any(path.glob("*.whl")):
        log(f"making the wheelhouse in {path} (trtsweep wheelhouse; downloads ~330 MB once)")
        subprocess.run([str(BIN / "trtsweep"), "wheelhouse", str(path)], check=True)
    return path


def ensure_demo_model() -> Path:
    cache = Path(os.environ.get("TRTSWEEP_CACHE") or Path.home() / ".cache" / "trtsweep")
    if not (cache / "models").is_dir() or not (cache / "hf-hub").is_dir():
        log("materializing the demo model (trtsweep demo-model)")
        subprocess.run([str(BIN / "trtsweep"), "demo-model"], check=True)
    return cache


def seed(host_cache: Path, demo_cache: Path) -> None:
    """The hosts have no network: give each the demo model (hard links where the filesystem allows)."""
    host_cache.mkdir(parents=True, exist_ok=True)
    for name in ("models", "hf-hub"):
        if (host_cache / name).exists():
            continue
        if subprocess.run(["cp", "-al", str(demo_cache / name), str(host_cache)], check=False).returncode != 0:
            subprocess.run(["cp", "-a", str(demo_cache / name), str(host_cache)], check=True)


def standin_wrapper(path: Path, venv_python: Path, args: argparse.Namespace) -> Path:
    """`triton_serve_tritonserver` for the stand-in: the hosts' PATH python is bare, so exec the host venv's."""
    script = REPO / "benchmarks" / "standin_tritonserver.py"
    path.write_text(
        "#!/bin/sh\n"
        f'exec "{venv_python}" "{script}" --standin-load-s {args.load_s:g} '
        f'--standin-first-token-ms {args.first_token_ms:g} --standin-token-ms {args.token_ms:g} "$@"\n'
    )
    path.chmod(0o755)
    return path


@contextlib.contextmanager
def bed_hosts(args: argparse.Namespace, tmp: Path) -> Iterator[dict[str, dict[str, Any]]]:
    """Host name -> inventory vars of the bed: an existing one (--bed-dir) or a new one, removed on exit."""
    if args.bed_dir:
        document = yaml.safe_load((args.bed_dir / "inventory.yml").read_text())
        yield document["all"]["children"]["trtsweep_hosts"]["hosts"]
        return
    reason = unavailable_reason()
    if reason:
        raise SystemExit(f"cannot create a test bed here: {reason}")
    log(f"starting a test bed of {args.hosts} hosts in {tmp / 'bed'}")
    with TestBed(tmp / "bed", count=args.hosts) as bed:
        document = yaml.safe_load(bed.inventory_path.read_text())
        yield document["all"]["children"]["trtsweep_hosts"]["hosts"]
        log("removing the test bed")


def write_inventory(path: Path, hosts: dict[str, dict[str, Any]], names: list[str], extra: dict[str, Any]) -> Path:
    document = {"all": {"children": {"trtsweep_hosts": {"hosts": {n: {**hosts[n], **extra} for n in names}}}}}
    path.write_text("---\n" + yaml.safe_dump(document, sort_keys=False))
    return path


def sweep_vars(path: Path, name: str, precisions: list[str], batch_sizes: list[int], bench: dict[str, Any],
               results: Path, placement: str = "exclusive") -> Path:  # fmt: skip
    sweep = {
        "name": name,
        "backend": "hf",
        "models": [{"repo_id": DEMO_REPO_ID, "name": "smol"}],
        "precisions": precisions,
        "parallelism": [{"tp": 1, "pp": 1}],
        "max_batch_sizes": batch_sizes,
        "lengths": [{"input": 256, "output": 16}],
        "streaming": [True],
        "placement": {"mode": placement, "gpus_per_point": 1},
        "benchmark": {
            "input_data": str(REPO / "data" / "prompts.jsonl"),
            "chat_template": True,
            "warmup_requests": 1,
            **bench,
        },
    }
    path.write_text(yaml.safe_dump({"trtsweep_sweep": sweep, "trtsweep_results_dir": str(results)}))
    return path


# -- running ----------------------------------------------------------------------------------------------------


def cpu_ticks() -> tuple[int, int]:
    """(busy, total) jiffies of the whole machine (/proc/stat)."""
    fields = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = fields[3] + fields[4]
    return sum(fields) - idle, sum(fields)


def _proc_table() -> dict[int, tuple[int, str]]:
    """pid -> (parent pid, command line) of every process."""
    table = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, ValueError, IndexError):
            ppid = int(stat.read_text().rsplit(")", 1)[1].split()[1])
            table[int(stat.parent.name)] = (ppid, (stat.parent / "cmdline").read_bytes().replace(b"\0", b" ").decode())
    return table


def _pss_kb(pid: int) -> int:
    with contextlib.suppress(OSError, ValueError):
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                return int(line.split()[1])
    return 0


def _cpu_s(pid: int) -> float:
    with contextlib.suppress(OSError, ValueError, IndexError):
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return 0.0


class ControllerSampler(threading.Thread):
    """Peak memory (PSS: pages shared by the forks counted once) of the controller's processes every second: the
    ansible-playbook process, its workers and ssh clients, the run's heartbeats (detached, named by the controller
    pid) and the ssh ControlMaster processes of this run's hosts; and the heartbeats' CPU seconds."""

    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.pid = pid
        self.peak_pss_mb = 0.0
        self.heartbeat_cpu_s = 0.0
        self._done = threading.Event()

    def _controller(self) -> tuple[list[int], list[int]]:
        table = _proc_table()
        tree, todo = [self.pid], [self.pid]
        children: dict[int, list[int]] = {}
        for pid, (ppid, _) in table.items():
            children.setdefault(ppid, []).append(pid)
        while todo:
            for child in children.get(todo.pop(), []):
                tree.append(child)
                todo.append(child)
        beats = [pid for pid, (_, cmd) in table.items()
                 if "trtsweep.fleet.heartbeat" in cmd and f"--controller-pid {self.pid} " in cmd]  # fmt: skip
        masters = [pid for pid, (_, cmd) in table.items() if cmd.startswith("ssh: ") and "[mux]" in cmd]
        return sorted({*tree, *beats, *masters}), beats

    def run(self) -> None:
        while not self._done.wait(1.0):
            pids, beats = self._controller()
            self.peak_pss_mb = max(self.peak_pss_mb, sum(_pss_kb(pid) for pid in pids) / 1024)
            if beats:
                self.heartbeat_cpu_s = max(self.heartbeat_cpu_s, sum(_cpu_s(pid) for pid in beats))

    def stop(self) -> None:
        self._done.set()
        self.join()


class Runner:
    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.count = 0
        self.failures: list[str] = []
        callbacks = tmp / "callbacks"
        callbacks.mkdir(exist_ok=True)
        (callbacks / "fleetbench_times.py").write_text(TIMES_CALLBACK)
        self.env = ansible_env(
            {
                "ANSIBLE_CALLBACK_PLUGINS": f"{REPO / 'callback_plugins'}{os.pathsep}{callbacks}",
                "ANSIBLE_CALLBACKS_ENABLED": "trtsweep_events,fleetbench_times",
            }
        )

    def sweep(self, label: str, inventory: Path, vars_file: Path, *extra: str) -> dict[str, Any]:
        """One `ansible-playbook sweep.yml`; returns its wall time, exit status, plan and results directory."""
        self.count += 1
        out = self.tmp / f"run{self.count:02d}-{label}.log"
        argv = [str(BIN / "ansible-playbook"), "sweep.yml", "-i", str(inventory), "-e", f"@{vars_file}", *extra]
        times = self.tmp / f"run{self.count:02d}-{label}.times.jsonl"
        before = build_id()
        log(f"{label}: {' '.join(argv[1:])}")
        busy0, total0 = cpu_ticks()
        start = time.monotonic()
        with out.open("w") as handle:
            proc = subprocess.Popen(argv, cwd=REPO, env={**self.env, "FLEETBENCH_TIMES": str(times)}, stdout=handle,
                                    stderr=subprocess.STDOUT)  # fmt: skip
            controller = ControllerSampler(proc.pid)
            controller.start()
            _, status, usage = os.wait4(proc.pid, 0)  # the tree's CPU: every child ansible-playbook waited for
            proc.returncode = os.waitstatus_to_exitcode(status)
            controller.stop()
        wall = time.monotonic() - start
        busy1, total1 = cpu_ticks()
        cpu_busy = (busy1 - busy0) / max(1, total1 - total0)
        build_id.cache_clear()
        if build_id() != before:
            self.failures.append(f"{label}: trtsweep's source changed during the run (build id); numbers suspect")
        settings = yaml.safe_load(vars_file.read_text())
        results = Path(settings["trtsweep_results_dir"]) / settings["trtsweep_sweep"]["name"]
        plan = json.loads((results / "plan.json").read_text()) if (results / "plan.json").exists() else {}
        log(f"{label}: rc {proc.returncode}, {wall:.1f} s, {len(plan.get('points', []))} point(s) run, "
            f"{len(plan.get('kept', []))} kept, machine CPU busy {cpu_busy:.0%} (log: {out})")  # fmt: skip
        if proc.returncode != 0:
            tail = "\n".join(out.read_text(errors="replace").splitlines()[-25:])
            self.failures.append(f"{label}: ansible-playbook exited {proc.returncode} (log {out})")
            print(f"--- {label} failed; last lines of {out}:\n{tail}", file=sys.stderr)
        run = {"label": label, "wall": wall, "rc": proc.returncode, "plan": plan, "results": results, "log": out,
               "cpu_busy": cpu_busy, "load1": os.getloadavg()[0], "times": task_times(times),
               "controller_cpu_s": usage.ru_utime + usage.ru_stime + controller.heartbeat_cpu_s,
               "controller_peak_pss_mb": controller.peak_pss_mb}  # fmt: skip
        run["rows"] = point_rows(run)  # now: a later run of the same sweep rewrites its records
        return run


# -- analysis ---------------------------------------------------------------------------------------------------


def _log_time(match: re.Match[str]) -> float:
    month, day, hour, minute, second = match.groups()
    base = dt.datetime(2000, int(month), int(day), int(hour), int(minute))
    return base.timestamp() + float(second)


def server_ready_s(log_file: Path) -> float | None:
    """Triton log: first line -> last of the 'Started <service>' lines (None without them)."""
    try:
        lines = log_file.read_text(errors="replace").splitlines()
    except OSError:
        return None
    first = started = None
    for line in lines:
        match = TRITON_LINE.match(line)
        if not match:
            continue
        stamp = _log_time(match)
        first = stamp if first is None else first
        if STARTED.search(line):
            started = stamp
    return None if first is None or started is None else started - first


def benchmark_s(profile: Path) -> float | None:
    """llm_perf.json: first request sent -> last response received, all levels (warm-up included)."""
    try:
        data = json.loads(profile.read_text())
    except (OSError, json.JSONDecodeError):
        return None
    sent, ends = [], []
    for level in data.get("levels", []):
        for request in level.get("requests", []):
            sent.append(request["sent_ms"])
            last = request.get("end_ms") or (request.get("chunk_ms") or [None])[-1]
            if last is not None:
                ends.append(last)
    return (max(ends) - min(sent)) / 1000.0 if sent and ends else None


def task_times(path: Path) -> dict[str, Any]:
    """Seconds per play."""
    try:
        events = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    except (OSError, json.JSONDecodeError):
        return {}
    marks = [(e["t"], e["name"]) for e in events if e["ev"] == "play"]
    marks += [(e["t"], None) for e in events if e["ev"] == "end"]
    return {"plays": {name: nxt - t for (t, name), (nxt, _) in itertools.pairwise(marks) if name}}


def play_s(run: dict[str, Any], prefix: str) -> float | str:
    return next((v for k, v in run.get("times", {}).get("plays", {}).items() if k.startswith(prefix)), "-")


def point_rows(run: dict[str, Any]) -> list[dict[str, Any]]:
    """The overhead decomposition of every point this run measured."""
    rows = []
    for point in run["plan"].get("points", []):
        folder = run["results"] / point["id"]
        try:
            record = json.loads((folder / "status.json").read_text())
        except (OSError, json.JSONDecodeError):
            continue
        if record.get("run_id") != run["plan"]["run_id"]:
            continue
        stages = record.get("stages") or {}
        wall = sum(stages.values())
        ready = server_ready_s(folder / "triton_server.log")
        bench = benchmark_s(folder / "llm_perf.json")
        ok = record.get("status") == "ok" and ready is not None and bench is not None
        rows.append({
            "run": run["label"], "point": point["id"].replace("_tp1pp1", "").replace("_isl256osl16_stream", ""),
            "host": record.get("host"), "status": record.get("status"), "wall_s": wall,
            "pre_s": sum(stages.get(s, 0.0) for s in PRE_STAGES), "serve_s": stages.get("serve", 0.0),
            "load_s": ready if ready is not None else "-", "bench_stage_s": stages.get("benchmark", 0.0),
            "bench_s": bench if bench is not None else "-",
            "serve-load": stages.get("serve", 0.0) - ready if ready is not None else "-",
            "stage-bench": stages.get("benchmark", 0.0) - bench if bench is not None else "-",
            "overhead_s": wall - ready - bench if ok else "-",
        })  # fmt: skip
    return rows


def points_per_host(run: dict[str, Any]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for lane in run["plan"].get("lanes", []):
        counts[lane["host"]] = counts.get(lane["host"], 0) + len(lane["points"])
    return counts


def scaling_rows(kind: str, runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per fleet size; T_N is the shortest of its repeats (other users of the machine only add time)."""
    by_n: dict[int, list[dict[str, Any]]] = {}
    for run in runs:
        by_n.setdefault(run["hosts"], []).append(run)
    t1 = min(run["wall"] for run in by_n[min(by_n)])
    rows = []
    for n, group in sorted(by_n.items()):
        run = min(group, key=lambda r: r["wall"])
        per_host = points_per_host(run)
        total = sum(per_host.values())
        bound = total / (n * max(per_host.values())) if per_host else float("nan")
        overheads = [r["overhead_s"] for g in group for r in g["rows"] if isinstance(r["overhead_s"], float)]
        rows.append({
            "server": kind, "hosts": n, "points": total,
            "points/host": "/".join(str(per_host.get(h, 0)) for h in sorted(per_host)) or "-",
            "wall_s": run["wall"], "repeats_s": "/".join(f"{g['wall']:.0f}" for g in group),
            "prepare_s": play_s(run, "Prepare"), "points_s": play_s(run, LANES_PLAY),
            "efficiency": t1 / (n * run["wall"]), "placement_bound": bound,
            "overhead_p50_s": statistics.median(overheads) if overheads else "-",
            "cpu_busy": f"{run['cpu_busy']:.0%}", "ok": "yes" if all(g["rc"] == 0 for g in group) else "no",
        })  # fmt: skip
    return rows


# -- main -------------------------------------------------------------------------------------------------------


def scaling(runner: Runner, kind: str, hosts: dict[str, dict[str, Any]], names: list[str], host_vars: dict[str, Any],
            matrix: tuple[list[str], list[int]], bench: dict[str, Any], repeat: int, tmp: Path
            ) -> list[dict[str, Any]]:  # fmt: skip
    """The same matrix on the first 1, 2, ... N hosts, `repeat` times interleaved (a sweep name per run, so every
    run starts equally cold: no repository or result of an earlier run is reused)."""
    runs = []
    for r in range(1, repeat + 1):
        for n in range(1, len(names) + 1):
            inventory = write_inventory(tmp / f"inv-{kind}-{n}.yml", hosts, names[:n], host_vars)
            name = f"fleetbench-{kind}-n{n}-r{r}"
            vars_file = sweep_vars(tmp / f"{name}.yml", name, *matrix, bench, tmp / "results")
            run = runner.sweep(f"{kind}-n{n}-r{r}", inventory, vars_file)
            runs.append({**run, "hosts": n, "inventory": inventory, "vars_file": vars_file})
    return runs


def warm_up(runner: Runner, kind: str, hosts: dict[str, dict[str, Any]], names: list[str],
            host_vars: dict[str, Any], protocol: str, tmp: Path) -> list[dict[str, Any]]:  # fmt: skip
    """Not measured: one host installs the shared venv (if needed), then every host runs one point (the wheel,
    the page cache, the local runtime's backend directory)."""
    bench = {"protocol": protocol, "concurrency": [1], "num_requests": 2, "max_tokens": 4}
    name = f"fleetbench-warmup-{kind}"
    one = write_inventory(tmp / f"inv-warm-{kind}-1.yml", hosts, names[:1], host_vars)
    every = write_inventory(tmp / f"inv-warm-{kind}-all.yml", hosts, names, host_vars)
    first = sweep_vars(tmp / f"warm-{kind}-1.yml", name, ["float32"], [2], bench, tmp / "warm")
    runs = [runner.sweep(f"warmup-{kind}-install", one, first, "-e", "trtsweep_force=true")]
    spread = sweep_vars(tmp / f"warm-{kind}-all.yml", name, ["float32"], list(range(2, 2 + len(names))), bench,
                        tmp / "warm")  # fmt: skip
    runs.append(runner.sweep(f"warmup-{kind}-hosts", every, spread, "-e", "trtsweep_force=true"))
    return runs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--hosts", type=int, default=3, help="largest fleet (1..N hosts are measured)")
    parser.add_argument("--bed-dir", type=Path, help="an existing bed (`python -m tests.fleet.testbed up DIR`)")
    parser.add_argument("--wheelhouse", type=Path, default=REPO / ".cache" / "wheelhouse")
    parser.add_argument("--fleet-dir", type=Path, default=REPO / ".cache" / "fleet-bench",
                        help="the hosts' shared fleet_prepare_dir per runtime (DIR/native, DIR/local: their venvs, "
                             "kept between runs of this script)")  # fmt: skip
    parser.add_argument("--protocol", choices=("grpc", "http"), default="grpc")
    parser.add_argument("--precisions", default="float32,bfloat16")
    parser.add_argument("--batch-sizes", default="2,4,8")
    parser.add_argument("--load-s", type=float, default=3.0, help="stand-in: model load time")
    parser.add_argument("--first-token-ms", type=float, default=200.0, help="stand-in: time to first token")
    parser.add_argument("--token-ms", type=float, default=50.0, help="stand-in: time per further token")
    parser.add_argument("--skip-real", action="store_true", help="no scaling run with the real local Triton")
    parser.add_argument("--real-precisions", default="float32,bfloat16")
    parser.add_argument("--real-batch-sizes", default="2,4,8")
    parser.add_argument("--repeat", type=int, default=2, help="stand-in scaling runs per fleet size (shortest counts)")
    parser.add_argument("--real-repeat", type=int, default=1, help="real-server scaling runs per fleet size")
    parser.add_argument("--keep", type=Path, help="copy results and logs here")
    parser.add_argument("--size-case", action="store_true",
                        help="only the fleet-size case: --size-hosts hosts x --size-gpus declared GPUs, placement "
                             "pack, every lane busy, default forks (stand-in server)")  # fmt: skip
    parser.add_argument("--size-hosts", type=int, default=10)
    parser.add_argument("--size-gpus", type=int, default=8)
    parser.add_argument("--size-requests", type=int, default=30, help="size case: requests per point")
    parser.add_argument("--host-python", type=Path, help="size case: the hosts' Python, trtsweep installed in it "
                        "(no venv from the wheelhouse; see tools/device_setup.sh)")  # fmt: skip
    args = parser.parse_args()
    if args.size_case:
        args.hosts = args.size_hosts
        size_case(args)
        return

    wheelhouse = ensure_wheelhouse(args.wheelhouse.resolve())
    demo_cache = ensure_demo_model()
    fleet_dir = args.fleet_dir.resolve()
    fleet_dir.mkdir(parents=True, exist_ok=True)
    matrix = (args.precisions.split(","), [int(b) for b in args.batch_sizes.split(",")])
    real_matrix = (args.real_precisions.split(","), [int(b) for b in args.real_batch_sizes.split(",")])
    bench = {"protocol": args.protocol, "concurrency": [1, 2], "num_requests": 8, "max_tokens": 16}
    real_bench = {"protocol": args.protocol, "concurrency": [1], "num_requests": 4, "max_tokens": 16,
                  "extra_inputs": {"top_k": 1}}  # fmt: skip

    tmp = Path(tempfile.mkdtemp(prefix="fleetbench-"))
    runner = Runner(tmp)
    standin_runs: list[dict[str, Any]] = []
    real_runs: list[dict[str, Any]] = []
    reruns: dict[str, dict[str, Any]] = {}
    warmups: list[dict[str, Any]] = []
    try:
        with bed_hosts(args, tmp) as hosts:
            names = sorted(hosts)[: args.hosts]
            for name in names:
                seed(Path(hosts[name]["trtsweep_cache_dir"]), demo_cache)
            common = {
                "fleet_prepare_python": "/usr/bin/python3",
                "fleet_prepare_wheelhouse": str(wheelhouse),
                "trtsweep_gpus": 1,
            }
            # one venv per runtime, shared by the hosts (default extras: [] for native, [local] for local)
            native_dir, local_dir = fleet_dir / "native", fleet_dir / "local"
            wrapper = standin_wrapper(tmp / "tritonserver-standin", native_dir / "venv" / "bin" / "python", args)
            standin = {**common, "fleet_prepare_dir": str(native_dir), "trtsweep_triton_runtime": "native",
                       "triton_serve_tritonserver": str(wrapper)}  # fmt: skip
            real = {**common, "fleet_prepare_dir": str(local_dir), "trtsweep_triton_runtime": "local"}

            warmups += warm_up(runner, "standin", hosts, names, standin, args.protocol, tmp)
            standin_runs = scaling(runner, "standin", hosts, names, standin, matrix, bench, args.repeat, tmp)
            inventory, vars_file = standin_runs[-1]["inventory"], standin_runs[-1]["vars_file"]
            reruns["cached"] = runner.sweep("standin-cached-rerun", inventory, vars_file)
            reruns["forced"] = runner.sweep("standin-forced-rerun", inventory, vars_file, "-e", "trtsweep_force=true")

            if not args.skip_real:
                warmups += warm_up(runner, "real", hosts, names, real, args.protocol, tmp)
                real_runs = scaling(runner, "real", hosts, names, real, real_matrix, real_bench, args.real_repeat, tmp)
    finally:
        if args.keep:
            shutil.copytree(tmp, args.keep, dirs_exist_ok=True, ignore=shutil.ignore_patterns("bed"))
        report(args, standin_runs, reruns, real_runs, warmups, runner.failures)
        shutil.rmtree(tmp, ignore_errors=True)


def size_case(args: argparse.Namespace) -> None:
    """The fleet at the size it exists for: `size_hosts` x `size_gpus` lanes, one point each (2 precisions x
    hosts x gpus / 2 batch sizes), against one point on one lane (T1). efficiency = T1 x points / (lanes x T);
    T = the lanes play (LANES_PLAY) of each run; controller CPU = the ansible-playbook tree's CPU seconds
    (rusage of everything it waited for) plus the heartbeats'."""
    demo_cache = ensure_demo_model()
    native_dir = args.fleet_dir.resolve() / "native"
    native_dir.mkdir(parents=True, exist_ok=True)
    if args.host_python:  # the hosts run trtsweep from this Python as it is (installed there beforehand)
        host_python = args.host_python
        install: dict[str, Any] = {"fleet_prepare_install": False, "ansible_python_interpreter": str(host_python)}
    else:  # the hosts install a venv from the wheelhouse (shared: one filesystem)
        host_python = native_dir / "venv" / "bin" / "python"
        install = {"fleet_prepare_python": "/usr/bin/python3", "fleet_prepare_dir": str(native_dir),
                   "fleet_prepare_wheelhouse": str(ensure_wheelhouse(args.wheelhouse.resolve()))}  # fmt: skip
    points = args.size_hosts * args.size_gpus
    batch_sizes = list(range(1, points // 2 + 1))
    bench = {"protocol": args.protocol, "concurrency": [1], "num_requests": args.size_requests, "max_tokens": 16,
             "warmup_requests": 0}  # fmt: skip
    tmp = Path(tempfile.mkdtemp(prefix="fleetbench-size-"))
    runner = Runner(tmp)
    runs: dict[str, dict[str, Any]] = {}
    try:
        with bed_hosts(args, tmp) as hosts:
            names = sorted(hosts, key=lambda n: int(n[1:]))[: args.size_hosts]
            for name in names:
                seed(Path(hosts[name]["trtsweep_cache_dir"]), demo_cache)
            wrapper = standin_wrapper(tmp / "tritonserver-standin", host_python, args)
            standin = {**install, "trtsweep_triton_runtime": "native", "triton_serve_tritonserver": str(wrapper),
                       "trtsweep_gpus": 1}  # fmt: skip
            warm_up(runner, "standin", hosts, names, standin, args.protocol, tmp)
            one = write_inventory(tmp / "inv-size-1.yml", hosts, names[:1], standin)
            alone = sweep_vars(tmp / "size-1.yml", "fleetbench-size-1", ["float32"], [1], bench, tmp / "results",
                               "pack")  # fmt: skip
            runs["one lane"] = runner.sweep("size-one-lane", one, alone)
            fleet = write_inventory(tmp / "inv-size.yml", hosts, names, {**standin, "trtsweep_gpus": args.size_gpus})
            grid = sweep_vars(tmp / "size.yml", "fleetbench-size", ["float32", "bfloat16"], batch_sizes, bench,
                              tmp / "results", "pack")  # fmt: skip
            runs["fleet"] = runner.sweep("size-fleet", fleet, grid)
    finally:
        if args.keep:
            shutil.copytree(tmp, args.keep, dirs_exist_ok=True, ignore=shutil.ignore_patterns("bed"))
        size_report(args, runs, runner.failures)
        shutil.rmtree(tmp, ignore_errors=True)


def size_report(args: argparse.Namespace, runs: dict[str, dict[str, Any]], failures: list[str]) -> None:
    print(f"machine: {os.cpu_count()} CPU cores; {args.size_hosts} hosts (network namespaces with their own sshd on "
          f"this machine, sharing its CPU) x {args.size_gpus} declared GPUs; stand-in server: load {args.load_s:g} s, "
          f"first token {args.first_token_ms:g} ms, then {args.token_ms:g} ms/token; {args.size_requests} requests "
          f"per point at concurrency 1; forks: ansible.cfg's")  # fmt: skip
    rows = []
    t1 = None
    for label, run in runs.items():
        records = [json.loads(p.read_text()) for p in run["results"].glob("*/status.json")]
        records = [r for r in records if r.get("run_id") == run["plan"].get("run_id")]
        ok = sum(1 for r in records if r.get("status") == "ok")
        lanes = len(run["plan"].get("lanes", []))
        npoints = len(run["plan"].get("points", []))
        points_s = play_s(run, LANES_PLAY)
        overheads = [r["overhead_s"] for r in run["rows"] if isinstance(r["overhead_s"], float)]
        if label == "one lane" and isinstance(points_s, float):
            t1 = points_s
        efficiency = (t1 * npoints / (lanes * points_s)) if t1 and isinstance(points_s, float) and lanes else "-"
        causes = sorted({str(r.get("cause", ""))[:80] for r in records if r.get("status") != "ok"})
        rows.append({
            "run": label, "lanes": lanes, "points": npoints, "ok": ok, "wall_s": run["wall"], "points_play_s": points_s,
            "overhead_p50_s": statistics.median(overheads) if overheads else "-",
            "overhead_max_s": max(overheads) if overheads else "-", "efficiency": efficiency,
            "ctl_cpu_s": run["controller_cpu_s"], "ctl_cpu_s/point": run["controller_cpu_s"] / max(1, npoints),
            "ctl_peak_pss_mb": run["controller_peak_pss_mb"], "cpu_busy": f"{run['cpu_busy']:.0%}", "rc": run["rc"],
        })  # fmt: skip
        for cause in causes:
            print(f"{label}: not ok: {cause}")
    if rows:
        print(format_rows(rows))
    for label, run in runs.items():
        breakdown = where_time_goes([run])
        if breakdown:
            print(f"\nwhere a point's time goes ({label}; seconds per point)")
            print(format_rows(breakdown))
    for failure in failures:
        print(f"problem: {failure}")


def where_time_goes(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Mean seconds per point of each stage (on its host, from the status records), with the server's load R and
    the benchmark window B taken out of the serve and benchmark stages."""
    rows = [r for run in runs for r in run["rows"] if isinstance(r["overhead_s"], float)]
    if not rows:
        return []
    parts = {"pre (preflight .. repository)": "pre_s", "serve stage less load R": "serve-load",
             "benchmark stage less window B": "stage-bench", "overhead O": "overhead_s"}  # fmt: skip
    return [{"part": name, "s_per_point": statistics.mean(r[key] for r in rows)} for name, key in parts.items()]


def report(args: argparse.Namespace, standin_runs: list[dict[str, Any]], reruns: dict[str, dict[str, Any]],
           real_runs: list[dict[str, Any]], warmups: list[dict[str, Any]], failures: list[str]) -> None:  # fmt: skip
    cpus = os.cpu_count()
    print(f"machine: {cpus} CPU cores; hosts: network namespaces with their own sshd on this machine (they share its "
          f"CPU); cpu_busy = whole-machine CPU use during the run, other users' processes included")  # fmt: skip
    print(f"stand-in server: load {args.load_s:g} s, first token {args.first_token_ms:g} ms, then "
          f"{args.token_ms:g} ms/token; protocol {args.protocol}")  # fmt: skip
    if warmups:
        print("\nwarm-up runs (not measured)")
        print(format_rows([{"run": w["label"], "wall_s": w["wall"], "prepare_s": play_s(w, "Prepare"),
                            "points": len(w["plan"].get("points", [])), "cpu_busy": f"{w['cpu_busy']:.0%}",
                            "rc": w["rc"]} for w in warmups]))  # fmt: skip
    forced = [reruns["forced"]] if "forced" in reruns else []
    rows = [r for run in [*standin_runs, *forced, *real_runs] for r in run["rows"]]
    if rows:
        print("\n1. per point (s): wall W = sum of stages; load R = server log start -> Started; bench B = llm-perf "
              "first request -> last response; overhead O = W - R - B")  # fmt: skip
        print(format_rows(rows))
    for kind, runs in (("stand-in", [*standin_runs, *forced]), ("real", real_runs)):
        breakdown = where_time_goes(runs)
        if breakdown:
            print(f"\n   where a point's time goes ({kind} runs above; seconds per point)")
            print(format_rows(breakdown))
    summary = []
    for kind, runs in (("standin", [*standin_runs, *forced]), ("real", real_runs)):
        overheads = [r["overhead_s"] for run in runs for r in run["rows"] if isinstance(r["overhead_s"], float)]
        if overheads:
            summary.append({
                "measure": f"overhead per point ({kind}), p50 / min / max", "value":
                f"{statistics.median(overheads):.1f} / {min(overheads):.1f} / {max(overheads):.1f} s",
                "target": f"< {TARGET_OVERHEAD_S:g} s",
                "met": "yes" if max(overheads) < TARGET_OVERHEAD_S else "no",
            })  # fmt: skip
    if standin_runs and reruns:
        first = standin_runs[-1]
        print(f"\n2. reruns of {first['label']} (same inventory and sweep)")
        rerun_rows = []
        for key, run in (("first run", first), *((f"{k} rerun", r) for k, r in reruns.items())):
            rerun_rows.append({"run": key, "wall_s": run["wall"], "prepare_s": play_s(run, "Prepare"),
                               "points_run": len(run["plan"].get("points", [])),
                               "kept": len(run["plan"].get("kept", [])), "vs_first": run["wall"] / first["wall"],
                               "cpu_busy": f"{run['cpu_busy']:.0%}", "rc": run["rc"]})  # fmt: skip
        print(format_rows(rerun_rows))
        for key, target in (("cached", TARGET_CACHED), ("forced", None)):
            if key in reruns:
                ratio = reruns[key]["wall"] / first["wall"]
                summary.append({"measure": f"{'fully cached' if key == 'cached' else 'forced'} rerun / first run",
                                "value": f"{ratio:.1%}", "target": f"< {target:.0%}" if target else "-",
                                "met": ("yes" if ratio < target else "no") if target else "-"})  # fmt: skip
    scale = [*(scaling_rows("standin", standin_runs) if standin_runs else []),
             *(scaling_rows("real (CPU)", real_runs) if real_runs else [])]  # fmt: skip
    if scale:
        print("\n3. scaling: efficiency = T1 / (N x TN); placement_bound = points / (N x most points on one host)")
        print(format_rows(scale))
        for row in scale:
            if row["hosts"] > 1:
                summary.append({"measure": f"efficiency {row['server']}, {row['hosts']} hosts",
                                "value": f"{row['efficiency']:.2f}", "target": f">= {TARGET_EFFICIENCY:g}",
                                "met": "yes" if row["efficiency"] >= TARGET_EFFICIENCY else "no"})  # fmt: skip
        if real_runs:
            print(f"real (CPU): the hosts share this machine's {cpus} cores; each real server computes on them")
    if summary:
        print("\nsummary")
        print(format_rows(summary))
    for failure in failures:
        print(f"problem: {failure}")


if __name__ == "__main__":
    main()
