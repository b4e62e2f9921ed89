"""The PyTorch flow's disaggregated axis (trtsweep.sweep.disaggregated): points, ids, the normalized value, GPUs,
its combinations with the parallelism entries and the other axes, and the plan-time refusals; transceivers checked
against the releases' CacheTransceiverConfig (src/trtsweep/toolchain/llmapi/args/<release>.json)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from trtsweep.errors import TrtsweepError
from trtsweep.fleet import placement, status
from trtsweep.sweep import planning
from trtsweep.toolchain.llmapi import disagg

STEM = "m_bf16_tp{tp}pp{pp}_bs8_isl512osl64_stream"
C1G1 = {"context": {"tp": 1}, "generation": {"tp": 1}}
C1G2 = {"context": {"tp": 1}, "generation": {"tp": 1, "instances": 2}}
C2G1 = {"name": "wide", "context": {"tp": 1, "instances": 2}, "generation": {"tp": 2, "pp": 2},
        "transceiver": {"backend": "UCX", "max_tokens_in_buffer": 4096}}  # fmt: skip
NGRAM = {"name": "ngram", "decoding_type": "NGram", "max_draft_len": 4, "options": {"max_matching_ngram_size": 2}}


def sweep(release: str = "1.2", **over: Any) -> dict[str, Any]:
    return {
        "name": "disagg",
        "backend": "tensorrtllm",
        "flow": "pytorch",
        "servers": ["trtllm-serve"],
        "trtllm": {"version": f"{release}.0", "family": "qwen"},
        "models": [{"repo_id": "Org/Model-8B", "name": "m"}],
        "precisions": ["bf16"],
        "parallelism": [{"tp": 1}, {"tp": 2}],
        "max_batch_sizes": [8],
        "lengths": [{"input": 512, "output": 64}],
        "streaming": [True],
        "benchmark": {"concurrency": [1], "input_data": "data/prompts.jsonl"},
        **over,
    }


def refusal(value: dict[str, Any]) -> str:
    with pytest.raises(TrtsweepError) as err:
        planning.expand(value)
    text = str(err.value)
    assert "\n" not in text
    return text


def test_a_value_is_planned_once_with_its_workers_parallelism():
    points = planning.expand(sweep(disaggregated=["none", C1G1, C1G2, C2G1]))
    serve = "_pytorch-serve"
    assert [p["id"] for p in points] == [
        STEM.format(tp=1, pp=1) + serve,
        STEM.format(tp=1, pp=1) + "_disagg-c1x1-g1x1" + serve,
        STEM.format(tp=1, pp=1) + "_disagg-c1x1-g2x1" + serve,
        STEM.format(tp=2, pp=2) + "_disagg-c2x1-g1x2p2" + serve,
        STEM.format(tp=2, pp=1) + serve,
    ]  # the aggregated points once per parallelism entry, each disaggregated value once
    agg, c1g1, c1g2, wide, _ = points
    assert "disaggregated" not in agg and agg["resources"]["gpus"] == 1
    assert c1g1["disaggregated"] == {"name": "c1x1-g1x1", "context": {"tp": 1, "pp": 1, "instances": 1},
                                     "generation": {"tp": 1, "pp": 1, "instances": 1},
                                     "transceiver": {"backend": "DEFAULT"}}  # fmt: skip
    assert wide["disaggregated"] == {"name": "wide", "context": {"tp": 1, "pp": 1, "instances": 2},
                                     "generation": {"tp": 2, "pp": 2, "instances": 1},
                                     "transceiver": {"backend": "UCX", "max_tokens_in_buffer": 4096}}  # fmt: skip
    # every worker's GPUs; the point's tp / pp are the generation workers'
    assert [p["resources"]["gpus"] for p in (c1g1, c1g2, wide)] == [2, 3, 6]
    assert (wide["tp"], wide["pp"], wide["world_size"]) == (2, 2, 4)
    assert (wide["llm_api"]["tensor_parallel_size"], wide["llm_api"]["pipeline_parallel_size"]) == (2, 2)
    assert "cache_transceiver_config" not in wide["llm_api"]  # the generator's, from the value's transceiver
    assert c1g1["config"] == STEM.format(tp=1, pp=1) + "_disagg-c1x1-g1x1"
    assert c1g1["disaggregated"] is not c1g2["disaggregated"]


def test_a_sweep_without_the_key_or_with_none_alone_plans_as_before():
    plain = planning.expand(sweep())
    assert not any("disaggregated" in p for p in plain)
    for value in (sweep(disaggregated=["none"]), sweep(disaggregated=["none", C1G1])):
        points = [p for p in planning.expand(value) if "disaggregated" not in p]
        assert [p["id"] for p in points] == [p["id"] for p in plain]
        assert [status.settings_hash(p) for p in points] == [status.settings_hash(p) for p in plain]


def test_a_speculative_variant_applies_to_the_disaggregated_workers_and_the_variant_ends_the_id():
    points = planning.expand(sweep(parallelism=[{"tp": 1}], speculative=["none", NGRAM], disaggregated=["none", C1G1]))
    stem = STEM.format(tp=1, pp=1)
    assert [p["config"] for p in points] == [stem, stem + "_spec-ngram", stem + "_disagg-c1x1-g1x1",
                                             stem + "_disagg-c1x1-g1x1_spec-ngram"]  # fmt: skip
    assert points[3]["llm_api"]["speculative_config"]["decoding_type"] == "NGram"
    assert points[3]["speculative"] == "ngram" and points[3]["disaggregated"]["name"] == "c1x1-g1x1"


def test_attention_dp_and_moe_combine_where_every_worker_takes_them(tmp_path):
    model = tmp_path / "moe"
    model.mkdir()
    (model / "config.json").write_text('{"num_experts": 8, "vocab_size": 10}')
    both2 = {"context": {"tp": 2}, "generation": {"tp": 2, "instances": 2}}
    value = sweep(parallelism=[{"tp": 2}, {"tp": 4}], moe=[{"ep": 2}, {"ep": 4}], attention_dp=[True],
                  disaggregated=["none", both2], search={"model_dirs": {"m": str(model)}})  # fmt: skip
    points = planning.expand(value)
    assert [p["id"].split("_stream")[1] for p in points] == [
        "_moe-ep2tp1_adp_pytorch-serve", "_moe-ep2tp1_adp_disagg-c1x2-g2x2_pytorch-serve",
        "_moe-ep4tp1_adp_pytorch-serve"]  # fmt: skip
    shaped = points[1]
    assert shaped["resources"]["gpus"] == 6 and shaped["llm_api"]["moe_expert_parallel_size"] == 2
    assert shaped["llm_api"]["enable_attention_dp"] is True
    # a value whose roles no moe entry fits, attention DP on a role of one rank
    uneven = {"context": {"tp": 1}, "generation": {"tp": 2}}
    assert refusal({**value, "disaggregated": [uneven]}).startswith(
        "sweep field 'disaggregated[0]': context tp 1 and generation tp 2 fit no moe entry"
    )
    assert refusal(sweep(attention_dp=[True], parallelism=[{"tp": 2}], disaggregated=[uneven])).startswith(
        "sweep field 'attention_dp': attention DP spreads requests over the tp ranks, and every worker takes it: "
        "disaggregated[0]'s context workers have tp 1")  # fmt: skip


def test_triton_points_are_planned_aggregated():
    value = sweep(servers=["triton", "trtllm-serve"], parallelism=[{"tp": 1}], disaggregated=[C1G1])
    points = planning.expand(value)
    assert [(p["server"], "disaggregated" in p) for p in points] == [("triton", False), ("trtllm-serve", True)]
    both = planning.expand({**value, "flow": ["engine", "pytorch"]})
    assert [(p["flow"], p["server"], "disaggregated" in p) for p in both] == [
        ("engine", "triton", False), ("pytorch", "triton", False), ("pytorch", "trtllm-serve", True)]  # fmt: skip


@pytest.mark.parametrize(
    ("over", "message"),
    [
        ({"disaggregated": ["none", {"context": {"tp": 0}, "generation": {"tp": 1}}]},
         "sweep field 'disaggregated[1].context.tp': expected a positive integer, got 0"),
        ({"disaggregated": [{"context": {"tp": 1, "instances": 0}, "generation": {"tp": 1}}]},
         "sweep field 'disaggregated[0].context.instances': expected a positive integer, got 0"),
        ({"disaggregated": [{"context": {"tp": 1}, "generation": {"tp": 1, "pp": -1}}]},
         "sweep field 'disaggregated[0].generation.pp': expected a positive integer, got -1"),
        ({"disaggregated": [{"context": {"tp": 1}}]},
         "sweep field 'disaggregated[0].generation': expected a mapping with keys from ['instances', 'pp', 'tp'], "
         "got nothing (the field is required)"),
        ({"disaggregated": [{"context": {"tp": 1, "gpus": 2}, "generation": {"tp": 1}}]},
         "sweep field 'disaggregated[0].context': unknown key(s) ['gpus']; known: ['instances', 'pp', 'tp']"),
        ({"disaggregated": ["agg"]},
         "sweep field 'disaggregated[0]': expected 'none' or a mapping with keys from ['context', 'generation', "
         "'name', 'transceiver'], got 'agg'"),
        ({"disaggregated": [C1G1, {**C1G1, "name": "other"}]},
         "sweep field 'disaggregated[1]': the same workers (c1x1-g1x1) as [0]"),
        ({"disaggregated": [C1G1, {**C1G2, "name": "c1x1-g1x1"}]},
         "sweep field 'disaggregated[1]': the same name (c1x1-g1x1) as [0]"),
        ({"disaggregated": ["none", "none"]}, "sweep field 'disaggregated[1]': the same value (none) as [0]"),
        ({"flow": "engine", "disaggregated": [C1G1]},
         "sweep field 'disaggregated': an axis of the pytorch flow, and every point of this sweep is the engine "
         "flow's"),
        ({"servers": ["triton"], "disaggregated": ["none", C1G1]},
         "sweep field 'disaggregated': trtllm-serve only (Triton's llmapi model has no disaggregated mode): add "
         "trtllm-serve to servers"),
        ({"disaggregated": [C1G1], "llm_api": {"cache_transceiver_config": {"backend": "UCX"}}},
         "sweep field 'llm_api.cache_transceiver_config': set by the sweep's disaggregated: axis"),
        ({"disaggregated": [{**C1G1, "transceiver": {"backend": "ucx"}}]},
         "sweep field 'disaggregated[0].transceiver.backend': TensorRT-LLM 1.2 takes one of DEFAULT, UCX, NIXL, "
         "MOONCAKE, MPI, got 'ucx' (upper case: lower-case names were 1.0 release candidates')"),
        ({"disaggregated": [{**C1G1, "transceiver": {"backend": "DEFAULT", "buffer": 1}}]},
         "sweep field 'disaggregated[0].transceiver.buffer': TensorRT-LLM 1.2's CacheTransceiverConfig has no such "
         "field"),
    ],
)  # fmt: skip
def test_what_a_value_cannot_take_is_refused_in_one_line(over, message):
    got = refusal(sweep(**over))
    assert got.startswith(message), got


@pytest.mark.parametrize("release", ["1.0", "1.1"])
def test_a_transceiver_follows_its_release(release):
    """MOONCAKE and kv_transfer_timeout_ms are 1.2's CacheTransceiverConfig, not 1.0's or 1.1's."""
    planning.expand(sweep(release, disaggregated=[{**C1G1, "transceiver": {"backend": "NIXL"}}]))
    later = {"backend": "MOONCAKE", "kv_transfer_timeout_ms": 500}
    planning.expand(sweep("1.2", disaggregated=[{**C1G1, "transceiver": later}]))
    assert refusal(sweep(release, disaggregated=[{**C1G1, "transceiver": {"backend": "MOONCAKE"}}])) == (
        f"sweep field 'disaggregated[0].transceiver.backend': TensorRT-LLM {release} takes one of DEFAULT, UCX, NIXL, "
        "MPI, got 'MOONCAKE'")  # fmt: skip
    assert refusal(sweep(release, disaggregated=[{**C1G1, "transceiver": {"kv_transfer_timeout_ms": 500}}])).startswith(
        f"sweep field 'disaggregated[0].transceiver.kv_transfer_timeout_ms': TensorRT-LLM {release}'s "
        "CacheTransceiverConfig has no such field")  # fmt: skip


