"""The repository's request interface is the upstream one of its TensorRT-LLM version (issue 10: a client that
sends repetition_penalty, return_log_probs or lora_task_id to the standard ensemble found them missing).

The expected tensors come from src/trtsweep/triton/interface.json, extracted from the upstream templates by
tools/triton_interface.py; the 0.11 and 0.17 ensembles are also checked against the reference configs
(tests/data/trtllm_reference) derived independently of that table."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from trtsweep.triton import interface, repository

REFERENCE = Path(__file__).resolve().parents[1] / "data" / "trtllm_reference"
VERSIONS = list(interface.table())
BACKENDS = ("hf", "tensorrtllm")


def render(backend: str, version: str, **params: object) -> dict[str, object]:
    base = {"backend": backend, "engine_dir": "/e", "tokenizer_dir": "/t", "trtllm_version": version, "bls": True}
    files = repository.render({**base, **params})
    return {rel.split("/")[0]: repository._parse(rel, text) for rel, text in files.items() if rel.endswith(".pbtxt")}


def tensors(items, output: bool = False) -> list[dict[str, object]]:
    return [interface.tensor_dict(t, output) for t in items]


def upstream(entries: list[dict[str, object]]) -> list[dict[str, object]]:
    """interface.json tensors with the data types the repository parameters give (TYPE_FP32 logits here)."""
    typed = []
    for t in entries:
        kind = str(t["data_type"])
        typed.append({**t, "data_type": kind if kind.startswith("TYPE_") else "TYPE_FP32"})
    return typed


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("version", VERSIONS)
def test_ensemble_and_bls_have_the_upstream_inputs_and_outputs(backend, version):
    entry = interface.table()[version]
    models = render(backend, version)
    assert tensors(models["ensemble"].input) == upstream(entry["ensemble"]["inputs"])
    assert tensors(models["tensorrt_llm_bls"].input) == upstream(entry["tensorrt_llm_bls"]["inputs"])
    for model in ("ensemble", "tensorrt_llm_bls"):
        ours = tensors(models[model].output, output=True)
        names = [t["name"] for t in ours]
        assert len(names) == len(set(names)), f"{model}: an output name twice"
        theirs = upstream(entry[model]["outputs"])
        assert [t for t in ours if t in theirs] == list({t["name"]: t for t in theirs}.values())
        assert set(names) - {t["name"] for t in theirs} <= {"num_output_tokens"}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("version", VERSIONS)
def test_ensemble_wires_every_input_as_upstream_does(backend, version):
    """Each upstream step's input and output maps, unchanged (trtsweep only adds NUM_OUTPUT_TOKENS)."""
    theirs = interface.table()[version]["ensemble"]["steps"]
    ours = render(backend, version)["ensemble"].ensemble_scheduling.step
    assert [s.model_name for s in ours] == [s["model"] for s in theirs]
    for step, expected in zip(ours, theirs, strict=True):
        assert dict(step.input_map) == expected["inputs"]
        assert dict(step.output_map).items() >= expected["outputs"].items()
        assert set(step.output_map) - set(expected["outputs"]) <= {"NUM_OUTPUT_TOKENS"}


@pytest.mark.parametrize("version", VERSIONS)
def test_the_hf_model_has_the_tensorrt_llm_models_tensors(version):
    """The hf backend's tensorrt_llm config is the TensorRT-LLM backend's, tensor for tensor."""
    engine = render("tensorrtllm", version)["tensorrt_llm"]
    hf = render("hf", version)["tensorrt_llm"]
    assert tensors(hf.input) == tensors(engine.input)
    assert tensors(hf.output, True) == tensors(engine.output, True)


@pytest.mark.parametrize("path", sorted(REFERENCE.glob("*.json")), ids=lambda p: p.stem)
def test_ensemble_inputs_match_the_independent_reference(path):
    ref = json.loads(path.read_text())
    expected = ref["models"]["ensemble"]
    models = render("tensorrtllm", ref["trtllm_version"])
    got = {t["name"]: (t["data_type"], t["dims"]) for t in tensors(models["ensemble"].input)}
    want = {t["name"]: (t["data_type"], t["dims"]) for t in expected["inputs"]}
    assert want.items() <= got.items()
    outputs = {t["name"] for t in tensors(models["ensemble"].output, True)}
    assert {t["name"] for t in expected["outputs"]} <= outputs


def test_the_standard_clients_inputs_are_there_in_every_version():
    """What the issue found missing: penalties, log probs, LoRA, num_return_sequences, embedding bias."""
    for version, names in {
        "0.11": {"repetition_penalty", "presence_penalty", "frequency_penalty", "length_penalty",
                 "return_log_probs", "return_context_logits", "return_generation_logits",
                 "embedding_bias_words", "prompt_embedding_table"},
        "0.17": {"lora_task_id", "lora_weights", "lora_config", "num_return_sequences", "exclude_input_in_output",
                 "return_kv_cache_reuse_stats", "prompt_table_extra_id"},
        "1.2": {"min_tokens", "seed", "return_perf_metrics", "return_num_output_tokens",
                "guided_decoding_guide"},
    }.items():  # fmt: skip
        models = render("hf", version)
        assert names <= {t.name for t in models["ensemble"].input}, version
        assert names <= {t.name for t in models["tensorrt_llm_bls"].input}, version
