"""`trtsweep`: helper commands around the Ansible sweep (demo model, planning, report)."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import FrameType
from typing import IO

from trtsweep.errors import TrtsweepError


def _demo_model(args: argparse.Namespace) -> None:
    from trtsweep.common.paths import cache_dir
    from trtsweep.hub.demo_model import materialize

    print(json.dumps(materialize(args.cache_dir or cache_dir()).as_dict(), indent=2))


def _plan(args: argparse.Namespace) -> None:
    from trtsweep.sweep.sweepfile import load, located

    sweep = load(args.sweep_file)
    try:
        print(_plan_text(sweep, args))
    except TrtsweepError as exc:
        raise located(args.sweep_file, exc) from exc


def _plan_text(sweep: dict, args: argparse.Namespace) -> str:
    from trtsweep.fleet import runplan
    from trtsweep.sweep import draftcheck, promptcheck, pytorch_axes
    from trtsweep.sweep.paths import model_dirs
    from trtsweep.sweep.planning import expand

    base = args.sweep_file.resolve().parent  # a sweep file's relative paths start at its directory
    if args.inventory is None:  # the configurations, and what each search strategy would spend on them
        from trtsweep.search.estimate import estimates
        from trtsweep.search.strategy import SearchSpec

        points = expand(sweep, base)
        checks = promptcheck.plan_checks(points, base)
        records = runplan.prompt_records(points, base)
        spend = estimates(points, SearchSpec.from_sweep(sweep.get("search")), records, args.results_dir / sweep["name"])
        dirs = model_dirs(sweep, base)
        drafts = draftcheck.plan_notes(points, dirs) + pytorch_axes.plan_notes(points, dirs)
        return "\n".join([*(p["id"] for p in points), *promptcheck.lines(checks), *drafts, *spend])
    from trtsweep.fleet.inventory import planning_hosts

    hosts, notes = planning_hosts(args.inventory, args.gpus, sweep)
    try:
        plan = runplan.make_plan(
            sweep, hosts, args.results_dir, force=args.force, only=args.only, write=False, base_dir=base
        )
    except TrtsweepError as exc:
        undeclared = [name for name in hosts if f"note: {name} declares no trtsweep_gpus" in "\n".join(notes)
                      or any("(trtsweep_slurm" in note or "'s nodes (" in note for note in notes)]  # fmt: skip
        if args.gpus is None and undeclared and "no host can take" in str(exc):
            raise TrtsweepError(f"{exc} ({', '.join(undeclared)} declare no GPUs: a host's GPUs are found when the "
                                "sweep runs; preview them with --gpus N, or --gpus N:NAME:GIB for a sweep that asks "
                                "for a GPU type, e.g. --gpus 8:H100:80)") from exc  # fmt: skip
        raise
    return "\n".join([*notes, runplan.plan_text(plan)])


def _assumed_gpus(text: str) -> int | list[dict]:
    """`--gpus`: N, or N:NAME[:GIB] (N GPUs named NAME, GIB of memory each)."""
    count, typed, rest = text.partition(":")
    name, sized, gib = rest.partition(":")
    try:
        n, memory_gb = int(count), float(gib) if sized else 0.0
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected N or N:NAME[:GIB] (8:H100:80), got {text!r}") from None
    if n < 0 or memory_gb < 0 or (typed and not name.strip()):
        raise argparse.ArgumentTypeError(f"expected N or N:NAME[:GIB] (8:H100:80), got {text!r}")
    if not typed:
        return n
    return [{"name": name, "memory_mb": int(memory_gb * 1024)} for _ in range(n)]


def _schema(args: argparse.Namespace) -> None:
    from trtsweep.sweep.schema import json_schema_text

    sys.stdout.write(json_schema_text())


def _report(args: argparse.Namespace) -> None:
    from trtsweep.report.writer import write

    text, _, not_ok, answer, page = write(args.results_dir)
    print(f"{text}\n\n" + "\n".join(answer) + f"\nreport: {page}")
    if not_ok:
        raise TrtsweepError(f"{len(not_ok)} point(s) not ok: {not_ok[0]}")


def _compare(args: argparse.Namespace) -> None:
    from trtsweep.common.fileio import atomic_write_text
    from trtsweep.report.compare import compare, page, text

    result = compare(args.a, args.b)
    atomic_write_text(args.out, page(result))
    print(f"{text(result)}\npage: {args.out}")


def _handoff(args: argparse.Namespace) -> None:
    from trtsweep.handoff.bundle import write_bundle

    manifest = write_bundle(args.results_dir, args.point, args.out, image=args.image, base_dir=args.base_dir)
    print(
        f"point {manifest['point']['id']} -> {args.out}/ (README.md says how to deploy it)\nchosen {manifest['chosen']}"
    )


# a signal to `trtsweep run` is passed on to ansible-playbook as this one (a hang-up ends the run like a TERM)
FORWARDED = {signal.SIGINT: signal.SIGINT, signal.SIGTERM: signal.SIGTERM, signal.SIGHUP: signal.SIGTERM}
STOP_WAIT_S = 60.0  # after a forwarded signal, how long ansible-playbook has to end before it is killed


class Playbook:
    """ansible-playbook in a process group of its own (the terminal's Ctrl-C reaches it once, through us), bound to
    end with `trtsweep run` however that ends (SIGTERM on its death, `kill -9` included); every signal `trtsweep run`
    gets is passed on to it, and it is killed if it has not ended STOP_WAIT_S later. The run's heartbeats see the
    playbook gone and end its lanes and servers on every host."""

    def __init__(self, argv: list[str], log: IO[str], env: dict[str, str]) -> None:
        from trtsweep.common.procs import die_with_parent

        me = os.getpid()

        def child() -> None:
            os.setpgid(0, 0)
            die_with_parent(me, signal.SIGTERM)

        self.proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env, preexec_fn=child)
        self.stopping: float | None = None
        for sig in FORWARDED:
            signal.signal(sig, self._forward)

    def _forward(self, signum: int, frame: FrameType | None) -> None:
        self.stopping = self.stopping or time.monotonic()
        with contextlib.suppress(ProcessLookupError):
            self.proc.send_signal(FORWARDED[signal.Signals(signum)])

    def poll(self) -> int | None:
        """The playbook's exit status (None while it runs); kills it when it outlives a forwarded signal too long."""
        rc = self.proc.poll()
        if rc is None and self.stopping is not None and time.monotonic() - self.stopping > STOP_WAIT_S:
            self.proc.kill()
        return rc


def _run(args: argparse.Namespace) -> None:
    """ansible-playbook with its plain output in a log file and a live view of the run on the terminal."""
    from trtsweep.fleet.progress import load, render

    rest = args.playbook_args[1:] if args.playbook_args[:1] == ["--"] else args.playbook_args
    argv = [str(Path(sys.executable).parent / "ansible-playbook"), *rest]
    log_path = args.log or Path(tempfile.mkstemp(prefix="trtsweep-run-", suffix=".log")[1])
    pointer = Path(tempfile.mkstemp(prefix="trtsweep-events-")[1])
    env = {**os.environ, "TRTSWEEP_EVENTS_POINTER": str(pointer)}
    print(f"ansible-playbook output: {log_path}", flush=True)
    with open(log_path, "w") as log, contextlib.ExitStack() as cleanup:
        cleanup.callback(pointer.unlink, missing_ok=True)
        playbook = Playbook(argv, log, env)
        shown = 0
        while True:
            rc = playbook.poll()
            events_path = pointer.read_text().strip() if pointer.stat().st_size else ""
            if events_path:
                text = render(load(Path(events_path)))
                if sys.stdout.isatty() and shown:
                    sys.stdout.write(f"\x1b[{shown}F\x1b[J")
                print(text, flush=True)
                shown = text.count("\n") + 1 if sys.stdout.isatty() else 0
            if rc is not None:
                break
            time.sleep(args.interval)
    tail = log_path.read_text(errors="replace").splitlines()[-25:]
    print("\n".join(tail))
    if rc != 0:
        raise TrtsweepError(f"ansible-playbook exited with {rc} (full output: {log_path})")


def _wheelhouse(args: argparse.Namespace) -> None:
    from trtsweep.fleet.bootstrap import wheelhouse

    print(wheelhouse(args.dest, args.extras))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="trtsweep", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo-model", help="materialize the bundled demo model (HF dir + offline hub cache)")
    demo.add_argument("--cache-dir", type=Path, help="default: $TRTSWEEP_CACHE or ~/.cache/trtsweep")
    demo.set_defaults(func=_demo_model)
    plan = sub.add_parser("plan", help="list the points of a sweep file; with -i, where each would run")
    plan.add_argument("sweep_file", type=Path)
    plan.add_argument("-i", "--inventory", help="Ansible inventory: print host, GPUs, ports and order per point")
    plan.add_argument("--gpus", type=_assumed_gpus, metavar="N[:NAME[:GIB]]",
                      help="GPUs of a host whose inventory declares none (trtsweep_gpus): a count, or a count, a "
                           "name and the memory of each, for sweeps that ask for a GPU type (8:H100:80)")  # fmt: skip
    plan.add_argument("--results-dir", type=Path, default=Path("results"), help="for resume (default: results)")
    plan.add_argument("--force", action="store_true", help="plan every point, complete or not")
    plan.add_argument("--only", help="comma-separated point-id globs")
    plan.set_defaults(func=_plan)
    schema = sub.add_parser("schema", help="print the JSON Schema of a sweep file (sweep.schema.json, for editors)")
    schema.set_defaults(func=_schema)
    report = sub.add_parser("report", help="print and write the report of a results/<sweep> directory")
    report.add_argument("results_dir", type=Path)
    report.set_defaults(func=_report)
    comp = sub.add_parser("compare", help="two sweeps' results side by side (e.g. two TensorRT-LLM versions)")
    comp.add_argument("a", type=Path, help="results/<sweep a>")
    comp.add_argument("b", type=Path, help="results/<sweep b>")
    comp.add_argument("--out", type=Path, default=Path("compare.html"), help="the comparison page (compare.html)")
    comp.set_defaults(func=_compare)
    handoff = sub.add_parser("handoff", help="one point of a sweep as a bundle operations can deploy")
    handoff.add_argument("results_dir", type=Path, help="results/<sweep>")
    handoff.add_argument("--point", default="best", help="point id, or best (default)")
    handoff.add_argument("--out", type=Path, required=True, help="the bundle's directory")
    handoff.add_argument("--image", help="Triton container image (default: the point's trtllm.container_image)")
    handoff.add_argument(
        "--base-dir",
        type=Path,
        default=None,
        help="where the sweep's relative paths start (default: as in the run, its plan.json)",
    )
    handoff.set_defaults(func=_handoff)
    run = sub.add_parser("run", help="ansible-playbook (args after --) with a compact live view of the sweep")
    run.add_argument("--log", type=Path, help="where ansible-playbook's plain output goes (default: a temp file)")
    run.add_argument("--interval", type=float, default=2.0, help="seconds between refreshes")
    run.add_argument("playbook_args", nargs=argparse.REMAINDER, help="e.g. -- sweep.yml -i inventory/x.yml")
    run.set_defaults(func=_run)
    house = sub.add_parser("wheelhouse", help="trtsweep's wheel and its dependency wheels, for offline hosts")
    house.add_argument("dest", type=Path)
    house.add_argument("--extras", nargs="*", default=["local"], help="extras to include (default: local)")
    house.set_defaults(func=_wheelhouse)
    args = parser.parse_args(argv)
    try:
        args.func(args)
    except TrtsweepError as exc:
        print(f"trtsweep: error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
