"""A sweep file is data: Jinja in it never runs when it is planned, unless templating is asked for.

A canary command (`touch <file>`) inside a sweep field must not run through `trtsweep plan` nor through
`ansible-playbook sweep.yml -e @file` (before this, Ansible rendered trusted extra vars where they were used:
the plan play ran the canary); with `-e trtsweep_sweep_templates=true` the values are rendered on purpose.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import yaml

from tests.conftest import ROOT

BIN = Path(sys.executable).parent
ENV = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"}


def canary_sweep(tmp_path: Path, value: str, **benchmark: object) -> Path:
    data = yaml.safe_load((ROOT / "group_vars" / "all" / "sweep.yml").read_text(encoding="utf-8"))
    data["trtsweep_sweep"]["models"][0]["name"] = value
    data["trtsweep_sweep"]["benchmark"].update(benchmark)
    path = tmp_path / "shared_sweep.yml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


def playbook(*args: str, cwd: Path = ROOT, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(BIN / "ansible-playbook"), str(ROOT / "sweep.yml"), *args], cwd=cwd,
                          env={**ENV, **env}, capture_output=True, text=True, timeout=300, check=False)  # fmt: skip


def test_trtsweep_plan_refuses_jinja_in_a_sweep_file_and_runs_nothing(tmp_path):
    canary = tmp_path / "canary"
    sweep = canary_sweep(tmp_path, f"smol{{{{ lookup('pipe', 'touch {canary}') }}}}")
    done = subprocess.run([str(BIN / "trtsweep"), "plan", str(sweep)], env=ENV, capture_output=True, text=True,
                          check=False)  # fmt: skip
    assert done.returncode != 0
    assert not canary.exists()
    assert done.stderr.strip().count("\n") == 0, done.stderr
    assert "field models[0].name holds a Jinja template" in done.stderr


def test_the_sweep_playbook_reads_a_shared_sweep_file_as_data(tmp_path):
    canary = tmp_path / "canary"
    sweep = canary_sweep(tmp_path, f"smol{{{{ lookup('pipe', 'touch {canary}') }}}}")
    done = playbook("-e", f"@{sweep}", "-e", f"trtsweep_results_dir={tmp_path / 'results'}")
    assert done.returncode != 0
    assert not canary.exists(), "the sweep file's lookup ran on the controller"
    assert "field models[0].name holds a Jinja template" in done.stdout
    assert "PLAY [Prepare the hosts" not in done.stdout  # any_errors_fatal: nothing after the refusal
    assert not (tmp_path / "results").exists()  # refused before anything was planned


def test_templating_is_an_explicit_opt_in(tmp_path):
    sweep = canary_sweep(tmp_path, "{{ 'smol' ~ 'lm2' }}", extra_inputs={"top_k": 1, "note": "{{ 6 * 7 }}"})
    no_hosts = tmp_path / "inventory.yml"
    no_hosts.write_text("all: {}\n", encoding="utf-8")  # the load play only (tagged always)
    done = playbook("-i", str(no_hosts), "-e", f"@{sweep}", "-e", "trtsweep_sweep_templates=true", "--tags", "always",
                    "-v", ANSIBLE_CALLBACK_RESULT_FORMAT="json")  # fmt: skip
    assert done.returncode == 0, done.stdout[-2000:]
    result = next(line for line in done.stdout.splitlines() if line.startswith("ok: [localhost] => "))
    loaded = json.loads(result.partition(" => ")[2])["sweep"]
    assert loaded["models"][0]["name"] == "smollm2"
    assert loaded["benchmark"]["extra_inputs"]["note"] == 42


def test_the_run_takes_the_sweep_files_directory_for_its_relative_paths(tmp_path):
    """`-e @mine/sweep.yml` from another directory: the load play finds the file among the `-e` values (as the
    plan, the lanes and the handoff then use it); `-e trtsweep_sweep_dir` overrides it."""
    mine = tmp_path / "mine"
    mine.mkdir()
    sweep = canary_sweep(mine, "smollm2", input_data="my_prompts.jsonl")
    no_hosts = tmp_path / "inventory.yml"
    no_hosts.write_text("all: {}\n", encoding="utf-8")

    def loaded(*extra: str) -> dict:
        done = playbook("-i", str(no_hosts), "-e", f"@{os.path.relpath(sweep, tmp_path)}", *extra, "--tags",
                        "always", "-v", cwd=tmp_path, ANSIBLE_CALLBACK_RESULT_FORMAT="json")  # fmt: skip
        assert done.returncode == 0, done.stdout[-2000:]
        result = next(line for line in done.stdout.splitlines() if line.startswith("ok: [localhost] => "))
        return json.loads(result.partition(" => ")[2])

    first = loaded()
    assert (first["sweep_file"], first["base_dir"]) == (str(sweep.resolve()), str(mine.resolve()))
    assert loaded("-e", f"trtsweep_sweep_dir={ROOT}")["base_dir"] == str(ROOT)
