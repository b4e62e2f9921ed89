"""The hf backend's `llmapi` model (triton/templates/tensorrt_llm_llmapi_hf) behind the real Triton server, with the
tensors of TensorRT-LLM's own llmapi config.pbtxt: the post-1.2 record (llmapi/args/1.2.json) and 0.19's
(tests/data/llmapi_0.19.json), its settings in 1/model.yaml. Requests as tritonclient sends them; texts checked
against transformers' own greedy generate."""

from __future__ import annotations

import json
import queue
import time
from importlib import resources
from itertools import pairwise
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
import tritonclient.grpc as grpcclient
import yaml
from transformers import AutoModelForCausalLM, AutoTokenizer
from tritonclient.utils import InferenceServerException

from tests.conftest import served
from trtsweep.toolchain.llmapi import args

QUESTION = "What is the capital of France?"
ANSWER = "The capital of France is Paris."
MAX_SEQ_LEN = 128
RECORDS = {
    "1.2": args.table("1.2")["llmapi_model"],
    "0.19": json.loads((Path(__file__).parent.parent / "data" / "llmapi_0.19.json").read_text()),
}
TYPES = {"TYPE_STRING": (np.object_, "BYTES"), "TYPE_BOOL": (np.bool_, "BOOL"), "TYPE_INT32": (np.int32, "INT32"),
         "TYPE_UINT64": (np.uint64, "UINT64"), "TYPE_FP32": (np.float32, "FP32")}  # fmt: skip


def config_pbtxt(record: dict[str, Any], decoupled: bool, max_batch_size: int) -> str:
    """The config.pbtxt of a record's tensors (what trtsweep.triton.llmapi generates for a point)."""

    def tensor(t: dict[str, Any], optional: bool) -> str:
        dims = ", ".join(map(str, t["dims"]))
        extra = "\n    optional: true" if optional and t["optional"] else ""
        return f'  {{\n    name: "{t["name"]}"\n    data_type: {t["data_type"]}\n    dims: [ {dims} ]{extra}\n  }}'

    inputs = ",\n".join(tensor(t, True) for t in record["inputs"])
    outputs = ",\n".join(tensor(t, False) for t in record["outputs"])
    return (
        f'name: "tensorrt_llm"\nbackend: "python"\nmax_batch_size: {max_batch_size}\n'
        f"model_transaction_policy {{\n  decoupled: {str(decoupled).lower()}\n}}\n"
        f"instance_group [\n  {{\n    count: 1\n    kind: KIND_CPU\n  }}\n]\n"
        f"input [\n{inputs}\n]\noutput [\n{outputs}\n]\n"
    )


def llmapi_repo(out: Path, model_dir: Path, record: str, decoupled: bool, triton_batch: int = 0) -> Path:
    model = out / "tensorrt_llm"
    (model / "1").mkdir(parents=True)
    (model / "config.pbtxt").write_text(config_pbtxt(RECORDS[record], decoupled, triton_batch))
    code = resources.files("trtsweep.triton") / "templates" / "tensorrt_llm_llmapi_hf" / "model.py"
    (model / "1" / "model.py").write_text(code.read_text())
    model_yaml = {
        "model": str(model_dir), "backend": "pytorch", "dtype": "auto", "max_batch_size": 4,
        "max_seq_len": MAX_SEQ_LEN, "tensor_parallel_size": 1, "kv_cache_config": {"free_gpu_memory_fraction": 0.5},
        "trtsweep_hf": {"device": "cpu"}, "triton_config": {"max_batch_size": triton_batch, "decoupled": decoupled},
    }  # fmt: skip
    (model / "1" / "model.yaml").write_text(yaml.safe_dump(model_yaml))
    return out


@pytest.fixture(scope="module")
def decoupled_server(demo_model, tmp_path_factory):
    """The post-1.2 tensors, decoupled (streaming)."""
    work = tmp_path_factory.mktemp("llmapi_decoupled")
    with served(llmapi_repo(work / "repo", demo_model.hf_dir, "1.2", decoupled=True), work) as spec:
        yield spec