def test_the_hf_backend_takes_one_rank_workers_each_on_its_gpus_per_point():
    hf = {"backend": "hf", "trtllm": None, "precisions": ["float32"], "parallelism": [{"tp": 1}]}
    points = planning.expand(sweep(**hf, disaggregated=["none", C1G2]))
    assert [p["resources"]["gpus"] for p in points] == [0, 0]  # CPU stand-ins
    gpus = planning.expand(sweep(**hf, disaggregated=[C1G2], placement={"gpus_per_point": 1}))
    assert gpus[0]["resources"]["gpus"] == 3
    assert refusal(sweep(**hf, disaggregated=[{"context": {"tp": 1}, "generation": {"tp": 2}}])) == (
        "sweep field 'disaggregated[0].generation': backend hf serves one rank a worker; use tp: 1, pp: 1 "
        "(instances may be more)")  # fmt: skip


def test_a_value_larger_than_any_host_is_refused_by_placement_naming_the_point_and_its_gpus():
    points = planning.expand(sweep(parallelism=[{"tp": 1}], disaggregated=[
        {"context": {"tp": 2, "instances": 2}, "generation": {"tp": 4, "instances": 2}}]))  # fmt: skip
    host = placement.Host(name="h1", gpus=[placement.Gpu(i, "NVIDIA H100 80GB HBM3", 81559, 0) for i in range(8)])
    with pytest.raises(TrtsweepError) as err:
        placement.check_fit(points, [host])
    assert str(err.value) == (f"no host can take 1 point(s): {STEM.format(tp=4, pp=1)}_disagg-c2x2-g2x4_pytorch-serve "
                              "(12 GPU(s)); hosts offer h1: 8 usable GPU(s)")  # fmt: skip


