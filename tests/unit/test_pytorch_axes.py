"""The PyTorch flow's speculative / attention_dp / moe axes: points, ids, LLM API options checked against the
releases' decoding configs (src/trtsweep/toolchain/llmapi/args/<release>.json), and the plan-time refusals."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from trtsweep.errors import TrtsweepError
from trtsweep.sweep import planning, pytorch_axes
from trtsweep.toolchain.llmapi import args, options, serve

ROOT = Path(__file__).resolve().parents[2]

RELEASES = ("1.0", "1.1", "1.2")
NGRAM = {"name": "ngram", "decoding_type": "NGram", "max_draft_len": 4, "options": {"max_matching_ngram_size": 2}}
DRAFT = "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B"
EAGLE = {"name": "eagle3", "decoding_type": "Eagle", "max_draft_len": 3, "draft": {"repo_id": DRAFT},
         "options": {"eagle3_one_model": True}}  # fmt: skip


def sweep(release: str = "1.2", **over: Any) -> dict[str, Any]:
    return {
        "name": "axes",
        "backend": "tensorrtllm",
        "flow": "pytorch",
        "servers": ["trtllm-serve"],
        "trtllm": {"version": f"{release}.0", "family": "llama"},
        "models": [{"repo_id": "Org/Model-8B", "name": "m"}],
        "precisions": ["bf16"],
        "parallelism": [{"tp": 1, "pp": 1}],
        "max_batch_sizes": [8],
        "lengths": [{"input": 512, "output": 64}],
        "streaming": [True],
        "benchmark": {"concurrency": [1], "input_data": "data/prompts.jsonl"},
        **over,
    }


def refusal(value: dict[str, Any]) -> str:
    with pytest.raises(TrtsweepError) as err:
        planning.expand(value)
    return str(err.value)


@pytest.mark.parametrize("release", RELEASES)
def test_speculative_variants_are_points_with_their_config(release):
    points = planning.expand(sweep(release, speculative=["none", NGRAM, EAGLE]))
    stem = "m_bf16_tp1pp1_bs8_isl512osl64_stream"
    assert [p["id"] for p in points] == [f"{stem}_pytorch-serve", f"{stem}_spec-ngram_pytorch-serve",
                                         f"{stem}_spec-eagle3_pytorch-serve"]  # fmt: skip
    assert [p["speculative"] for p in points] == ["none", "ngram", "eagle3"]
    assert [p["config"] for p in points] == [stem, f"{stem}_spec-ngram", f"{stem}_spec-eagle3"]
    assert "speculative_config" not in points[0]["llm_api"]
    assert points[1]["llm_api"]["speculative_config"] == {"decoding_type": "NGram", "max_draft_len": 4,
                                                          "max_matching_ngram_size": 2}  # fmt: skip
    assert points[2]["llm_api"]["speculative_config"] == {"decoding_type": "Eagle", "max_draft_len": 3,
                                                          "eagle3_one_model": True}  # fmt: skip
    assert points[2]["draft_model"] == {"repo_id": DRAFT, "revision": None}
    # on the host, the draft's directory under the release's own field name; the result is the release's LLM API
    placed = options.with_draft(points[2]["llm_api"], release, "/hf/draft")
    field = "speculative_model" if release == "1.2" else "speculative_model_dir"
    assert placed["speculative_config"][field] == "/hf/draft"
    args.check_options(release, placed)


def test_the_engine_flows_points_are_planned_without_the_axes():
    both = {"flow": ["engine", "pytorch"], "servers": ["triton"]}
    plain = planning.expand(sweep(**both))
    points = planning.expand(sweep(**both, speculative=["none", NGRAM], attention_dp=[False, True],
                                   parallelism=[{"tp": 2}], moe=[{"ep": 2}]))  # fmt: skip
    engine = [p for p in points if p["flow"] == "engine"]
    assert len(engine) == 1 and engine[0]["id"] == plain[0]["id"].replace("tp1", "tp2")
    assert not {"speculative", "attention_dp", "moe_ep"} & set(engine[0])
    assert len([p for p in points if p["flow"] == "pytorch"]) == 4


def test_a_sweep_without_the_axes_plans_as_before():
    plain = planning.expand(sweep())
    assert not {"speculative", "attention_dp", "moe_ep", "moe_tp", "draft_model"} & set(plain[0])
    none = planning.expand(sweep(speculative=["none"]))
    assert none[0]["id"] == plain[0]["id"] and none[0]["llm_api"] == plain[0]["llm_api"]


def test_attention_dp_and_moe_make_points_that_fit_the_tp():
    value = sweep(parallelism=[{"tp": 4}, {"tp": 8}], attention_dp=[False, True],
                  moe=[{"ep": 4, "tp": 1, "backend": "CUTLASS"}, {"ep": 8}])  # fmt: skip
    points = planning.expand(value)
    # tp 4 takes moe ep 4 x tp 1, tp 8 takes ep 8 x tp 1: the other pairs are no TensorRT-LLM layout
    assert [p["id"].split("_stream")[1] for p in points] == [
        "_moe-ep4tp1-cutlass_pytorch-serve", "_moe-ep4tp1-cutlass_adp_pytorch-serve",
        "_moe-ep8tp1_pytorch-serve", "_moe-ep8tp1_adp_pytorch-serve"]  # fmt: skip
    adp = points[1]["llm_api"]
    assert (adp["enable_attention_dp"], adp["moe_expert_parallel_size"], adp["moe_tensor_parallel_size"]) == (
        True, 4, 1)  # fmt: skip
    assert adp["moe_config"] == {"backend": "CUTLASS"} and "moe_config" not in points[2]["llm_api"]
    assert (points[1]["attention_dp"], points[1]["moe_ep"], points[1]["moe_tp"]) == (True, 4, 1)


@pytest.mark.parametrize(
    ("over", "message"),
    [
        ({"flow": "engine", "trtllm": {"version": "1.2.0", "family": "llama"}, "speculative": ["none", NGRAM]},
         "sweep field 'speculative': an axis of the pytorch flow, and every point of this sweep is the engine flow's"),
        ({"speculative": [{**EAGLE, "draft": None}]}, "sweep field 'speculative[0].draft': Eagle needs a draft model"),
        ({"speculative": [{**NGRAM, "draft": {"repo_id": "a/b"}}]},
         "sweep field 'speculative[0].draft': NGram drafts without a draft model"),
        ({"speculative": [{**NGRAM, "max_draft_len": None}]},
         "sweep field 'speculative[0].max_draft_len': NGram drafts up to max_draft_len tokens a step: give it"),
        ({"speculative": [{**NGRAM, "options": {}}]},
         "sweep field 'speculative[0].options.max_matching_ngram_size': NGram matches up to max_matching_ngram_size "
         "tokens of the context: give it (an integer > 0, got None); TensorRT-LLM asserts it when the server starts"),
        ({"speculative": [{**NGRAM, "options": {"max_matching_ngram": 2}}]},
         "sweep field 'speculative[0]': speculative_config.max_matching_ngram: TensorRT-LLM 1.2's LLM API has no such "
         "option; did you mean 'max_matching_ngram_size'?"),
        ({"attention_dp": [True]}, "sweep field 'attention_dp': attention DP spreads requests over the tp ranks"),
        ({"moe": [{"ep": 2}]}, "sweep field 'moe[0]': moe tp x ep = 2 is no parallelism entry's tp (1)"),
        ({"parallelism": [{"tp": 2}], "moe": [{"ep": 2}], "pytorch": {"ep": 2}},
         "sweep field 'pytorch.ep': moe: sets the expert parallelism of each point: give moe or pytorch.ep"),
        ({"speculative": [NGRAM], "llm_api": {"speculative_config": {"decoding_type": "AUTO"}}},
         "sweep field 'llm_api.speculative_config': set by the sweep's speculative: axis"),
    ],
)  # fmt: skip
def test_what_a_point_cannot_take_is_refused_in_one_line(over, message):
    got = refusal(sweep(**over))
    assert got.startswith(message) and "\n" not in got, got


def test_a_decoding_field_follows_its_release():
    """NGramDecodingConfig.is_auto_heuristic is 1.0's only (removed at 1.1)."""
    flagged = {**NGRAM, "options": {**NGRAM["options"], "is_auto_heuristic": False}}
    planning.expand(sweep("1.0", speculative=[flagged]))
    assert "is_auto_heuristic: TensorRT-LLM 1.1's LLM API has no such option" in refusal(
        sweep("1.1", speculative=[flagged]))  # fmt: skip