@pytest.fixture(scope="module")
def unary_server(demo_model, tmp_path_factory):
    """0.19's tensors, not decoupled."""
    work = tmp_path_factory.mktemp("llmapi_unary")
    with served(llmapi_repo(work / "repo", demo_model.hf_dir, "0.19", decoupled=False), work) as spec:
        yield spec


@pytest.fixture(scope="module")
def tokenizer(demo_model):
    return AutoTokenizer.from_pretrained(demo_model.hf_dir)


@pytest.fixture(scope="module")
def prompt(tokenizer) -> str:
    return tokenizer.apply_chat_template(
        [{"role": "user", "content": QUESTION}], tokenize=False, add_generation_prompt=True
    )


@pytest.fixture(scope="module")
def greedy(demo_model, tokenizer, prompt):
    """transformers' own greedy generate: (prompt ids, output ids without EOS, their cumulative log prob)."""
    model = AutoModelForCausalLM.from_pretrained(demo_model.hf_dir, dtype=torch.float32).eval()
    ids = tokenizer(prompt, return_tensors="pt").input_ids
    with torch.inference_mode():
        out = model.generate(ids, max_new_tokens=24, do_sample=False, output_scores=True, return_dict_in_generate=True)
    tokens = [t for t in out.sequences[0, ids.shape[1] :].tolist() if t != tokenizer.eos_token_id]
    logprob = sum(float(torch.log_softmax(s[0], -1)[t]) for s, t in zip(out.scores, tokens, strict=False))
    return ids[0].tolist(), tokens, logprob


def inputs(record: str, values: dict[str, Any]) -> list[grpcclient.InferInput]:
    types = {t["name"]: t["data_type"] for t in RECORDS[record]["inputs"]}
    out = []
    for name, value in values.items():
        dtype, triton = TYPES[types[name]]
        items = value if isinstance(value, list) else [value]
        array = np.array([v.encode() if isinstance(v, str) else v for v in items], dtype=dtype)
        tensor = grpcclient.InferInput(name, list(array.shape), triton)
        tensor.set_data_from_numpy(array)
        out.append(tensor)
    return out


def decoded(result: Any) -> dict[str, Any]:
    """The outputs of one response: strings decoded, one value per output."""
    out = {}
    for output in result.get_response().outputs:
        value = result.as_numpy(output.name).reshape(-1)[0]
        out[output.name] = value.decode() if isinstance(value, bytes) else value.item()
    return out


def stream(spec, record: str, values: dict[str, Any]) -> list[dict[str, Any]]:
    """Every response of one request on a gRPC stream; InferenceServerException when it fails."""
    responses: queue.Queue = queue.Queue()
    client = grpcclient.InferenceServerClient(f"127.0.0.1:{spec.grpc_port}")
    try:
        client.start_stream(callback=lambda result, error: responses.put((result, error)))
        client.async_stream_infer("tensorrt_llm", inputs(record, values), enable_empty_final_response=True)
        out = []
        while True:
            result, error = responses.get(timeout=120)
            if error is not None:
                raise error
            out.append(decoded(result))
            if result.get_response().parameters["triton_final_response"].bool_param:
                return out
    finally:
        client.stop_stream()
        client.close()


def infer(spec, record: str, values: dict[str, Any]) -> dict[str, Any]:
    with grpcclient.InferenceServerClient(f"127.0.0.1:{spec.grpc_port}") as client:
        return decoded(client.infer("tensorrt_llm", inputs(record, values)))


def test_streaming_sends_the_text_so_far_per_token_and_ends_as_transformers(decoupled_server, prompt, greedy):
    values = {"text_input": prompt, "streaming": True, "sampling_param_max_tokens": 24, "return_finish_reason": True,
              "return_stop_reason": True, "return_cumulative_logprob": True}  # fmt: skip
    responses = stream(decoupled_server, "1.2", values)
    texts = [r["text_output"] for r in responses]
    assert texts[-1] == ANSWER
    assert len(texts) >= len(greedy[1])  # one response per token at least (the final one may add none)
    assert all(later.startswith(earlier) and later != earlier for earlier, later in pairwise(texts[:-1]))
    assert [r["finish_reason"] for r in responses] == ["None"] * (len(responses) - 1) + ["stop"]  # EOS
    assert responses[-1]["stop_reason"] == "None"
    assert responses[-1]["cumulative_logprob"] == pytest.approx(greedy[2], abs=1e-3)


