"""A search's rounds read back from the records (trtsweep.search.rounds): what a round point measured (its record,
its capacity search on either variable), a point lost with its host (measured again on a healthy host in the next
round, what it held counted), and what the search decided when it began kept in its ledger (auto's choice, the
predicted strategy's batch) so that a rerun replays it."""

from __future__ import annotations

import datetime as dt
import importlib.util
import json
from pathlib import Path
from typing import Any

import pytest

from trtsweep.fleet import runplan, status
from trtsweep.report import search as report_search
from trtsweep.search import predicted, rounds
from trtsweep.sweep.planning import expand

ROOT = Path(__file__).resolve().parent.parent.parent
START = "2026-11-27T05:00:00+00:00"
CONFIGS = [f"smol_{p}_tp1pp1_bs4_isl256osl16_stream" for p in ("float32", "int8")]
F32, INT8 = CONFIGS


def sweep(search: dict[str, Any] | None = None, precisions: tuple[str, ...] = ("float32", "int8")) -> dict[str, Any]:
    return {
        "name": "s", "backend": "hf",
        "models": [{"repo_id": "HuggingFaceTB/SmolLM2-135M-Instruct", "name": "smol"}],
        "precisions": list(precisions), "parallelism": [{"tp": 1, "pp": 1}], "max_batch_sizes": [4],
        "lengths": [{"input": 256, "output": 16}], "streaming": [True],
        "benchmark": {"input_data": "data/prompts.jsonl", "num_requests": 16,
                      "load": {"search": "slo", "variable": "concurrency", "max": 8, "max_levels": 4}},
        "slo": {"ttft_p99_ms": 1000},
        "placement": {"gpus_per_point": 1},
        **({"search": search} if search is not None else {}),
    }  # fmt: skip


def hosts(*names: str, problems: dict[str, list[str]] | None = None) -> dict[str, dict[str, Any]]:
    gpu = {"index": 0, "name": "declared", "memory_mb": 0}
    return {name: {"gpus": [gpu], "problems": (problems or {}).get(name, [])} for name in names}


def summary(tokens: float, capacity: float, variable: str = "concurrency", requests: int = 8) -> dict[str, Any]:
    """llm_perf.summary.json of a capacity search that met the SLOs up to `capacity` and missed twice that."""
    levels = [{variable: value, "summary": {"requests": requests, "ttft_ms": {"p99": 100.0 * value}}}
              for value in (1, capacity, capacity * 2)]  # fmt: skip
    steps = [{"value": v, "met": v <= capacity} for v in (1, capacity, capacity * 2)]
    concurrency = int(capacity) if variable == "concurrency" else None
    return {"search": {"variable": variable, "levels": steps, "bound": "tight",
                       "capacity": {"value": capacity, "concurrency": concurrency, "request_rate": capacity / 2,
                                    "output_token_throughput": tokens}},
            "levels": levels}  # fmt: skip


def measured_ok(results: Path, plan: dict[str, Any], point_id: str, tokens: float, capacity: float = 4,
                variable: str = "concurrency") -> None:  # fmt: skip
    point = next(p for p in plan["points"] if p["id"] == point_id)
    status.begin(results, point, plan["run_id"], START)
    (results / point_id / "llm_perf.summary.json").write_text(json.dumps(summary(tokens, capacity, variable)))
    status.finish(results, point_id, plan["run_id"], status="ok", stage="benchmark",
                  stages={"serve": 15.0, "benchmark": 45.0})  # fmt: skip