@pytest.mark.parametrize("release", RELEASES)
def test_speculative_config_is_dispatched_on_its_decoding_type(release):
    """DecodingBaseConfig.from_dict: the decoding types of the release; Eagle3 is none of 1.0 .. 1.2's."""
    with pytest.raises(TrtsweepError, match=rf"llm_api\.speculative_config\.decoding_type: TensorRT-LLM {release} "
                                            r"takes one of MTP, Medusa, Eagle.*got 'Eagle3'"):  # fmt: skip
        args.check_options(release, {"speculative_config": {"decoding_type": "Eagle3", "max_draft_len": 3}})
    with pytest.raises(TrtsweepError, match=r"expected a mapping with a decoding_type"):
        args.check_options(release, {"speculative_config": 3})
    args.check_options(release, {"speculative_config": {"decoding_type": "MTP", "num_nextn_predict_layers": 3}})


def test_moe_on_a_dense_model_and_a_draft_of_another_vocabulary_are_refused(tmp_path, monkeypatch):
    dense, moe = tmp_path / "dense", tmp_path / "moe"
    for where, config in ((dense, {"vocab_size": 1000}), (moe, {"vocab_size": 1000, "num_local_experts": 8})):
        where.mkdir()
        (where / "config.json").write_text(json.dumps(config))
    value = sweep(parallelism=[{"tp": 2}], moe=[{"ep": 2}], search={"model_dirs": {"m": str(dense)}})
    assert refusal(value).startswith("sweep field 'moe[0]': Org/Model-8B is a dense model (its config.json names "
                                     "none of num_local_experts")  # fmt: skip
    planning.expand({**value, "search": {"model_dirs": {"m": str(moe)}}})
    drafts = {DRAFT: {"vocab_size": 32000}}
    real = pytorch_axes.read_config
    monkeypatch.setattr(pytorch_axes, "read_config", lambda repo, rev, dirs=None, name=None: drafts.get(repo) or
                        real(repo, rev, dirs, name))  # fmt: skip
    spec = sweep(speculative=[EAGLE], search={"model_dirs": {"m": str(moe)}})
    assert refusal(spec) == (f"sweep field 'speculative[0].draft': {DRAFT} has a vocabulary of 32000 tokens, "
                             "Org/Model-8B of 1000: a draft must share the model's tokenizer")  # fmt: skip