@pytest.mark.parametrize("release", ["1.0", "1.1", "1.2"])
def test_the_example_sweeps_points_make_workers_the_release_takes(release):
    """sweeps/qwen3_8b_agg_disagg.yml planned against each release: every disaggregated point's normalized value is
    the generator's shape (trtsweep.toolchain.llmapi.disagg: same label and GPUs), whose workers' options files and
    flags the release's tables accept."""
    root = Path(__file__).resolve().parents[2]
    value = yaml.safe_load((root / "sweeps" / "qwen3_8b_agg_disagg.yml").read_text())["trtsweep_sweep"]
    value["trtllm"]["version"] = f"{release}.0"
    points = planning.expand(value, base_dir=root / "sweeps")
    assert sorted(p["id"].split("_stream")[1] for p in points) == [
        "_disagg-c1x1-g1x1_pytorch-serve", "_disagg-c1x1-g2x1_pytorch-serve", "_disagg-c2x1-g1x2_pytorch-serve",
        "_disagg-c2x1-g3x2_pytorch-serve", "_pytorch-serve", "_pytorch-serve"]  # fmt: skip
    assert max(p["resources"]["gpus"] for p in points) == 8
    for point in (p for p in points if "disaggregated" in p):
        shape = disagg.Shape.from_point(point["disaggregated"])
        assert point["id"].endswith(f"_disagg-{shape.label()}_pytorch-serve")
        assert shape.gpus() == point["resources"]["gpus"]
        ports = list(range(9000, 9000 + shape.instances()))
        made = disagg.workers(shape, release, point["llm_api"], list(range(shape.gpus())), "127.0.0.1", ports)
        assert [w.role for w in made].count("generation") == point["disaggregated"]["generation"]["instances"]
        assert {w.tp for w in made if w.role == "generation"} == {point["tp"]}


@pytest.mark.parametrize("release", ["1.0", "1.1", "1.2"])
def test_the_mpi_transceiver_is_refused_as_trtsweep_starts_each_worker_as_its_own_process(release):
    got = refusal(sweep(release, disaggregated=[{**C1G1, "transceiver": {"backend": "MPI"}}]))
    assert got.startswith("sweep field 'disaggregated[0].transceiver.backend': MPI moves the KV cache between ranks of "
                          "one MPI world") and got.endswith("use DEFAULT, UCX, NIXL" + (", MOONCAKE" if release == "1.2"
                                                                                        else "")), got  # fmt: skip


def test_a_disaggregated_point_warms_up_every_context_and_generation_pair():
    """KV-cache transfer between two workers connects on first use: a warm-up request per instance pair at least."""
    c2g3 = {"context": {"tp": 1, "instances": 2}, "generation": {"tp": 1, "instances": 3}}
    aggregated, shaped, single = planning.expand(sweep(disaggregated=["none", c2g3, C1G1]))[:3]
    assert (shaped["benchmark"]["warmup_requests"], shaped["benchmark"]["warmup_pairs"]) == (6, 6)
    assert aggregated["benchmark"] == single["benchmark"] and "warmup_pairs" not in single["benchmark"]  # one pair