def test_an_outcome_is_the_records_spend_and_its_capacity_searchs_answer(tmp_path):
    record = {"point": "p", "status": "ok", "gpus": [0, 1], "stages": {"build": 5.0, "serve": 10.0, "benchmark": 30.0}}
    status.write(tmp_path, record)
    (tmp_path / "p" / "llm_perf.summary.json").write_text(json.dumps(summary(80.0, 4)))
    got = rounds.outcome(tmp_path, {"id": "p", "search": {"config": "c", "fidelity": 0.5}}, 2)
    assert got is not None and got.ok and not got.lost and (got.config, got.round, got.fidelity) == ("c", 2, 0.5)
    assert got.tokens_per_gpu == 40.0 and got.gpu_s == 90.0  # two GPUs held for 45 s
    assert (got.load_s, got.benchmark_s, got.requests) == (15.0, 30.0, 24)
    assert (got.capacity_concurrency, got.failed_level, got.levels, got.bound) == (4, 8, 3, "tight")
    assert got.latency["ttft_p99_ms"] == 400.0 and got.hint() == (4, 8) and got.at() == "concurrency 4"


def test_a_request_rate_search_outcome_has_the_latencies_at_its_capacity(tmp_path):
    status.write(tmp_path, {"point": "p", "status": "ok", "gpus": [], "stages": {"benchmark": 10.0}})
    (tmp_path / "p" / "llm_perf.summary.json").write_text(json.dumps(summary(30.0, 2.5, "request_rate")))
    got = rounds.outcome(tmp_path, {"id": "p"}, 1)
    assert got is not None and got.tokens_per_gpu == 30.0 and got.capacity_concurrency is None
    assert got.latency["ttft_p99_ms"] == 250.0  # the level at rate 2.5/s, not one matched on concurrency
    assert got.hint() == (2.5, 5.0) and got.at() == "rate 2.5/s"
    assert "30.0 output tok/s/GPU at rate 2.5/s (tight)" in got.evidence()


def test_a_lost_point_is_no_evidence_and_counts_the_time_it_held_its_gpus(tmp_path):
    end = (dt.datetime.fromisoformat(START) + dt.timedelta(seconds=90)).isoformat()
    status.write(tmp_path, {"point": "p", "status": "lost", "stage": "benchmark", "cause": "host b unreachable: cut",
                            "gpus": [0], "stages": {}, "started_at": START, "finished_at": end})  # fmt: skip
    got = rounds.outcome(tmp_path, {"id": "p"}, 1)
    assert got is not None and got.lost and not got.ok and got.gpu_s == 90.0
    assert got.evidence() == "point p lost with its host: lost at stage benchmark: host b unreachable: cut"
    status.write(tmp_path, {"point": "q", "status": "lost", "gpus": [0], "stages": {}})  # never started: held nothing
    assert rounds.outcome(tmp_path, {"id": "q"}, 1).gpu_s == 0.0
    # the link back before the run gave the host up: its server was stopped as the run's lease lapsed there
    cause = ("run_benchmark: benchmark stopped: Triton (pid 7, id x) exited with signal 15: stopped by its supervisor "
             "(lease expired): -")  # fmt: skip
    status.write(tmp_path, {"point": "r", "status": "failed", "stage": "benchmark", "cause": cause, "gpus": [],
                            "stages": {"serve": 20.0, "benchmark": 25.0}})  # fmt: skip
    lapsed = rounds.outcome(tmp_path, {"id": "r"}, 1)
    assert lapsed.lost and lapsed.gpu_s == 45.0 and "lease expired" in lapsed.evidence()


def events(results: Path, run_id: str, host: str, at: float) -> None:
    (results / "events.json").write_text(json.dumps({"run_id": run_id, "unreachable": {host: "ssh: timed out"},
                                                     "unreachable_at": {host: at}}))  # fmt: skip