def test_the_hf_backend_takes_ngram_and_draft_target_drafting_only():
    hf = {"backend": "hf", "trtllm": None, "precisions": ["float32"]}
    points = planning.expand(sweep(**hf, speculative=["none", NGRAM]))
    assert points[1]["llm_api"]["speculative_config"]["decoding_type"] == "NGram"
    assert refusal(sweep(**hf, speculative=[EAGLE])).startswith(
        "sweep field 'speculative[0].decoding_type': the hf backend's stand-ins draft by NGram, DraftTarget "
        "only")  # fmt: skip
    assert refusal(sweep(**hf, attention_dp=[False, True])).startswith("sweep field 'attention_dp': backend hf")


@pytest.mark.parametrize("release", RELEASES)
@pytest.mark.parametrize("name", ["llama31_8b_speculative.yml", "qwen3_moe_attention_dp.yml"])
def test_the_example_sweeps_options_and_commands_are_each_releases(name, release):
    """sweeps/'s speculative and MoE sweeps planned against 1.0, 1.1 and 1.2: every point's LLM API options (the
    draft's directory set as the host sets it) pass the release's LLM API table, its trtllm-serve command the
    release's click options."""
    value = yaml.safe_load((ROOT / "sweeps" / name).read_text())["trtsweep_sweep"]
    value["trtllm"]["version"] = f"{release}.0"
    points = planning.expand(value, ROOT / "sweeps")
    assert points and any(set(pytorch_axes.AXIS_OPTIONS) & set(p["llm_api"]) for p in points)
    for point in points:
        placed = options.with_draft(point["llm_api"], release, "/hf/draft")
        args.check_options(release, placed)
        spec = serve.ServeSpec(model="/hf/m", options_file="/w/o.yml", port=8000, tp=point["tp"], pp=point["pp"],
                               ep=placed.get("moe_expert_parallel_size"))  # fmt: skip
        serve.argv(release, spec)


def model_dir(tmp_path: Path, name: str, config: dict[str, Any]) -> str:
    where = tmp_path / name
    where.mkdir()
    (where / "config.json").write_text(json.dumps(config))
    return str(where)


MTP = {"name": "mtp", "decoding_type": "MTP", "options": {"num_nextn_predict_layers": 1}}


def test_mtp_needs_a_checkpoint_with_mtp_layers_and_says_so_where_its_config_is_not_here(tmp_path):
    """MTPDecodingConfig drafts with the checkpoint's own layers (config.json num_nextn_predict_layers, DeepSeek-V3
    style); a Llama or Qwen checkpoint has none and fails at model load."""
    llama = model_dir(tmp_path, "llama", {"vocab_size": 1000, "architectures": ["LlamaForCausalLM"]})
    deepseek = model_dir(tmp_path, "deepseek", {"vocab_size": 1000, "num_nextn_predict_layers": 1,
                                                "n_routed_experts": 256})  # fmt: skip
    got = refusal(sweep(speculative=[MTP], search={"model_dirs": {"m": llama}}))
    assert got == (
        "sweep field 'speculative[0].decoding_type': MTP drafts with the checkpoint's own MTP layers, and "
        "Org/Model-8B's config.json has no num_nextn_predict_layers (DeepSeek-V3-style checkpoints have "
        "them): TensorRT-LLM fails at model load; use NGram, or Eagle / DraftTarget with a draft model"
    )
    points = planning.expand(sweep(speculative=["none", MTP], search={"model_dirs": {"m": deepseek}}))
    assert points[1]["llm_api"]["speculative_config"]["decoding_type"] == "MTP"
    assert pytorch_axes.plan_notes(points, {"m": deepseek}) == []
    unknown = planning.expand(sweep(speculative=[MTP]))  # no config here: planned, and the plan says what it left
    assert pytorch_axes.plan_notes(unknown) == [
        "model config of Org/Model-8B: not on this machine, so its MTP layers (num_nextn_predict_layers) were not "
        "checked (give search.model_dirs, or have it in the hub cache)"]  # fmt: skip


