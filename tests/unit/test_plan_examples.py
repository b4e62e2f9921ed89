"""The shipped examples agree: every example sweep plans on the example inventory as the docs show it (`trtsweep plan
sweeps/<sweep>.yml -i inventory/gpu_hosts.yml --gpus 8`, the copy of the example), and what the inventory declares
against a sweep (its TensorRT-LLM release, an image of another release) fails that sweep's points in the plan, naming
why, before the first GPU minute (it printed a clean plan, and preflight refused every host)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from trtsweep import cli

ROOT = Path(__file__).resolve().parents[2]
INVENTORY = ROOT / "inventory" / "gpu_hosts.example.yml"
SWEEPS = sorted((ROOT / "sweeps").glob("*.yml"))


def plan(capsys, *args: str) -> tuple[int, str]:
    code = cli.main(["plan", *args])
    captured = capsys.readouterr()
    return code, captured.out + captured.err


@pytest.mark.parametrize("sweep", SWEEPS, ids=[p.stem for p in SWEEPS])
def test_every_example_sweep_plans_on_the_example_inventory(sweep, capsys, monkeypatch):
    monkeypatch.chdir(ROOT)
    code, out = plan(capsys, str(sweep.relative_to(ROOT)), "-i", str(INVENTORY.relative_to(ROOT)), "--gpus",
                     "8:H100:80")  # fmt: skip
    assert code == 0, out
    assert "failed at preflight" not in out and "error" not in out.lower(), out
    lanes = [line for line in out.splitlines() if line.startswith("gpu-node-")]
    assert lanes, out  # every point placed on the example's hosts


def test_the_example_inventory_leaves_the_release_and_the_interpreter_to_the_sweep_and_the_bootstrap():
    group = yaml.safe_load(INVENTORY.read_text())["all"]["children"]["trtsweep_hosts"]["vars"]
    assert "trtsweep_trtllm_version" not in group  # one release for every example sweep cannot be declared
    assert "ansible_python_interpreter" not in group  # the bootstrap makes the venv; none exists before it


def test_a_host_declaring_another_release_fails_the_sweeps_points_in_the_plan_naming_why(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(ROOT)
    inventory = yaml.safe_load(INVENTORY.read_text())
    inventory["all"]["children"]["trtsweep_hosts"]["vars"]["trtsweep_trtllm_version"] = "1.2.0"
    (tmp_path / "hosts.yml").write_text(yaml.safe_dump(inventory))
    code, out = plan(capsys, "sweeps/qwen2_7b.yml", "-i", str(tmp_path / "hosts.yml"), "--gpus", "8")
    failed = [line for line in out.splitlines() if line.startswith("failed at preflight: ")]
    assert code == 0 and failed and len(failed) == len(yaml.safe_load(Path("sweeps/qwen2_7b.yml").read_text())
                                                        ["trtsweep_sweep"]["precisions"]) * 2, out  # fmt: skip
    assert all("this host declares TensorRT-LLM 1.2.0 (trtsweep_trtllm_version); the sweep's points need 0.11.0"
               in line for line in failed), failed  # fmt: skip
    code, out = plan(capsys, "sweeps/qwen2_7b_pytorch.yml", "-i", str(tmp_path / "hosts.yml"), "--gpus", "8")
    assert code == 0 and "failed at preflight" not in out, out  # its own release: planned


def test_gpus_given_with_a_type_fit_a_sweep_that_asks_for_one(capsys, monkeypatch):
    monkeypatch.chdir(ROOT)
    code, out = plan(capsys, "sweeps/hf_gpu_h100.yml", "-i", str(INVENTORY), "--gpus", "8")
    assert code == 2 and "(1 GPU(s) of type H100 with >= 40 GiB)" in out, out  # a count says no type
    code, out = plan(capsys, "sweeps/hf_gpu_h100.yml", "-i", str(INVENTORY), "--gpus", "8:H100:80")
    assert code == 0 and "planned with 8 x H100 (80 GiB)" in out, out
    with pytest.raises(SystemExit):
        cli.main(["plan", "sweeps/hf_gpu_h100.yml", "--gpus", "8:"])
    assert "expected N or N:NAME[:GIB] (8:H100:80), got '8:'" in capsys.readouterr().err


def test_the_handoff_docs_inventory_has_an_example_that_ansible_reads():
    from trtsweep.fleet.inventory import read

    assert "copy `inventory/serving.example.yml`" in (ROOT / "docs" / "handoff.md").read_text()
    hosts = read(str(ROOT / "inventory" / "serving.example.yml"))["_meta"]["hostvars"]
    assert sorted(hosts) == ["serve-01", "serve-02"] and hosts["serve-01"]["trtsweep_triton_runtime"] == "native"


def test_a_groups_trtsweep_setting_reaches_its_hosts_and_is_named_where_the_checkouts_config_is_not_in_effect(
    tmp_path, capsys, monkeypatch
):
    """By Ansible's default order the checkout's group_vars/all outranks an inventory file's group variables: a
    group's trtsweep_triton_runtime: native left every host on the CPU runtime (the example inventory had it so). The
    checkout's ansible.cfg turns that order around; under another configuration the plan names the variable."""
    monkeypatch.chdir(ROOT)
    inventory = yaml.safe_load(INVENTORY.read_text())
    assert inventory["all"]["children"]["trtsweep_hosts"]["vars"]["trtsweep_triton_runtime"] == "native"
    from trtsweep.fleet.inventory import read

    assert read(str(INVENTORY))["_meta"]["hostvars"]["gpu-node-01"]["trtsweep_triton_runtime"] == "native"
    code, out = plan(capsys, "sweeps/qwen2_7b_pytorch.yml", "-i", str(INVENTORY), "--gpus", "8")
    assert code == 0 and "failed at preflight" not in out, out
    (tmp_path / "ansible.cfg").write_text("[defaults]\n")  # Ansible's own order
    monkeypatch.setenv("ANSIBLE_CONFIG", str(tmp_path / "ansible.cfg"))
    code, out = plan(capsys, "sweeps/qwen2_7b_pytorch.yml", "-i", str(INVENTORY), "--gpus", "8")
    failed = [line for line in out.splitlines() if line.startswith("failed at preflight: ")]
    assert code == 0 and failed, out
    assert all("the inventory sets trtsweep_triton_runtime: 'native' for group trtsweep_hosts, but gpu-node-01 gets "
               "'local'" in line and "set it on each host" in line for line in failed), failed  # fmt: skip


