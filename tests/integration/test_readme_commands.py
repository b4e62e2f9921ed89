"""The README's commands, exactly as a newcomer types them, on a clean copy of the checkout.

No `-e`, no overridden path: the default inventory, the default results directory (results/ of the checkout), the
default cache. Every command the README shows is listed here with what is checked, or why it cannot run on this
machine; a command added to the README without a line here fails the first test.

`make sweep` runs on a copy of the checkout's files (tracked and untracked, nothing ignored) whose `.venv` is this
test run's own environment (the one `make test` installed: make finds it up to date and goes straight to the
sweep). It must end rc 0 with every point ok, the report in `results/<sweep>/`, and nothing written anywhere else
in the checkout (a default rendered against another playbook's directory once put every record under
`playbooks/results/` and lost every point).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.conftest import ROOT
from tests.integration.report_browser import check_report_page

# every command the README shows -> how it is checked here ("run": this file runs it as written; else why not)
COMMANDS = {
    "make sweep": "run",
    "make test": "the test suite itself: CI runs it (.ci/run), this file is part of it",
    "ansible-playbook sweep.yml -i inventory/gpu_hosts.yml -e @sweeps/qwen2_7b.yml": "needs GPU hosts",
    "trtsweep plan sweeps/smollm2_sizing.yml": "run",
    "trtsweep plan sweeps/qwen25_7b_h100.yml -i inventory/gpu_hosts.example.yml --gpus 8:H100:80": "run",
    "ansible-playbook sweep.yml -i inventory/gpu_hosts.yml -e @sweeps/qwen25_7b_h100.yml": "needs GPU hosts",
    "ansible-playbook sweep.yml -e @sweeps/smollm2_sizing.yml": (
        "the sizing sweep's search (about 15 minutes here): tests/integration/test_search_sweep.py runs the search"
    ),
}
COMMAND = re.compile(r"^(?:make|trtsweep|ansible-playbook) \S.*$")


def readme_commands() -> list[str]:
    """The commands of the README's code: the lines of its fenced blocks and indented blocks that start with a
    command, without a trailing comment."""
    out, fenced = [], False
    for line in (ROOT / "README.md").read_text().splitlines():
        if line.startswith("```"):
            fenced = not fenced
            continue
        text = line.strip() if fenced or line.startswith("    ") else ""
        if COMMAND.match(text):
            out.append(text.split(" #")[0].strip())
    return out


def clean_copy(dest: Path) -> Path:
    """The checkout's files as a clone has them (tracked and untracked, nothing git ignores), with `.venv` this test
    run's own environment."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                            capture_output=True, check=True).stdout.decode().split("\0")  # fmt: skip
    for name in filter(None, listed):
        source = ROOT / name
        if not source.exists() and not source.is_symlink():  # deleted in the working tree, not yet committed
            continue
        target = dest / name
        target.parent.mkdir(parents=True, exist_ok=True)
        if source.is_symlink():
            target.symlink_to(os.readlink(source))
        else:
            shutil.copy2(source, target)
    marker = Path(sys.prefix) / ".installed"  # make's own record that the venv matches pyproject.toml
    if not marker.is_file() or marker.stat().st_mtime < (dest / "pyproject.toml").stat().st_mtime:
        pytest.fail(f"{sys.prefix} is older than pyproject.toml: `make install` first (else make sweep would reinstall "
                    "this test run's venv from the copy)", pytrace=False)  # fmt: skip
    (dest / ".venv").symlink_to(Path(sys.prefix))
    return dest


def tree(root: Path) -> dict[str, tuple[int, int]]:
    """Every file under `root` (the venv, results/ and Python's bytecode caches aside) with its size and modification
    time (`make install` compiles the checkout's Python into __pycache__, as any Python run may)."""
    out = {}
    for path in root.rglob("*"):
        rel = path.relative_to(root)
        if rel.parts[0] in (".venv", "results") or "__pycache__" in rel.parts or not path.is_file():
            continue
        stat = path.stat()
        out[str(rel)] = (stat.st_size, stat.st_mtime_ns)
    return out


