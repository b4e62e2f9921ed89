"""What does a run of the embedded sweep cost when nothing is left to measure? (issue 39: a fully cached rerun
under 5 s; 9.1 s before)

Runs `ansible-playbook sweep.yml` (the embedded default sweep, localhost) once to measure every point if the results
directory is new, then --runs fully cached reruns, and prints a table: wall seconds and the CPU seconds of
ansible-playbook and everything it waited for (its modules; the lane starts nothing in a cached rerun), and the
slowest tasks of the last rerun (from a callback that times each task). The machine should be otherwise idle: other
users' processes only ever add time.

Run: .venv/bin/python benchmarks/rerun.py [--runs 5] [--results DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
TIMER = """
import json, os, time
from ansible.plugins.callback import CallbackBase
class CallbackModule(CallbackBase):
    CALLBACK_VERSION, CALLBACK_TYPE, CALLBACK_NAME, CALLBACK_NEEDS_ENABLED = 2.0, "aggregate", "task_timer", True
    def __init__(self):
        super().__init__()
        self.rows, self.last = [], None
    def _mark(self, name):
        now = time.monotonic()
        if self.last:
            self.rows.append([self.last[0], now - self.last[1]])
        self.last = (name, now)
    def v2_playbook_on_task_start(self, task, is_conditional):
        self._mark(task.get_name())
    def v2_playbook_on_play_start(self, play):
        self._mark("(play) " + play.get_name())
    def v2_playbook_on_stats(self, stats):
        self._mark("end")
        with open(os.environ["TASK_TIMES"], "w") as out:
            json.dump(self.rows, out)
"""


def run(results: Path, plugins: Path, times: Path) -> tuple[float, float]:
    """(wall s, CPU s of ansible-playbook and its waited children) of one run; fails on a failed run."""
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}", "TASK_TIMES": str(times),
           "ANSIBLE_CALLBACK_PLUGINS": f"{plugins}{os.pathsep}{ROOT / 'callback_plugins'}",
           "ANSIBLE_CALLBACKS_ENABLED": "trtsweep_events,task_timer"}  # fmt: skip
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.monotonic()
    done = subprocess.run([str(BIN / "ansible-playbook"), "sweep.yml", "-e", f"trtsweep_results_dir={results}"],
                          cwd=ROOT, env=env, capture_output=True, text=True, check=False)  # fmt: skip
    wall = time.monotonic() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        sys.exit(f"the run failed:\n{done.stdout[-3000:]}")
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--results", type=Path, default=ROOT / "results")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        plugins, times = Path(tmp) / "plugins", Path(tmp) / "times.json"
        plugins.mkdir()
        (plugins / "task_timer.py").write_text(TIMER)
        first = run(args.results, plugins, times)  # measures what is missing; cached when the results are there
        reruns = [run(args.results, plugins, times) for _ in range(args.runs)]
        tasks = sorted(json.loads(times.read_text()), key=lambda row: -row[1])
    print("| run | wall s | CPU s (ansible-playbook + modules) |\n|---|---:|---:|")
    print(f"| first (measures what is missing) | {first[0]:.1f} | {first[1]:.1f} |")
    for i, (wall, cpu) in enumerate(reruns, 1):
        print(f"| cached rerun {i} | {wall:.2f} | {cpu:.2f} |")
    print(f"| cached rerun, median of {len(reruns)} | {statistics.median(w for w, _ in reruns):.2f} | "
          f"{statistics.median(c for _, c in reruns):.2f} |")  # fmt: skip
    print("\nslowest tasks of the last rerun:\n| s | task |\n|---:|---|")
    for name, seconds in tasks[:8]:
        print(f"| {seconds:.2f} | {name} |")


if __name__ == "__main__":
    main()