def test_a_point_lost_with_its_host_is_measured_again_on_a_healthy_host_and_what_it_held_counts(tmp_path):
    spec = {"strategy": "halving", "finalists": 1, "screening": 0.5}
    first = runplan.make_plan(sweep(spec), hosts("a", "b"), tmp_path)
    results, run_id = tmp_path / "s", first["run_id"]
    placed = {p["id"]: p["host"] for p in first["points"]}
    assert placed == {f"{F32}_s1": "a", f"{INT8}_s1": "b"}
    measured_ok(results, first, f"{F32}_s1", 40.0)
    status.begin(results, next(p for p in first["points"] if p["host"] == "b"), run_id, START)  # b's link is cut
    events(results, run_id, "b", dt.datetime.fromisoformat(START).timestamp() + 90)
    # round 2: int8 measured again as it was to be (half the requests, a point of its own), on a, the host left
    second = runplan.make_plan(sweep(spec), hosts("a", "b"), tmp_path, search_round=2, run_id=run_id)
    assert [(p["id"], p["host"], p["search"]["fidelity"]) for p in second["points"]] == [(f"{INT8}_s2", "a", 0.5)]
    assert second["search"]["dropped"] == [] and second["search"]["more"]
    assert any(p.startswith("gone earlier in this run: host b unreachable") for p in second["hosts"]["b"]["problems"])
    lost = status.read(results, f"{INT8}_s1")
    assert lost["status"] == "lost" and lost["finished_at"].startswith("2026-11-27T05:01:30")
    ledger = json.loads((results / rounds.LEDGER).read_text())
    outcomes = {o["point"]: o for o in ledger["rounds"][0]["outcomes"]}
    assert outcomes[f"{INT8}_s1"]["lost"] and outcomes[f"{INT8}_s1"]["gpu_s"] == 90.0
    assert ledger["gpu_minutes"] == pytest.approx((60.0 + 90.0) / 60)  # the lost point's 90 s count
    measured_ok(results, second, f"{INT8}_s2", 30.0)
    # round 3: the step judged on both screenings, the better one in full; int8 dropped for its own numbers
    third = runplan.make_plan(sweep(spec), hosts("a", "b"), tmp_path, search_round=3, run_id=run_id)
    assert [p["id"] for p in third["points"]] == [F32] and all(p["host"] == "a" for p in third["points"])
    (drop,) = third["search"]["dropped"]
    assert drop["config"] == INT8 and drop["why"].startswith("rank 2 of 2 (keeping 1): point " + f"{INT8}_s2: 30.0")
    measured_ok(results, third, F32, 42.0)
    lines = report_search.lines(results)
    assert f"round 1 (screening, 50% of the requests per level): {F32}: 40.0 tok/s/GPU at concurrency 4 " in lines[1]
    assert f"{INT8}: lost with its host ({INT8}_s1: lost at stage preflight: host b unreachable" in lines[1]
    assert lines[2].startswith(f"round 2 (screening, 50% of the requests per level): {INT8}: 30.0 tok/s/GPU")
    assert lines[0].startswith(
        "search halving: 2 configurations, 3 rounds, 3 points measured (1 more lost with their host), 4.5 GPU-minutes"
    )  # the lost point's 90 s included
    # a rerun replays the search: the lost point is not run again (round 2 measured it again), nothing runs
    rerun = [runplan.make_plan(sweep(spec), hosts("a", "b"), tmp_path)]
    assert rerun[0]["points"] == [] and rerun[0]["lost"] == [f"{INT8}_s1"] and rerun[0]["kept"] == [f"{F32}_s1"]
    for number in (2, 3):
        rerun.append(runplan.make_plan(sweep(spec), hosts("a", "b"), tmp_path, search_round=number,
                                       run_id=rerun[0]["run_id"]))  # fmt: skip
    assert [r["kept"] for r in rerun[1:]] == [[f"{INT8}_s2"], [F32]] and not any(r["points"] for r in rerun)


