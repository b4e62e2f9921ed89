"""The `predicted` strategy at plan time with the real AIConfigurator (its offline database): the plan of an H100
host's sweep measures the configurations the tool cannot predict and its predicted best first, then stops once the
measured best beats every prediction left; the report puts each prediction next to its measurement."""

from __future__ import annotations

import json

from tests.unit.test_search_predict import H100, qwen, tool  # noqa: F401 - the real tool's fixtures
from trtsweep.fleet import runplan, status
from trtsweep.report import writer
from trtsweep.search.predicted import PREDICTIONS

NAME = "qwen-predicted"


def sweep(qwen_dir, tool_path):
    return {
        "name": NAME, "backend": "tensorrtllm", "trtllm": {"version": "0.11.0", "family": "qwen"},
        "models": [{"repo_id": "Qwen/Qwen2.5-7B-Instruct", "name": "qwen2.5-7b"}],
        "precisions": ["fp16", "fp8", "w4a8_awq"], "parallelism": [{"tp": 1, "pp": 1}], "max_batch_sizes": [64, 128],
        "lengths": [{"input": 1024, "output": 128}], "streaming": [True],
        "benchmark": {"input_data": "data/prompts.jsonl", "load": {"search": "slo", "variable": "concurrency",
                                                                   "max": 256}},
        "slo": {"ttft_p99_ms": 1000, "tpot_p99_ms": 50},
        "search": {"strategy": "predicted", "batch": 1, "margin": 0.1, "predictor": str(tool_path),
                   "model_dirs": {"qwen2.5-7b": str(qwen_dir)}},
    }  # fmt: skip


def hosts():
    gpus = [{"index": 0, "name": H100, "memory_mb": 81559}]  # one GPU: a point's tok/s per GPU is its own
    return {"gpu-01": {"gpus": gpus, "problems": []}}


def measured(results, plan, point_id, tokens_per_s, concurrency):
    """The point's record and capacity search as the lane would leave them (what the report reads)."""
    point = next(p for p in plan["points"] if p["id"] == point_id)
    status.begin(results, point, plan["run_id"], runplan.now())
    search = {"capacity": {"value": concurrency, "concurrency": concurrency, "request_rate": tokens_per_s / 128,
                           "output_token_throughput": tokens_per_s},
              "levels": [{"value": concurrency, "met": True}, {"value": concurrency + 1, "met": False}],
              "bound": "tight"}  # fmt: skip
    summary = {"search": search, "levels": [{"concurrency": concurrency, "summary": {"ttft_ms": {"p99": 500.0}}}]}
    (results / point_id / "llm_perf.summary.json").write_text(json.dumps(summary))
    status.finish(results, point_id, plan["run_id"], status="ok", stage="benchmark",
                  stages={"serve": 60.0, "benchmark": 240.0})  # fmt: skip


def test_the_plan_measures_the_predicted_best_first_and_the_report_checks_the_prediction(tool, qwen, tmp_path):  # noqa: F811
    first = runplan.make_plan(sweep(qwen, tool), hosts(), tmp_path)
    results = tmp_path / NAME
    made = json.loads((results / PREDICTIONS).read_text())["predictions"]
    w4a8 = [c for c in made if "_w4a8_awq_" in c]
    assert w4a8 and all(not made[c]["supported"] and "no GEMM quantization mode" in made[c]["reason"] for c in w4a8)
    supported = sorted((c for c in made if made[c]["supported"]), key=lambda c: -made[c]["tokens_per_s_per_gpu"])
    assert len(supported) >= 2 and made[supported[0]]["tokens_per_s_per_gpu"] > 0
    # round 1: what the tool cannot predict (measured as in grid) and its best (batch 1)
    assert sorted(p["id"] for p in first["points"]) == sorted([*w4a8, supported[0]])
    assert {k: first["search"][k] for k in ("strategy", "round", "points", "more", "dropped")} == {
        "strategy": "predicted", "round": 1, "points": 3, "more": True, "dropped": []}  # fmt: skip
    assert first["search"]["estimates"][0] == "estimate, grid: 6 points, about 60 GPU-minutes"
    best = made[supported[0]]
    for point in first["points"]:
        is_best = point["id"] == supported[0]
        measured(results, first, point["id"], best["tokens_per_s_per_gpu"] * (1.3 if is_best else 0.2), 100)
    # the measured best beats every prediction left by more than 10%: no second round, the rest dropped
    second = runplan.make_plan(sweep(qwen, tool), hosts(), tmp_path, search_round=2, run_id=first["run_id"])
    assert second["points"] == [] and not second["search"]["more"]
    assert {d["config"] for d in second["search"]["dropped"]} == set(supported[1:])
    assert all("beats every remaining prediction by more than 10%" in d["why"] for d in second["search"]["dropped"])
    lines = writer.write(results).verdict
    row = next(line for line in lines if line.startswith(f"predicted vs measured: {supported[0]}:"))
    assert f"{best['tokens_per_s_per_gpu']:.1f} vs {best['tokens_per_s_per_gpu'] * 1.3:.1f} tok/s/GPU (+30.0%)" in row
    assert any(line.startswith(f"predicted vs measured: {w4a8[0]}: not predicted") for line in lines)