@pytest.mark.parametrize("record", ["1.2", "0.19"])
def test_one_response_with_the_text_and_finish_reason(decoupled_server, unary_server, prompt, record):
    spec = decoupled_server if record == "1.2" else unary_server
    values = {"text_input": prompt, "sampling_param_max_tokens": 3, "sampling_param_exclude_input_from_output": True,
              "return_finish_reason": True}  # fmt: skip
    if record == "1.2":
        values["sampling_param_return_perf_metrics"] = True
    reply = infer(spec, record, values) if record == "0.19" else stream(spec, record, values)[-1]
    assert (reply["text_output"], reply["finish_reason"]) == ("The capital of", "length")
    if record == "1.2":
        times = [reply[name] for name in ("arrival_time_ns", "first_scheduled_time_ns", "first_token_time_ns")]
        assert 0 < times[0] <= times[1] <= times[2] <= reply["last_token_time_ns"]


def test_output_starts_with_the_prompt_unless_excluded(unary_server, prompt, greedy, tokenizer):
    """As TensorRT-LLM's llmapi model: exclude_input_from_output defaults to false there."""
    reply = infer(unary_server, "0.19", {"text_input": prompt, "sampling_param_max_tokens": 24})
    prompt_ids, output_ids, _ = greedy
    assert reply["text_output"] == tokenizer.decode(prompt_ids + output_ids, skip_special_tokens=True)
    assert reply["text_output"].endswith(ANSWER)


@pytest.mark.parametrize("record", ["1.2", "0.19"])
def test_a_stop_string_ends_the_text_before_it(decoupled_server, unary_server, prompt, record):
    spec = decoupled_server if record == "1.2" else unary_server
    values = {"text_input": prompt, "sampling_param_max_tokens": 24, "sampling_param_stop": [" Paris", " Rome"],
              "sampling_param_exclude_input_from_output": True, "return_finish_reason": True,
              "return_stop_reason": True}  # fmt: skip
    reply = infer(spec, record, values) if record == "0.19" else stream(spec, record, {**values, "streaming": True})[-1]
    assert (reply["text_output"], reply["finish_reason"], reply["stop_reason"]) == (
        "The capital of France is",
        "stop",
        " Paris",
    )


def test_a_seed_repeats_a_sampled_text(decoupled_server, prompt):
    values = {"text_input": prompt, "sampling_param_max_tokens": 12, "sampling_param_temperature": 1.0,
              "sampling_param_top_k": 50, "sampling_param_seed": 7}  # fmt: skip
    first, second = (stream(decoupled_server, "1.2", values)[-1]["text_output"] for _ in range(2))
    assert first == second


@pytest.mark.parametrize(
    ("record", "name", "value"),
    [("1.2", "lora_name", "adapter"), ("1.2", "sampling_param_best_of", 2), ("1.2", "image_url", "http://x/y.png"),
     ("0.19", "sampling_param_beam_width", 2)],
)  # fmt: skip
def test_an_input_the_hf_backend_cannot_honour_fails_naming_it(decoupled_server, unary_server, record, name, value):
    spec = decoupled_server if record == "1.2" else unary_server
    call = infer if record == "0.19" else stream
    with pytest.raises(InferenceServerException, match=f"'{name}'"):
        call(spec, record, {"text_input": QUESTION, name: value})


@pytest.mark.parametrize("record", ["1.2", "0.19"])
def test_prompt_and_max_tokens_over_max_seq_len_fail(decoupled_server, unary_server, record):
    spec = decoupled_server if record == "1.2" else unary_server
    call = infer if record == "0.19" else stream
    with pytest.raises(InferenceServerException, match=rf"should not exceed max_seq_len \({MAX_SEQ_LEN}\)"):
        call(spec, record, {"text_input": QUESTION, "sampling_param_max_tokens": MAX_SEQ_LEN})