def test_a_lost_full_measurement_is_made_again_as_a_point_of_its_own(tmp_path):
    first = runplan.make_plan(sweep({"strategy": "grid"}), hosts("a", "b"), tmp_path)
    results, run_id = tmp_path / "s", first["run_id"]
    assert sorted(p["id"] for p in first["points"]) == sorted(CONFIGS) and first["search"]["more"]
    measured_ok(results, first, F32, 40.0)
    status.begin(results, next(p for p in first["points"] if p["host"] == "b"), run_id, START)
    second = runplan.make_plan(sweep({"strategy": "grid"}), hosts("a", "b"), tmp_path, search_round=2, run_id=run_id)
    (again,) = second["points"]
    assert again["id"] == f"{INT8}_r2" and again["search"]["config"] == INT8 and again["search"]["fidelity"] == 1
    assert second["current"][INT8] and second["current"][f"{INT8}_r2"]  # the lost point stays part of the search


def test_the_predicted_batch_is_recorded_so_a_rerun_with_a_host_down_measures_the_same(tmp_path, monkeypatch):
    guesses = {"float32": 10.0, "int8": 30.0, "bfloat16": 20.0}

    def made(grid, *args):
        return {p["id"]: {"supported": True, "tokens_per_s_per_gpu": guesses[p["precision"]]} for p in grid}

    monkeypatch.setattr(predicted, "predictions", made)
    spec = {"strategy": "predicted", "margin": 0.1}
    three = ("float32", "int8", "bfloat16")
    first = runplan.make_plan(sweep(spec, three), hosts("a", "b"), tmp_path)
    ids = sorted(p["id"] for p in first["points"])
    assert [i.split("_")[1] for i in ids] == ["bfloat16", "int8"]  # two lanes: the two predicted best
    ledger = json.loads((tmp_path / "s" / rounds.LEDGER).read_text())
    assert ledger["record"]["batch"] == 2 and ledger["record"]["strategy"] == "predicted"
    # a rerun while host b is down: the recorded batch, the same configurations (not one lane's worth)
    rerun = runplan.make_plan(sweep(spec, three), hosts("a", "b", problems={"b": ["down"]}), tmp_path)
    assert sorted(p["id"] for p in rerun["points"]) == ids


def test_auto_is_the_cheaper_estimate_said_and_kept_for_the_rerun(tmp_path):
    plan = runplan.make_plan(sweep(), hosts("a"), tmp_path)
    results = tmp_path / "s"
    ledger = json.loads((results / rounds.LEDGER).read_text())
    # two configurations: halving has nothing to screen away, so the grid is as cheap: grid, said
    assert plan["search"]["strategy"] == ledger["strategy"] == "grid"
    assert ledger["chosen"].startswith("search auto: grid, the cheaper estimate (grid about ")
    assert ledger["chosen"] in plan["search"]["estimates"]
    # the search's records make every estimate different now; the rerun keeps the recorded choice all the same
    for point in plan["points"]:
        measured_ok(results, plan, point["id"], 40.0)
    again = runplan.make_plan(sweep(), hosts("a"), tmp_path)
    assert again["kept"] == sorted(CONFIGS) and again["search"]["strategy"] == "grid"
    assert ledger["chosen"] in again["search"]["estimates"]  # the plan says the recorded choice, not a new one
    assert "estimates from 2 earlier points of this sweep" in "\n".join(again["search"]["estimates"])
    # sixteen configurations of 400 requests per level: screening pays
    many = {**sweep(None, ("float32", "int8", "bfloat16", "float16")), "max_batch_sizes": [1, 2, 4, 8]}
    many["benchmark"] = {**many["benchmark"], "num_requests": 400}
    assert len(expand(many)) == 16
    chosen = runplan.make_plan(many, hosts("a"), tmp_path / "x")["search"]
    assert chosen["strategy"] == "halving" and chosen["chosen"].startswith("search auto: halving, the cheaper estimate")


