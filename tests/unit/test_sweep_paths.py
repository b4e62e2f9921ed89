"""Where a sweep's relative paths start (trtsweep.sweep.paths): at the sweep file's directory, found among
ansible-playbook's `-e` values as Ansible reads them (the last one that gives the sweep wins), the same for
`trtsweep plan`; a file missing there but present in the checkout says how to write its path."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.conftest import ROOT
from trtsweep.errors import TrtsweepError
from trtsweep.handoff.smoke import sweep_base
from trtsweep.sweep import planning
from trtsweep.sweep.paths import default_base_dir, sweep_file

EMBEDDED = yaml.safe_load((ROOT / "group_vars" / "all" / "sweep.yml").read_text())["trtsweep_sweep"]


def own_sweep(folder: Path, input_data: str = "my_prompts.jsonl") -> Path:
    """The embedded sweep in `folder`/sweep.yml, its prompts (the checkout's) in `folder`/my_prompts.jsonl."""
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(ROOT / "data" / "prompts.jsonl", folder / "my_prompts.jsonl")
    sweep = {**EMBEDDED, "benchmark": {**EMBEDDED["benchmark"], "input_data": input_data}}
    path = folder / "sweep.yml"
    path.write_text(yaml.safe_dump({"trtsweep_sweep": sweep}))
    return path


def test_the_file_that_gives_the_sweep_is_found_among_the_extra_vars(tmp_path):
    sweep = own_sweep(tmp_path / "mine")
    other = tmp_path / "ports.yml"
    other.write_text("trtsweep_triton_http_port: 9000\n")
    found = sweep_file(["@mine/sweep.yml", f"@{other}", "trtsweep_force=true"], "trtsweep_sweep", tmp_path)
    assert found == sweep.resolve()
    # a later -e that gives the sweep inline wins, as in Ansible: no file, the checkout's rule
    assert sweep_file([f"@{sweep}", json.dumps({"trtsweep_sweep": {"name": "x"}})], "trtsweep_sweep", tmp_path) is None
    assert sweep_file([f"@{sweep}", "trtsweep_sweep={}"], "trtsweep_sweep", tmp_path) is None
    assert sweep_file([f"@{other}"], "trtsweep_sweep", tmp_path) is None


def test_trtsweep_plan_reads_the_prompts_beside_the_sweep_file_from_any_directory(tmp_path):
    sweep = own_sweep(tmp_path / "mine")
    done = subprocess.run([sys.executable, "-m", "trtsweep.cli", "plan", str(sweep)], cwd=tmp_path,
                          capture_output=True, text=True, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "smollm2-135m_float32" in done.stdout


def test_a_path_that_used_to_start_at_the_checkout_says_how_to_write_it_now(tmp_path):
    sweep = yaml.safe_load(own_sweep(tmp_path / "mine", "data/prompts.jsonl").read_text())["trtsweep_sweep"]
    with pytest.raises(TrtsweepError) as caught:
        planning.expand(sweep, tmp_path / "mine")
    message = str(caught.value)
    assert "\n" not in message and message.startswith("sweep field 'benchmark.input_data': ")
    assert f"relative paths start at the sweep file's directory, {tmp_path / 'mine'}" in message
    hint = message.rpartition(": write ")[2].split(" for the checkout's file")[0]  # from the sweep's directory
    assert (tmp_path / "mine" / hint).resolve() == (default_base_dir() / "data" / "prompts.jsonl").resolve()


def test_the_handoff_reads_the_prompts_where_the_run_found_them(tmp_path):
    (tmp_path / "plan.json").write_text(json.dumps({"base_dir": "/srv/sweeps"}))
    assert sweep_base(tmp_path) == Path("/srv/sweeps")
    assert sweep_base(tmp_path / "no-plan") == default_base_dir()  # results of an inline sweep, or copied


def test_an_edited_lengths_from_file_changes_the_points_settings_hash(tmp_path):
    """benchmark.synthetic.lengths_from is an input like the prompts, the trace and the conversations: its content
    hash is in the point, so an edited file reruns its points (and an earlier run's archive is not collected)."""
    from trtsweep.fleet.status import settings_hash

    drawn = tmp_path / "answers.jsonl"
    shutil.copyfile(ROOT / "data" / "prompts.jsonl", drawn)
    sweep = {
        **EMBEDDED,
        "benchmark": {
            **EMBEDDED["benchmark"],
            "input_data": str(ROOT / "data" / "prompts.jsonl"),
            "synthetic": {"lengths_from": "answers.jsonl"},
        },
    }
    before = {settings_hash(p) for p in planning.expand(sweep, tmp_path)}
    drawn.write_text("\n".join(drawn.read_text().splitlines()[:3]) + "\n")
    after = {settings_hash(p) for p in planning.expand(sweep, tmp_path)}
    assert before.isdisjoint(after)
