"""The upstream request interface served for real (issue 10): the hf backend behind the real Triton server
honours what transformers can (penalties, embedding bias, log probs, several sequences) through the ensemble and
the BLS model, and refuses the rest in a sentence naming the input. On the old repository every request below
failed with "unexpected inference input" (the ensemble lacked these inputs)."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import numpy as np
import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from tests.conftest import hf_repo, served

QUESTION = "What is the capital of France?"


@pytest.fixture(scope="module")
def tokenizer(demo_model):
    return AutoTokenizer.from_pretrained(demo_model.hf_dir)


@pytest.fixture(scope="module")
def prompt(tokenizer):
    return tokenizer.apply_chat_template(
        [{"role": "user", "content": QUESTION}], tokenize=False, add_generation_prompt=True
    )


@pytest.fixture(scope="module")
def bls_server(demo_model, tmp_path_factory):
    """Ensemble and BLS of the 0.17 interface (LoRA, penalties, kv-cache stats), decoupled."""
    work = tmp_path_factory.mktemp("iface")
    repo = hf_repo(work / "repo", demo_model.hf_dir, triton_max_batch_size=4, bls=True, trtllm_version="0.17")
    with served(repo, work) as spec:
        yield spec


def stream(spec, body: dict, model: str = "ensemble") -> list[dict]:
    url = f"http://127.0.0.1:{spec.http_port}/v2/models/{model}/generate_stream"
    request = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=120) as resp:
        raw = resp.read().decode()
    return [json.loads(line[5:]) for line in raw.splitlines() if line.startswith("data:")]


def error_of(spec, body: dict, model: str = "ensemble") -> str:
    try:
        chunks = stream(spec, body, model)
    except urllib.error.HTTPError as exc:
        return exc.read().decode()
    return " ".join(c.get("error", "") for c in chunks) or f"no error: {chunks}"


def text(chunks: list[dict]) -> str:
    return "".join(c["text_output"] for c in chunks)


def reference(demo_model, tokenizer, prompt: str, **generate: object) -> str:
    """transformers' own greedy generate with the same settings."""
    model = AutoModelForCausalLM.from_pretrained(demo_model.hf_dir, dtype=torch.float32).eval()
    ids = tokenizer(prompt, return_tensors="pt", add_special_tokens=False).input_ids
    with torch.inference_mode():
        out = model.generate(ids, max_new_tokens=24, do_sample=False, **generate)
    return tokenizer.decode(out[0, ids.shape[1] :], skip_special_tokens=True)


@pytest.mark.parametrize("model", ["ensemble", "tensorrt_llm_bls"])
def test_repetition_penalty_is_transformers_own(bls_server, demo_model, tokenizer, prompt, model):
    plain = text(stream(bls_server, {"text_input": prompt, "max_tokens": 24, "top_k": 1}, model))
    body = {"text_input": prompt, "max_tokens": 24, "top_k": 1, "repetition_penalty": 1.5}
    penalized = text(stream(bls_server, body, model))
    assert penalized == reference(demo_model, tokenizer, prompt, repetition_penalty=1.5)
    assert penalized != plain


def test_frequency_and_presence_penalties_stop_repeats(bls_server, tokenizer, prompt):
    base = {"text_input": prompt, "max_tokens": 64, "top_k": 1, "min_length": 64}  # 64 tokens, end id held off

    def ids(**penalty: float) -> list[int]:
        return tokenizer.encode(text(stream(bls_server, {**base, **penalty})), add_special_tokens=False)

    assert len(set(ids())) < len(ids())  # without a penalty some token comes back
    for penalty in ({"frequency_penalty": 100.0}, {"presence_penalty": 100.0}):
        got = ids(**penalty)
        assert len(got) >= 60 and len(set(got)) == len(got), penalty


def test_embedding_bias_words_keep_a_word_out(bls_server, prompt):
    plain = text(stream(bls_server, {"text_input": prompt, "max_tokens": 24, "top_k": 1}))
    assert "Paris" in plain
    body = {"text_input": prompt, "max_tokens": 24, "top_k": 1,
            "embedding_bias_words": ["Paris", " Paris"], "embedding_bias_weights": [-100.0, -100.0]}  # fmt: skip
    assert "Paris" not in text(stream(bls_server, body))