def test_a_cancelled_stream_stops_its_generation(decoupled_server):
    values = {"text_input": "Once upon a time", "streaming": True, "sampling_param_max_tokens": 100}
    responses: queue.Queue = queue.Queue()
    client = grpcclient.InferenceServerClient(f"127.0.0.1:{decoupled_server.grpc_port}")
    try:
        client.start_stream(callback=lambda result, error: responses.put(error))
        client.async_stream_infer("tensorrt_llm", inputs("1.2", values))
        assert responses.get(timeout=60) is None  # the first response
        client.stop_stream(cancel_requests=True)
    finally:
        client.close()
    log, deadline = Path(decoupled_server.log_file), time.monotonic() + 30
    while "trtsweep hf: request cancelled after" not in log.read_text():
        assert time.monotonic() < deadline, "the model kept generating for a cancelled request"
        time.sleep(0.2)
    line = next(ln for ln in log.read_text().splitlines() if "trtsweep hf: request cancelled after" in ln)
    assert int(line.split("cancelled after ")[1].split()[0]) < 100


def test_streaming_needs_decoupled_mode(unary_server):
    with pytest.raises(InferenceServerException, match="Streaming is only supported in decoupled mode"):
        infer(unary_server, "0.19", {"text_input": QUESTION, "streaming": True})


def test_a_batching_config_is_refused_as_tensorrt_llm_refuses_it(demo_model, tmp_path):
    """config.pbtxt max_batch_size > 0 makes text_input 2-D, which TensorRT-LLM's llmapi model refuses."""
    repo = llmapi_repo(tmp_path / "repo", demo_model.hf_dir, "1.2", decoupled=True, triton_batch=2)
    with served(repo, tmp_path) as spec, grpcclient.InferenceServerClient(f"127.0.0.1:{spec.grpc_port}") as client:
        text = grpcclient.InferInput("text_input", [1, 1], "BYTES")
        text.set_data_from_numpy(np.array([[QUESTION.encode()]], dtype=np.object_))
        responses: queue.Queue = queue.Queue()
        client.start_stream(callback=lambda result, error: responses.put(error))
        client.async_stream_infer("tensorrt_llm", [text])
        error = responses.get(timeout=60)
        client.stop_stream()
    assert "only supports text_input being a 1D tensor" in str(error)


@pytest.mark.parametrize("protocol", ["grpc", "http"])
def test_llm_perf_adds_up_the_streamed_text_so_far_to_the_answer(decoupled_server, demo_model, greedy, tokenizer,
                                                                  tmp_path, protocol):  # fmt: skip
    """The llmapi model streams the text so far where the ensemble streams the new part: llm-perf sends the llmapi
    names (sampling_param_max_tokens, streaming) and records each response's new part, so a request's text is the
    answer, not every prefix of it joined."""
    import subprocess
    import sys

    data = tmp_path / "prompts.jsonl"
    data.write_text(json.dumps({"messages": [{"role": "user", "content": QUESTION}]}) + "\n")
    export = tmp_path / "profile.json"
    port = decoupled_server.grpc_port if protocol == "grpc" else decoupled_server.http_port
    cmd = [str(Path(sys.executable).parent / "llm-perf"), "--protocol", protocol, "--url", f"127.0.0.1:{port}",
           "--model", "tensorrt_llm", "--input-data", str(data), "--num-requests", "2", "--warmup-requests", "0",
           "--max-tokens", "24", "--tokenizer-path", str(demo_model.hf_dir), "--chat-template", "--streaming",
           "--extra-inputs", "sampling_param_exclude_input_from_output:true",
           "--profile-export-file", str(export)]  # fmt: skip
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    requests = json.loads(export.read_text())["levels"][0]["requests"]
    assert [r["text"] for r in requests] == [tokenizer.decode(greedy[1], skip_special_tokens=True)] * 2
    assert all(len(r["chunk_ms"]) > 3 for r in requests), "one chunk per new text, not one per request"