def test_attention_dp_is_refused_on_a_dense_model_and_measured_at_tp_times_the_load(tmp_path):
    dense = model_dir(tmp_path, "dense", {"vocab_size": 1000})
    moe = model_dir(tmp_path, "moe", {"vocab_size": 1000, "num_experts": 128})
    bench = {"concurrency": [1, 2, 4], "num_requests": 32, "input_data": "data/prompts.jsonl"}
    value = sweep(parallelism=[{"tp": 4}], attention_dp=[False, True], benchmark=bench)
    assert refusal({**value, "search": {"model_dirs": {"m": dense}}}).startswith(
        "sweep field 'attention_dp': Org/Model-8B is a dense model (its config.json names none of num_local_experts, "
        "num_experts, n_routed_experts): attention DP is for MoE models")  # fmt: skip
    plain, adp = planning.expand({**value, "search": {"model_dirs": {"m": moe}}})
    # each of the 4 ranks takes its own requests: the sweep's levels are a rank's
    assert (plain["benchmark"]["concurrency"], plain["benchmark"]["num_requests"]) == ([1, 2, 4], 32)
    assert "levels_scaled_by" not in plain["benchmark"]
    assert (adp["benchmark"]["concurrency"], adp["benchmark"]["num_requests"]) == ([4, 8, 16], 128)
    assert adp["benchmark"]["levels_scaled_by"] == 4
    load = {"load": {"search": "slo", "variable": "concurrency", "max": 16}, "input_data": "data/prompts.jsonl"}
    searched = planning.expand({**value, "attention_dp": [True], "search": {"model_dirs": {"m": moe}},
                                "benchmark": load, "slo": {"ttft_p99_ms": 500}})  # fmt: skip
    assert searched[0]["benchmark"]["load"]["max"] == 64


@pytest.mark.parametrize("backend", ["TRTLLM", "CUTEDSL"])
def test_a_blackwell_moe_backend_is_refused_on_hopper_and_placed_on_blackwell_gpus(backend):
    """TRTLLMGenFusedMoE ("SM100 Blackwell only") and CuteDslFusedMoE (SM100 CuTe DSL kernels) fail on H100/H200."""
    from trtsweep.fleet import placement

    value = sweep(parallelism=[{"tp": 2}], moe=[{"ep": 2, "backend": backend}, {"ep": 2, "backend": "CUTLASS"}])
    assert refusal({**value, "placement": {"gpu_type": "H100"}}) == (
        f"sweep field 'moe[0].backend': {backend}'s MoE kernels are Blackwell's (SM100: B100, B200, GB200, B300, "
        "GB300) only, and placement.gpu_type asks for H100: use CUTLASS (any GPU) there")  # fmt: skip
    blackwell, cutlass = planning.expand(value)
    assert blackwell["resources"]["gpu_arch"] == "sm100" and "gpu_arch" not in cutlass["resources"]
    hopper = placement.Host("h", [placement.Gpu(i, "NVIDIA H100 80GB HBM3", 81559) for i in range(8)])
    b200 = placement.Host("b", [placement.Gpu(i, "NVIDIA B200", 183359) for i in range(8)])
    assert not hopper.fits(blackwell["resources"]) and hopper.fits(cutlass["resources"])
    assert b200.fits(blackwell["resources"])
    with pytest.raises(TrtsweepError, match=r"no host can take 1 point\(s\): m_bf16_tp2pp1.*_moe-ep2tp1-"
                       rf"{backend.lower()}_pytorch-serve \(2 GPU\(s\) of architecture sm100 \(B100, B200, GB200, "
                       r"B300, GB300: its MoE backend's kernels\)\)"):  # fmt: skip
        placement.check_fit([blackwell, cutlass], [hopper])
    placement.check_fit([blackwell, cutlass], [hopper, b200])
    planning.expand({**value, "placement": {"gpu_type": "B200"}})
