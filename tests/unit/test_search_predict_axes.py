"""The predictor on the PyTorch flow's axes, against the real AIConfigurator 0.12 (its venv: test_search_predict):
disaggregated configurations (`serving_mode: disagg`, the workers' shape pinned, the prediction the row of exactly
those workers), attention DP and MoE layouts on a MoE model, and what it does not predict (speculative decoding,
attention DP on a dense model) said so; the plan asks it for a sweep's aggregated and disaggregated points alike."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
import yaml

from tests.unit.test_search_predict import QWEN_7B, SLO, tool  # noqa: F401 (the tool's venv, a fixture)
from trtsweep.search import predict as pred
from trtsweep.search import predicted
from trtsweep.sweep import planning

# Qwen3-30B-A3B's shape: 128 routed experts (the tool reads only config.json)
QWEN3_MOE = {
    "architectures": ["Qwen3MoeForCausalLM"], "model_type": "qwen3_moe", "hidden_size": 2048,
    "intermediate_size": 6144, "moe_intermediate_size": 768, "num_experts": 128, "num_experts_per_tok": 8,
    "num_hidden_layers": 48, "num_attention_heads": 32, "num_key_value_heads": 4, "head_dim": 128,
    "max_position_embeddings": 40960, "vocab_size": 151936, "rms_norm_eps": 1e-6, "rope_theta": 1000000.0,
    "hidden_act": "silu", "torch_dtype": "bfloat16", "tie_word_embeddings": False, "decoder_sparse_step": 1,
    "norm_topk_prob": True, "mlp_only_layers": [],
}  # fmt: skip


def shape(context: tuple[int, int], generation: tuple[int, int]) -> dict:
    """{role: {tp, pp, instances}} from (instances, tp) pairs, as point["disaggregated"] has them."""
    pairs = {"context": context, "generation": generation}
    return {role: {"tp": tp, "pp": 1, "instances": n} for role, (n, tp) in pairs.items()}


DENSE = [
    {"id": "agg-tp1", "precision": "fp16", "tp": 1, "pp": 1, "max_batch_size": 512},
    {"id": "c1x1-g2x1", "precision": "fp16", "tp": 1, "pp": 1, "max_batch_size": 512,
     "disaggregated": shape((1, 1), (2, 1))},
    {"id": "c2x1-g1x2-bs64", "precision": "fp16", "tp": 2, "pp": 1, "max_batch_size": 64,
     "disaggregated": shape((2, 1), (1, 2))},
    {"id": "spec", "precision": "fp16", "tp": 1, "pp": 1, "max_batch_size": 512, "speculative": "eagle3"},
    {"id": "adp-dense", "precision": "fp16", "tp": 2, "pp": 1, "max_batch_size": 512, "attention_dp": True},
]  # fmt: skip


def model(root: Path, config: dict) -> Path:
    root.mkdir()
    (root / "config.json").write_text(json.dumps(config))
    return root


@pytest.fixture(scope="module")
def dense(tool, tmp_path_factory) -> tuple[dict[str, pred.Prediction], Path]:  # noqa: F811
    workdir = tmp_path_factory.mktemp("predict")
    qwen = model(tmp_path_factory.mktemp("m") / "qwen2.5-7b", QWEN_7B)
    out = pred.predict(DENSE, model_dir=qwen, system="h100_sxm", isl=1024, osl=128, slo=SLO, version=None,
                       workdir=workdir, executable=str(tool))  # fmt: skip
    return out, workdir


def runs(workdir: Path) -> list[tuple[dict, list[dict]]]:
    """(its task, its pareto.csv rows) of each tool run in `workdir`."""
    out = []
    for run in sorted(p for p in workdir.iterdir() if p.is_dir()):
        task = yaml.safe_load((run / "task.yaml").read_text())[pred.EXPERIMENT]
        [pareto] = run.glob(f"out/*/{pred.EXPERIMENT}/pareto.csv")
        with pareto.open(newline="") as handle:
            out.append((task, list(csv.DictReader(handle))))
    return out


def workers(task: dict) -> str:
    return f"{task['serving_mode']}-{task.get('max_prefill_workers')}-{task.get('max_decode_workers')}"


def test_a_disaggregated_configuration_is_the_tools_row_of_exactly_its_workers(dense):
    out, workdir = dense
    done = {workers(task): (task, rows) for task, rows in runs(workdir)}
    assert sorted(done) == sorted(
        {"agg-None-None", "disagg-1-2", "disagg-2-1"}
    )  # speculative and dense attention DP not run
    for config in DENSE[1:3]:
        got, want = out[config["id"]], config["disaggregated"]
        assert got.supported and got.reason is None and got.tokens_per_s_per_gpu, (config["id"], got)
        assert got.disaggregated is not None
        for role in ("context", "generation"):
            worker = got.disaggregated[role]
            assert (worker["tp"] * worker["dp"], worker["pp"], worker["workers"]) == (
                want[role]["tp"], want[role]["pp"], want[role]["instances"])  # fmt: skip
        assert got.disaggregated["generation"]["bs"] <= config["max_batch_size"]
        assert got.ttft_ms <= SLO["ttft_p99_ms"] and got.tpot_ms <= SLO["tpot_p99_ms"]
        task, rows = done[f"disagg-{want['context']['instances']}-{want['generation']['instances']}"]
        gpus = sum(want[r]["instances"] * want[r]["tp"] for r in want)
        assert (task["total_gpus"], task["num_gpu_per_replica"], task["decode_max_batch_size"]) == (
            gpus, [gpus], config["max_batch_size"])  # fmt: skip
        assert task["prefill_tp_candidates"] == [want["context"]["tp"]]
        assert task["decode_tp_candidates"] == [want["generation"]["tp"]]
        assert "model_path" not in task  # disagg takes prefill_* / decode_* only
        # the tool's own columns, as sdk/sweep.py _rate_match_dict writes them; the best row within the limits
        assert set(pred.DISAGG_COLUMNS) <= set(rows[0]) and "num_total_gpus" in rows[0]
        within = [r for r in rows if int(r["(d)bs"]) <= config["max_batch_size"]
                  and float(r["ttft"]) <= SLO["ttft_p99_ms"] and float(r["tpot"]) <= SLO["tpot_p99_ms"]]  # fmt: skip
        assert {int(r["num_total_gpus"]) for r in within} == {gpus}
        assert got.tokens_per_s_per_gpu == max(float(r["tokens/s/gpu"]) for r in within)


def test_the_aggregated_prediction_is_as_before_and_both_modes_are_ranked_together(dense):
    out, _ = dense
    agg = out["agg-tp1"]
    assert agg.supported and agg.disaggregated is None and agg.to_dict()["disaggregated"] is None
    scores = predicted.scores({k: v.to_dict() for k, v in out.items()})
    ranked = sorted((k for k, v in scores.items() if v), key=lambda k: -float(scores[k] or 0))
    assert set(ranked) == {"agg-tp1", "c1x1-g2x1", "c2x1-g1x2-bs64"}
    assert scores["spec"] is None and scores["adp-dense"] is None  # measured as in grid


def test_what_it_cannot_predict_is_said_not_refused(dense):
    out, _ = dense
    assert not out["spec"].supported and out["spec"].reason.startswith(
        "speculative decoding (eagle3): not predicted (AIConfigurator 0.12 models MTP only"
    )
    assert out["adp-dense"].reason == (
        "attention DP on a dense model: not predicted (AIConfigurator 0.12 models attention DP for MoE models)"
    )


def test_attention_dp_and_expert_parallelism_of_a_moe_model(tool, tmp_path):  # noqa: F811
    moe = model(tmp_path / "qwen3-30b-a3b", QWEN3_MOE)
    base = {"precision": "bf16", "tp": 2, "pp": 1, "max_batch_size": 128, "moe_ep": 2, "moe_tp": 1}
    configs = [{**base, "id": "adp-ep2", "attention_dp": True},
               {**base, "id": "disagg-adp", "attention_dp": True, "disaggregated": shape((1, 2), (1, 2))}]  # fmt: skip
    out = pred.predict(configs, model_dir=moe, system="h100_sxm", isl=1024, osl=128, slo=SLO, version=None,
                       workdir=tmp_path / "work", executable=str(tool))  # fmt: skip
    assert all(p.supported and p.tokens_per_s_per_gpu for p in out.values()), out
    tasks = {task["serving_mode"]: task for task, _ in runs(tmp_path / "work")}
    # attention DP: attention tp 1, dp the point's tp, the experts split ep 2 x moe tp 1
    agg, disagg = tasks["agg"], tasks["disagg"]
    assert (agg["agg_tp_candidates"], agg["agg_dp_candidates"], agg["agg_num_gpu_candidates"]) == ([1], [2], [2])
    assert (agg["agg_moe_ep_candidates"], agg["agg_moe_tp_candidates"]) == ([2], [1])
    assert (disagg["prefill_dp_candidates"], disagg["decode_dp_candidates"]) == ([2], [2])
    # with attention DP a rank batches its own requests: the tool's concurrency is bs x dp
    assert out["adp-ep2"].concurrency <= 2 * base["max_batch_size"]
    assert out["disagg-adp"].disaggregated["generation"]["dp"] == 2


def test_the_plan_asks_for_a_sweeps_disaggregated_points_and_plain_points_as_before(tmp_path, monkeypatch):
    asked: list[dict] = []
    monkeypatch.setattr(predicted.predict, "predict", lambda entries, **kw: asked.extend(entries) or {})
    sweep = {"name": "s", "backend": "tensorrtllm", "flow": "pytorch", "servers": ["trtllm-serve"],
             "trtllm": {"version": "1.2.0", "family": "qwen"}, "models": [{"repo_id": "Org/Model-8B", "name": "m"}],
             "precisions": ["bf16"], "parallelism": [{"tp": 1}], "max_batch_sizes": [8],
             "lengths": [{"input": 512, "output": 64}], "streaming": [True],
             "benchmark": {"concurrency": [1], "input_data": "data/prompts.jsonl"},
             "disaggregated": ["none", {"context": {"tp": 1}, "generation": {"tp": 1, "instances": 2}}]}  # fmt: skip
    grid = planning.expand(sweep)
    hosts = {"h": {"gpus": [{"index": i, "name": "NVIDIA H100 80GB HBM3"} for i in range(8)]}}
    predicted.predictions(grid, {"model_dirs": {"m": str(tmp_path), }, "predictor": str(tmp_path / "none")}, None,
                          hosts, tmp_path, tmp_path)  # fmt: skip
    plain, disagg = asked
    # predictions.json says what data they were made from (here: a tool that could not be asked)
    kept = json.loads((tmp_path / predicted.PREDICTIONS).read_text())
    assert kept["databases"]["h100_sxm"]["version"] is None and kept["databases"]["h100_sxm"]["backend"] == "trtllm"
    assert "disaggregated" not in plain and set(plain) == {
        "id",
        "precision",
        "tp",
        "pp",
        "max_batch_size",
        "isl",
        "osl",
        "kv_cache_dtype",
        "system",
        "model",
        "max_concurrency",
    }
    assert plain["max_concurrency"] == 1  # the sweep's one level: no predicted row beyond it
    assert disagg["disaggregated"] == shape((1, 1), (2, 1)) and disagg["system"] == "h100_sxm"
