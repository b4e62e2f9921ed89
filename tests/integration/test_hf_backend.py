"""The `hf` backend behind the real Triton server: same ensemble, same requests as TensorRT-LLM."""

from __future__ import annotations

import json
import queue
import urllib.request

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
from transformers import AutoTokenizer

from tests.conftest import hf_repo, start_server
from trtsweep.serve import server

QUESTION = "What is the capital of France?"
ANSWER = "The capital of France is Paris."


@pytest.fixture(scope="module")
def chat_prompt(demo_model):
    tok = AutoTokenizer.from_pretrained(demo_model.hf_dir)
    return tok.apply_chat_template([{"role": "user", "content": QUESTION}], tokenize=False, add_generation_prompt=True)


def post(spec, endpoint: str, body: dict) -> list[dict]:
    url = f"http://127.0.0.1:{spec.http_port}/v2/models/ensemble/{endpoint}"
    request = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=120) as resp:
        raw = resp.read().decode()
    if endpoint == "generate":
        return [json.loads(raw)]
    return [json.loads(line[5:]) for line in raw.splitlines() if line.startswith("data:")]


def test_http_generate_returns_the_greedy_answer(hf_server, chat_prompt):
    (reply,) = post(hf_server, "generate", {"text_input": chat_prompt, "max_tokens": 24, "top_k": 1})
    assert reply["text_output"] == ANSWER


def test_http_generate_stream_streams_token_by_token(hf_server, chat_prompt):
    chunks = post(hf_server, "generate_stream", {"text_input": chat_prompt, "max_tokens": 24, "stream": True})
    texts = [c["text_output"] for c in chunks]
    assert "".join(texts) == ANSWER
    assert len([t for t in texts if t]) >= 6  # one chunk per generated token


def test_max_tokens_and_stop_words(hf_server, chat_prompt):
    (short,) = post(hf_server, "generate", {"text_input": chat_prompt, "max_tokens": 3})
    assert short["text_output"] == "The capital of"
    (stopped,) = post(hf_server, "generate", {"text_input": chat_prompt, "max_tokens": 24, "stop_words": [" France"]})
    assert stopped["text_output"] == "The capital of France"


def test_grpc_streaming_with_final_response_flag(hf_server, chat_prompt):
    responses: queue.Queue = queue.Queue()
    client = grpcclient.InferenceServerClient(f"127.0.0.1:{hf_server.grpc_port}")
    try:
        client.start_stream(callback=lambda result, error: responses.put((result, error)))
        inputs = []
        for name, value, dtype in (
            ("text_input", np.array([[chat_prompt.encode()]], dtype=object), "BYTES"),
            ("max_tokens", np.array([[24]], dtype=np.int32), "INT32"),
            ("stream", np.array([[True]]), "BOOL"),
        ):
            tensor = grpcclient.InferInput(name, list(value.shape), dtype)
            tensor.set_data_from_numpy(value)
            inputs.append(tensor)
        client.async_stream_infer("ensemble", inputs, enable_empty_final_response=True)
        texts = []
        while True:
            result, error = responses.get(timeout=60)
            assert error is None
            out = result.as_numpy("text_output")
            if out is not None:
                texts.append(out.reshape(-1)[0].decode())
            if result.get_response().parameters["triton_final_response"].bool_param:
                break
    finally:
        client.stop_stream()
        client.close()
    assert "".join(texts) == ANSWER
    assert len(texts) >= 6


def test_streamed_cjk_text_is_never_split_inside_a_character(hf_server):
    chunks = post(
        hf_server, "generate_stream", {"text_input": "中文：北京是中国的首都。上海", "max_tokens": 16, "stream": True}
    )
    texts = [c["text_output"] for c in chunks]
    assert all("\ufffd" not in t for t in texts)
    assert "".join(texts)


def test_non_decoupled_repository_serves_unary_requests(demo_model, tmp_path, chat_prompt):
    repo = hf_repo(tmp_path / "repo", demo_model.hf_dir, decoupled_mode=False, triton_max_batch_size=2)
    state, spec = start_server(repo, tmp_path)
    try:
        (reply,) = post(spec, "generate", {"text_input": chat_prompt, "max_tokens": 24})
        assert reply["text_output"] == ANSWER
        client = grpcclient.InferenceServerClient(f"127.0.0.1:{spec.grpc_port}")
        text = grpcclient.InferInput("text_input", [1, 1], "BYTES")
        text.set_data_from_numpy(np.array([[chat_prompt.encode()]], dtype=object))
        budget = grpcclient.InferInput("max_tokens", [1, 1], "INT32")
        budget.set_data_from_numpy(np.array([[24]], dtype=np.int32))
        result = client.infer("ensemble", [text, budget])
        assert result.as_numpy("text_output").reshape(-1)[0].decode() == ANSWER
        client.close()
    finally:
        server.stop(state)
    assert not server.is_running(state)


def test_int8_weight_only_repository_gives_the_same_greedy_answer(demo_model, tmp_path, chat_prompt):
    repo = hf_repo(tmp_path / "repo", demo_model.hf_dir, hf_dtype="int8", hf_device="cpu", triton_max_batch_size=2)
    state, spec = start_server(repo, tmp_path)
    try:
        (reply,) = post(spec, "generate", {"text_input": chat_prompt, "max_tokens": 24})
        assert reply["text_output"] == ANSWER
    finally:
        server.stop(state)


def test_ensemble_reports_exact_output_token_counts(hf_server, chat_prompt, demo_model):
    tok = AutoTokenizer.from_pretrained(demo_model.hf_dir)
    answer_tokens = len(tok.encode(ANSWER, add_special_tokens=False))
    chunks = post(hf_server, "generate_stream", {"text_input": chat_prompt, "max_tokens": 24, "stream": True})
    assert sum(c["num_output_tokens"] for c in chunks) == answer_tokens
    (short,) = post(hf_server, "generate", {"text_input": chat_prompt, "max_tokens": 3})
    assert short["num_output_tokens"] == 3


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_llm_perf_uses_the_server_counts_and_cross_checks_them(hf_server, demo_model, tmp_path, protocol):
    from trtsweep.perf.benchmark import BenchmarkConfig, run
    from trtsweep.perf.protocols import Endpoint

    data = tmp_path / "p.jsonl"
    data.write_text(json.dumps({"input": QUESTION, "output": ANSWER}) + "\n")
    port = hf_server.http_port if protocol == "http" else hf_server.grpc_port
    config = BenchmarkConfig(
        endpoint=Endpoint(url=f"127.0.0.1:{port}", model="ensemble", extra_inputs={"top_k": 1}),
        protocol=protocol, input_data=data, concurrency=[1], num_requests=2, warmup_requests=0,
        tokenizer_path=str(demo_model.hf_dir), chat_template=True, max_tokens=24, export_file=tmp_path / "p.json",
    )  # fmt: skip
    (report,) = run(config)
    rows = list(report.rows())
    assert [row["text"] for row in rows] == [ANSWER, ANSWER]
    tok = AutoTokenizer.from_pretrained(demo_model.hf_dir)
    assert [row["output_tokens"] for row in rows] == [len(tok.encode(ANSWER, add_special_tokens=False))] * 2
    assert report.summary["token_count_mismatch_rate"] == 0.0