def load_filter() -> Any:
    path = ROOT / "filter_plugins" / "trtsweep.py"
    spec = importlib.util.spec_from_file_location("trtsweep_filters", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_host_gone_since_the_prepare_play_gets_a_problem_whatever_its_facts():
    facts = {"gpus": [{"index": 0, "name": "declared", "memory_mb": 0}], "busy_gpus": [], "problems": []}
    hostvars = {"a": {"fleet_prepare_host_facts": facts},
                "b": {"fleet_prepare_host_facts": facts, "trtsweep_unreachable": "ssh: connect timed out"},
                "c": {"fleet_prepare_host_facts": facts}}  # fmt: skip
    got = load_filter().trtsweep_fleet_hosts(["a", "b", "c"], hostvars, ["a", "b"])
    assert got["a"]["problems"] == []
    assert got["b"]["problems"] == ["unreachable earlier in this run, nothing more sent to it: ssh: connect timed out"]
    assert got["c"]["problems"] == ["failed earlier in this run (see above), nothing more sent to it"]
    assert facts["problems"] == []  # the prepare play's facts are left as they were


def test_the_budget_bounds_the_first_round_and_the_report_says_what_it_left_unmeasured(tmp_path):
    # a point costs about 3.1 GPU-minutes here (the defaults: 120 s before the benchmark, 4 levels x 16 requests x
    # 1 s): 4 GPU-minutes buy one of the two configurations, the sweep's first
    spec = {"strategy": "grid", "budget_gpu_minutes": 4}
    first = runplan.make_plan(sweep(spec), hosts("a", "b"), tmp_path)
    results = tmp_path / "s"
    assert [p["id"] for p in first["points"]] == [F32]
    (drop,) = first["search"]["dropped"]
    assert drop["config"] == INT8 and drop["budget"] and drop["round"] == 0
    assert drop["why"].startswith(
        "not measured: within the budget (4 GPU-minutes, 0.0 spent) round 1 could measure "
        "1 of its 2 configurations, the best first; this one would have cost about 3.1"
    )
    assert first["search"]["estimates"][-1].startswith("budget 4 GPU-minutes: grid measures 1 of 2 configurations "
                                                       f"(left unmeasured: {INT8})")  # fmt: skip
    measured_ok(results, first, F32, 40.0)
    second = runplan.make_plan(sweep(spec), hosts("a", "b"), tmp_path, search_round=2, run_id=first["run_id"])
    assert second["points"] == [] and not second["search"]["more"]
    lines = report_search.lines(results)
    assert f"dropped before round 1: {INT8}: not measured: within the budget" in "\n".join(lines)
    assert lines[-2] == f"budget: 4 GPU-minutes, 1.0 spent; left unmeasured: {INT8}"


def test_a_budget_without_a_capacity_search_is_refused_naming_the_field():
    from trtsweep.errors import TrtsweepError
    from trtsweep.sweep.schema import validate

    plain = sweep({"budget_gpu_minutes": 10})
    del plain["benchmark"]["load"], plain["slo"]
    with pytest.raises(TrtsweepError, match=r"search\.budget_gpu_minutes.*give benchmark\.load"):
        validate(plain)
    validate({**plain, "search": {"strategy": "auto"}})  # auto without a capacity search: one plain round


def test_a_budget_that_buys_nothing_refuses_the_run_naming_the_field_and_plan_still_prints_it(tmp_path):
    """4 GPU-minutes buy halving no full measurement (found on the sizing sweep: the run measured nothing and failed in
    its report with 'nothing was measured'). The run is refused before anything starts; `trtsweep plan` (no write)
    still prints what the budget buys."""
    from trtsweep.errors import TrtsweepError

    spec = {"strategy": "grid", "budget_gpu_minutes": 1}
    with pytest.raises(TrtsweepError, match=r"^sweep field 'search.budget_gpu_minutes': 1 GPU-minutes leave nothing"):
        runplan.make_plan(sweep(spec), hosts("a", "b"), tmp_path)
    shown = runplan.make_plan(sweep(spec), hosts("a", "b"), tmp_path, write=False)
    assert shown["points"] == []
    assert shown["search"]["estimates"][-1].startswith("budget 1 GPU-minutes: grid measures 0")
