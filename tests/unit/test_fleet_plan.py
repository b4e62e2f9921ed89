"""A run's plan and outcome: resume by settings hash, hosts with preflight problems, lost points."""

from __future__ import annotations

import json

import pytest

from trtsweep.errors import TrtsweepError
from trtsweep.fleet import runplan, status
from trtsweep.report import writer
from trtsweep.sweep.planning import expand


def sweep(**over):
    base = {
        "name": "s",
        "backend": "hf",
        "models": [{"repo_id": "HuggingFaceTB/SmolLM2-135M-Instruct", "name": "smol"}],
        "precisions": ["float32", "int8"],
        "parallelism": [{"tp": 1, "pp": 1}],
        "max_batch_sizes": [4],
        "lengths": [{"input": 256, "output": 16}],
        "streaming": [True],
        "benchmark": {"input_data": "data/prompts.jsonl"},
        "placement": {"gpus_per_point": 1, "mode": "pack"},
    }
    return {**base, **over}


def hosts(**problems):
    gpu = {"index": 0, "name": "declared", "memory_mb": 0}
    return {name: {"gpus": [gpu, {**gpu, "index": 1}], "problems": problems.get(name, [])} for name in ("a", "b")}


def finish_ok(results, plan, point_id):
    point = next(p for p in plan["points"] if p["id"] == point_id)
    status.begin(results, point, plan["run_id"], runplan.now())
    (results / point_id / "llm_perf.summary.json").write_text('{"levels": []}')
    status.finish(results, point_id, plan["run_id"], status="ok", stage="benchmark")


def test_settings_hash_ignores_where_a_point_ran_but_not_what_it_measures():
    point = expand(sweep())[0]
    moved = {**point, "host": "b", "gpus": [1], "ports": {"http": 9000}, "lane": "b--lane1", "order": 3}
    assert status.settings_hash(point) == status.settings_hash(moved)
    assert status.settings_hash(point) != status.settings_hash({**point, "max_batch_size": 8})


def test_a_rerun_keeps_complete_points_and_reruns_failed_lost_changed_ones(tmp_path):
    plan = runplan.make_plan(sweep(), hosts(), tmp_path)
    results = tmp_path / "s"
    assert json.loads((results / "plan.json").read_text())["run_id"] == plan["run_id"]
    ok_id, failed_id = (p["id"] for p in plan["points"])
    finish_ok(results, plan, ok_id)
    failed = next(p for p in plan["points"] if p["id"] == failed_id)
    status.begin(results, failed, plan["run_id"], runplan.now())
    status.finish(results, failed_id, plan["run_id"], status="failed", stage="serve", cause="boom")

    again = runplan.make_plan(sweep(), hosts(), tmp_path)
    assert again["kept"] == [ok_id] and [p["id"] for p in again["points"]] == [failed_id]
    assert again["run_id"] != plan["run_id"]
    assert len(runplan.make_plan(sweep(), hosts(), tmp_path, force=True)["points"]) == 2
    only = runplan.make_plan(sweep(), hosts(), tmp_path, force=True, only="*int8*")
    assert [p["id"] for p in only["points"]] == [failed_id] and only["left_out"] == [ok_id]
    changed = runplan.make_plan(sweep(max_batch_sizes=[8]), hosts(), tmp_path)
    assert len(changed["points"]) == 2 and not changed["kept"]  # other settings: nothing is reused


def test_a_point_with_its_summary_missing_is_rerun(tmp_path):
    plan = runplan.make_plan(sweep(), hosts(), tmp_path)
    point_id = plan["points"][0]["id"]
    finish_ok(tmp_path / "s", plan, point_id)
    (tmp_path / "s" / point_id / "llm_perf.summary.json").unlink()
    assert point_id not in runplan.make_plan(sweep(), hosts(), tmp_path)["kept"]


def test_hosts_with_preflight_problems_take_no_points(tmp_path):
    plan = runplan.make_plan(sweep(), hosts(a=["disk: 1.0 GiB free"]), tmp_path)
    assert {p["host"] for p in plan["points"]} == {"b"} and not plan["unplaced"]
    both = runplan.make_plan(sweep(), hosts(a=["disk: 1.0 GiB free"], b=["runtime native: tritonserver not found"]),
                           tmp_path)  # fmt: skip
    assert not both["points"] and len(both["unplaced"]) == 2
    record = status.read(tmp_path / "s", both["unplaced"][0]["point"])
    assert record["status"] == "failed" and record["stage"] == "preflight"
    assert "a: disk: 1.0 GiB free" in record["cause"] and "b: runtime native" in record["cause"]


def test_points_no_host_of_the_inventory_fits_fail_the_plan(tmp_path):
    with pytest.raises(TrtsweepError, match="no host can take 2 point"):
        runplan.make_plan(sweep(placement={"gpus_per_point": 4}), hosts(), tmp_path)


def test_unfinished_points_of_the_run_are_lost_with_the_hosts_reason(tmp_path):
    plan = runplan.make_plan(sweep(placement={"gpus_per_point": 1, "mode": "exclusive"}), hosts(), tmp_path)
    results = tmp_path / "s"
    started, never = plan["points"]
    record = status.begin(results, started, plan["run_id"], runplan.now())
    status.write(results, {**record, "stage": "serve"})  # the host's collector writes the stage the point entered
    events = {
        "run_id": plan["run_id"],  # the report reads the events of this run only
        "unreachable": {started["host"]: "ssh: connect timed out"},
    }
    (results / "events.json").write_text(json.dumps(events))
    status.close_run(results, plan)
    text, _, not_ok, *_ = writer.write(results)
    lost = {r["point"]: r for r in map(lambda p: status.read(results, p["id"]), plan["points"])}
    assert lost[started["id"]]["status"] == "lost"
    assert lost[started["id"]]["cause"] == (
        f"host {started['host']} unreachable: ssh: connect timed out (during stage serve)"
    )
    assert "before the point started" in lost[never["id"]]["cause"]
    assert len(not_ok) == 2 and "lost" in text


def test_a_record_of_another_run_is_never_completed(tmp_path):
    plan = runplan.make_plan(sweep(), hosts(), tmp_path)
    point = plan["points"][0]
    status.begin(tmp_path / "s", point, plan["run_id"], runplan.now())
    with pytest.raises(TrtsweepError, match="refusing to mix runs"):
        status.finish(tmp_path / "s", point["id"], "another-run", status="ok", stage="benchmark")


def test_a_point_only_a_troubled_host_fits_fails_at_preflight_while_a_healthy_host_stays(tmp_path):
    # h1 (1 GPU) is healthy, h3 (2 GPUs) failed preflight: the 2-GPU point is failed naming h3, the plan stands
    gpu = {"index": 0, "name": "declared", "memory_mb": 0}
    fleet = {
        "h1": {"gpus": [gpu], "problems": []},
        "h3": {"gpus": [gpu, {**gpu, "index": 1}], "problems": ["unreachable: Host key verification failed."]},
    }
    plan = runplan.make_plan(sweep(precisions=["int8"], placement={"gpus_per_point": 2}), fleet, tmp_path)
    assert not plan["points"] and [u["cause"] for u in plan["unplaced"]] == [
        "every host that fits it failed preflight: h3: unreachable: Host key verification failed."]  # fmt: skip