@pytest.mark.parametrize("model", ["ensemble", "tensorrt_llm_bls"])
def test_log_probs_are_the_models_own(bls_server, demo_model, tokenizer, prompt, model):
    body = {"text_input": prompt, "max_tokens": 5, "top_k": 1, "return_log_probs": True}
    (reply,) = stream(bls_server, body, model)
    got = np.array(reply["output_log_probs"], dtype=np.float64).reshape(-1)
    assert got.shape == (5,) and abs(float(np.sum(got)) - float(np.ravel(reply["cum_log_probs"])[0])) < 1e-3
    hf = AutoModelForCausalLM.from_pretrained(demo_model.hf_dir, dtype=torch.float32).eval()
    ids = tokenizer(prompt, return_tensors="pt", add_special_tokens=False).input_ids
    want = []
    with torch.inference_mode():
        for _ in range(5):  # greedy, one full forward pass per token: independent of the server's KV cache
            log_probs = torch.log_softmax(hf(ids).logits[0, -1].float(), -1)
            token = int(torch.argmax(log_probs))
            want.append(float(log_probs[token]))
            ids = torch.cat([ids, torch.tensor([[token]])], dim=1)
    assert np.allclose(got, want, atol=1e-3)


def test_several_sequences_come_with_their_index(bls_server, prompt):
    body = {"text_input": prompt, "max_tokens": 8, "top_k": 1, "num_return_sequences": 2}
    chunks = stream(bls_server, body)
    assert sorted(np.ravel(c["sequence_index"])[0] for c in chunks) == [0, 1]
    assert chunks[0]["text_output"] == chunks[1]["text_output"]  # greedy: the same sequence twice


@pytest.mark.parametrize(
    ("model", "inputs", "named"),
    [
        ("ensemble", {"lora_task_id": 7}, ["lora_task_id", "LoRA adapters"]),
        ("ensemble", {"return_kv_cache_reuse_stats": True}, ["return_kv_cache_reuse_stats", "KV-cache reuse"]),
        ("tensorrt_llm_bls", {"image_url_input": "http://x/y.png"}, ["image_url_input", "multimodal"]),
        ("tensorrt_llm_bls", {"num_draft_tokens": 4}, ["num_draft_tokens", "speculative decoding"]),
    ],
)
def test_what_transformers_cannot_do_is_refused_by_name(bls_server, prompt, model, inputs, named):
    message = error_of(bls_server, {"text_input": prompt, "max_tokens": 4, **inputs}, model)
    assert all(word in message for word in named), message


def test_neutral_values_of_unsupported_inputs_pass(bls_server, prompt):
    """A client that always sends return_kv_cache_reuse_stats false (or num_draft_tokens 0) is served."""
    body = {"text_input": prompt, "max_tokens": 3, "top_k": 1, "return_kv_cache_reuse_stats": False}
    assert text(stream(bls_server, body)) == "The capital of"
    body = {"text_input": prompt, "max_tokens": 3, "top_k": 1, "num_draft_tokens": 0}
    assert text(stream(bls_server, body, "tensorrt_llm_bls")) == "The capital of"


def test_llm_perf_extra_inputs_reach_the_new_inputs(bls_server, demo_model, tmp_path):
    from trtsweep.perf.benchmark import BenchmarkConfig, run
    from trtsweep.perf.protocols import Endpoint

    data = tmp_path / "p.jsonl"
    data.write_text(json.dumps({"input": QUESTION}) + "\n")
    extra = {"top_k": 1, "repetition_penalty": 1.5, "return_log_probs": True, "length_penalty": 1.0}
    config = BenchmarkConfig(
        endpoint=Endpoint(url=f"127.0.0.1:{bls_server.grpc_port}", model="ensemble", extra_inputs=extra),
        protocol="grpc", input_data=data, concurrency=[1], num_requests=2, warmup_requests=0,
        tokenizer_path=str(demo_model.hf_dir), chat_template=True, max_tokens=24, export_file=tmp_path / "p.json",
    )  # fmt: skip
    (report,) = run(config)
    assert report.summary["succeeded"] == 2, report.summary


@pytest.mark.parametrize("protocol", ["grpc", "http"])
def test_llm_perf_sends_list_valued_inputs(bls_server, demo_model, tmp_path, protocol):
    """stop_words and embedding bias words are lists: --extra-inputs-json sends them as one tensor each."""
    from trtsweep.perf.benchmark import run
    from trtsweep.perf.cli import config_from_args, parser

    data = tmp_path / "p.jsonl"
    data.write_text(json.dumps({"input": QUESTION}) + "\n")
    port = bls_server.grpc_port if protocol == "grpc" else bls_server.http_port
    extra = {"top_k": 1, "stop_words": [" France", " Rome"], "embedding_bias_words": ["Paris"],
             "embedding_bias_weights": [-100.0]}  # fmt: skip
    args = parser().parse_args([
        "-u", f"127.0.0.1:{port}", "-i", protocol, "-m", "ensemble", "--input-data", str(data),
        "--tokenizer-path", str(demo_model.hf_dir), "--chat-template", "--concurrency", "1", "--num-requests", "1",
        "--warmup-requests", "0", "--max-tokens", "24", "--extra-inputs-json", json.dumps(extra),
        "--profile-export-file", str(tmp_path / "p.json"),
    ])  # fmt: skip
    (report,) = run(config_from_args(args))
    (row,) = list(report.rows())
    assert row["text"] == "The capital of France"