def test_a_plan_without_gpus_says_they_are_found_at_run_time_and_how_to_preview_them(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(ROOT)
    code, out = plan(capsys, "sweeps/qwen2_7b.yml", "-i", str(INVENTORY))
    assert code == 2 and "gpu-node-01 declare no GPUs: a host's GPUs are found when the sweep runs; preview them " \
        "with --gpus N, or --gpus N:NAME:GIB" in out, out  # fmt: skip
    inventory = yaml.safe_load(INVENTORY.read_text())
    inventory["all"]["children"]["trtsweep_hosts"]["hosts"]["gpu-node-01"]["trtsweep_gpus"] = 8
    (tmp_path / "hosts.yml").write_text(yaml.safe_dump(inventory))
    code, out = plan(capsys, "sweeps/qwen2_7b.yml", "-i", str(tmp_path / "hosts.yml"))
    assert code == 0 and "note: gpu-node-01 declares trtsweep_gpus: there the run takes them as declared, and the " \
        "check that each server holds exactly its GPUs is off" in out, out  # fmt: skip


def test_the_slurm_example_inventory_plans_on_the_allocation_it_would_make(capsys, monkeypatch):
    """inventory/slurm.example.yml names no host, only trtsweep_slurm.allocate: the plan previews its shape (the
    nodes it would allocate, their GPUs as --gpus describes them), docs/slurm.md's quick start."""
    monkeypatch.chdir(ROOT)
    code, out = plan(capsys, "sweeps/qwen25_7b_h100.yml", "-i", "inventory/slurm.example.yml", "--gpus", "8:H100:80")
    assert code == 0, out
    assert "note: the hosts are the 2 node(s) the run allocates (trtsweep_slurm.allocate), 8 GPU(s) each" in out
    assert {line.split()[0] for line in out.splitlines() if line.startswith("slurm-node-")} == {
        "slurm-node-1",
        "slurm-node-2",
    }
    code, out = plan(capsys, "sweeps/qwen25_7b_h100.yml", "-i", "inventory/slurm.example.yml")
    assert code != 0 and "preview them with --gpus N" in out, out