def run(argv: list[str], cwd: Path, timeout: int) -> subprocess.CompletedProcess[str]:
    """`argv` as a shell user runs it: the environment of this test run, with the venv's bin first on PATH as
    `make install`'s users have it for `trtsweep`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANSIBLE_", "PYTEST_"))}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"
    return subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False)


def test_every_readme_command_is_checked_here_or_says_why_not():
    assert sorted(readme_commands()) == sorted(COMMANDS), "a README command without a line in COMMANDS (or gone)"


def test_trtsweep_plan_of_the_sizing_sweep_as_written(tmp_path):
    checkout = clean_copy(tmp_path / "checkout")
    before = tree(checkout)
    done = run(["trtsweep", "plan", "sweeps/smollm2_sizing.yml"], checkout, 300)
    assert done.returncode == 0, done.stderr
    sweep = yaml.safe_load((checkout / "sweeps/smollm2_sizing.yml").read_text())
    ids = [line for line in done.stdout.splitlines() if line.startswith(sweep["trtsweep_sweep"]["models"][0]["name"])]
    assert len(ids) == 4, done.stdout  # the README's 4 configurations
    assert any(line.startswith("halving:") or "halving" in line for line in done.stdout.splitlines()), done.stdout
    assert tree(checkout) == before
    assert not (checkout / "results").exists()


def test_trtsweep_plan_of_the_quick_start_on_the_example_inventory_as_written(tmp_path):
    checkout = clean_copy(tmp_path / "checkout")
    before = tree(checkout)
    command = "trtsweep plan sweeps/qwen25_7b_h100.yml -i inventory/gpu_hosts.example.yml --gpus 8:H100:80"
    done = run(command.split(), checkout, 300)
    assert done.returncode == 0, done.stderr
    placed = [line.split() for line in done.stdout.splitlines() if line.startswith("gpu-node-01 ")]
    assert len(placed) == 4 and "failed at preflight" not in done.stdout, done.stdout  # bf16, fp8 x TP 1, 2
    assert sorted(row[2] for row in placed) == ["0", "0", "0,1", "0,1"]  # each point its own GPUs
    assert tree(checkout) == before and not (checkout / "results").exists()


def point_files(results: Path, point: str) -> None:
    """A measured point of the embedded sweep: its records, its stages, its levels and every request recorded."""
    files = {p.name for p in (results / point).iterdir()}
    assert {"llm_perf.json", "llm_perf.csv", "llm_perf.summary.json", "point.json", "triton_server.log",
            "status.json"} <= files  # fmt: skip
    record = json.loads((results / point / "status.json").read_text())
    assert record["status"] == "ok" and record["host"] == "localhost" and record["stage"] == "benchmark"
    assert set(record["stages"]) == {"preflight", "download", "quantize", "build", "repository", "serve", "benchmark"}
    summary = json.loads((results / point / "llm_perf.summary.json").read_text())
    assert [lvl["concurrency"] for lvl in summary["levels"]] == [1, 2, 4]
    for level in summary["levels"]:
        s = level["summary"]
        assert s["failed"] == 0 and s["succeeded"] == 16
        assert s["ttft_ms"]["p50"] > 0 and s["output_token_throughput"] > 0 and s["input_token_throughput"] > 0
        assert 0.0 <= s["accuracy"]["rougeL"] <= 1.0
        assert s["server_metrics"]["per_model"]["ensemble"]["requests"] >= 16
    profile = json.loads((results / point / "llm_perf.json").read_text())
    assert len(profile["levels"][0]["requests"]) == 17  # 16 measured + 1 warm-up, every one recorded


def run_ids(results: Path, points: list[str]) -> dict[str, str]:
    return {p: json.loads((results / p / "status.json").read_text())["run_id"] for p in points}


@pytest.mark.e2e
@pytest.mark.timeout(2400)  # the embedded sweep and its resume on 2 CPU cores
def test_make_sweep_as_written_on_a_clean_copy_measures_every_point_into_results(tmp_path):
    """The README's first command end to end: the embedded sweep's answer, records, report page and resume (this is
    the suite's one full run of the embedded sweep)."""
    checkout = clean_copy(tmp_path / "checkout")
    before = tree(checkout)
    done = run(["make", "sweep"], checkout, 1700)
    out = done.stdout + done.stderr
    assert done.returncode == 0, out[-4000:]
    assert "ansible-playbook sweep.yml" in out and " -e " not in out.split("ansible-playbook", 1)[1].splitlines()[0]
    name = yaml.safe_load((ROOT / "group_vars/all/sweep.yml").read_text())["trtsweep_sweep"]["name"]
    results = checkout / "results" / name
    plan = json.loads((results / "plan.json").read_text())
    records = {p["id"]: json.loads((results / p["id"] / "status.json").read_text()) for p in plan["points"]}
    assert {k: r["status"] for k, r in records.items()} == dict.fromkeys(records, "ok"), records
    assert len(records) == 2
    for name_ in ("report.html", "results.csv", "results.json", "report.md"):
        assert (results / name_).stat().st_size > 0, name_
    # nothing outside results/ was written or changed in the checkout (no playbooks/results/, no .cache/)
    assert tree(checkout) == before, sorted(set(tree(checkout)) ^ set(before))
    # a grid sweep runs no search-round play and prints nothing that did not run
    assert "skipping" not in out and "search" not in out.lower().replace("research", ""), out[-3000:]
    # the answer under the embedded sweep's SLOs: int8 is faster here but far less accurate than float32
    fp32, int8 = (f"smollm2-135m_{p}_tp1pp1_bs4_isl1024osl128_stream" for p in ("float32", "int8"))
    assert f"best under the SLOs: {fp32}" in out and f"{int8}: misses rougeL" in out, out[-4000:]
    assert f"report: {results / 'report.html'}" in out
    report = (results / "report.md").read_text()
    assert f"best under the SLOs: {fp32}" in report and (results / "report.csv").is_file()
    print(f"report screenshot: {check_report_page(results, tmp_path)}")
    for point in (fp32, int8):  # the embedded sweep compares precisions
        point_files(results, point)
    first = run_ids(results, [fp32, int8])

    # again: every point complete with the same settings, nothing runs again
    resumed = run(["make", "sweep"], checkout, 600)
    assert resumed.returncode == 0, (resumed.stdout + resumed.stderr)[-4000:]
    assert "kept (complete from an earlier run with the same settings)" in resumed.stdout
    assert run_ids(results, [fp32, int8]) == first
