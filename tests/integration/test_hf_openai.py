"""`python -m trtsweep.serve.hf_openai`, the hf backend's trtllm-serve, as a real server process on a free loopback
port: started with trtllm-serve's arguments on a per-start link to the demo model (as the sweep starts it), checked
against transformers' own greedy generate, measured by llm-perf, stopped by PID."""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
import yaml
from transformers import AutoModelForCausalLM, AutoTokenizer

from tests.conftest import free_ports
from trtsweep.serve.process import http_service

QUESTION = "What is the capital of France?"
ANSWER = "The capital of France is Paris."
MAX_SEQ_LEN = 256


def start_command(link: Path, port: int, options: Path) -> list[str]:
    return [sys.executable, "-m", "trtsweep.serve.hf_openai", str(link), "--host", "127.0.0.1", "--port", str(port),
            "--backend", "pytorch", "--tp_size", "1", "--pp_size", "1", "--max_batch_size", "4",
            "--extra_llm_api_options", str(options), "--log_level", "info"]  # fmt: skip


def served_link(work: Path, model_dir: Path) -> Path:
    """A start's own link to the checkpoint, as serve/openai_server.py makes one."""
    link = work / "served" / f"trtsweep-{secrets.token_hex(8)}"
    link.parent.mkdir(parents=True)
    link.symlink_to(model_dir, target_is_directory=True)
    return link


def options_file(work: Path) -> Path:
    """LLM API options as llmapi.options writes them; max_batch_size 1 wins over the command line's 4."""
    path = work / "options.yaml"
    options = {"max_batch_size": 1, "max_seq_len": MAX_SEQ_LEN, "max_input_len": 128, "dtype": "auto",
               "tensor_parallel_size": 1, "kv_cache_config": {"free_gpu_memory_fraction": 0.5},
               "enable_iter_perf_stats": True}  # fmt: skip
    path.write_text(yaml.safe_dump(options))
    return path


@pytest.fixture(scope="module")
def server(demo_model, tmp_path_factory) -> Iterator[dict[str, Any]]:
    work = tmp_path_factory.mktemp("hf_openai")
    (port,) = free_ports(1)
    link = served_link(work, demo_model.hf_dir)
    log = work / "serve.log"
    cmd = start_command(link, port, options_file(work))
    with http_service(cmd, f"http://127.0.0.1:{port}/health", 180.0, log) as pid:
        yield {"url": f"http://127.0.0.1:{port}", "link": link, "log": log, "pid": pid}
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


@pytest.fixture(scope="module")
def tokenizer(demo_model):
    return AutoTokenizer.from_pretrained(demo_model.hf_dir)


@pytest.fixture(scope="module")
def reference(demo_model, tokenizer):
    """transformers' greedy generate of prompt ids: (text, output ids without EOS)."""
    model = AutoModelForCausalLM.from_pretrained(demo_model.hf_dir, dtype=torch.float32).eval()

    def run(ids: list[int], max_tokens: int) -> tuple[str, list[int]]:
        with torch.inference_mode():
            out = model.generate(torch.tensor([ids]), max_new_tokens=max_tokens, do_sample=False)
        tokens = [t for t in out[0, len(ids) :].tolist() if t != tokenizer.eos_token_id]
        return tokenizer.decode(tokens, skip_special_tokens=True), tokens

    return run


def post(url: str, path: str, body: dict[str, Any]) -> tuple[int, Any]:
    """(status, the JSON answer or, streamed, the list of `data:` payloads)."""
    request = urllib.request.Request(url + path, data=json.dumps(body).encode(), method="POST")
    try:
        with urllib.request.urlopen(request, timeout=120) as resp:
            raw = resp.read().decode()
            status = resp.status
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())
    if not body.get("stream"):
        return status, json.loads(raw)
    payloads = [line[5:].strip() for line in raw.splitlines() if line.startswith("data:")]
    assert payloads[-1] == "[DONE]"
    return status, [json.loads(p) for p in payloads[:-1]]


def streamed_text(chunks: list[dict[str, Any]], kind: str) -> str:
    key = "delta" if kind == "chat" else None
    return "".join((c[key].get("content") or "") if key else c["text"] for ch in chunks for c in ch["choices"])


def test_models_answers_trtllm_serves_name_for_the_directory(server):
    with urllib.request.urlopen(server["url"] + "/v1/models", timeout=10) as resp:
        models = json.loads(resp.read())
    assert models["object"] == "list"
    assert [m["id"] for m in models["data"]] == [server["link"].name]  # trtllm-serve: the directory's name


@pytest.mark.parametrize("stream", [False, True])
def test_completion_is_transformers_greedy_output_with_exact_usage(server, tokenizer, reference, stream):
    prompt = tokenizer.apply_chat_template([{"role": "user", "content": QUESTION}], tokenize=False,
                                           add_generation_prompt=True)  # fmt: skip
    ids = tokenizer(prompt).input_ids
    body = {"model": str(server["link"]), "prompt": prompt, "max_tokens": 24, "temperature": 0, "stream": stream}
    if stream:
        body["stream_options"] = {"include_usage": True, "continuous_usage_stats": False}
    status, answer = post(server["url"], "/v1/completions", body)
    assert status == 200
    text, tokens = reference(ids, 24)
    assert text == ANSWER
    if stream:
        assert streamed_text(answer, "completions") == text
        assert len(answer) > len(tokens)  # a chunk per token, then the usage
        assert [c["finish_reason"] for c in answer[-2]["choices"]] == ["stop"]
        assert answer[-1]["choices"] == [] and all("usage" not in c for c in answer[:-1])
        usage = answer[-1]["usage"]
    else:
        assert [(c["text"], c["finish_reason"]) for c in answer["choices"]] == [(text, "stop")]
        usage = answer["usage"]
    assert usage == {
        "prompt_tokens": len(ids),
        "completion_tokens": len(tokens),
        "total_tokens": len(ids) + len(tokens),
    }


@pytest.mark.parametrize("stream", [False, True])
def test_chat_is_transformers_greedy_output_of_the_chat_template(server, tokenizer, reference, stream):
    messages = [{"role": "user", "content": QUESTION}]
    ids = tokenizer(tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True),
                    add_special_tokens=False).input_ids  # fmt: skip
    body = {"model": server["link"].name, "messages": messages, "max_tokens": 5, "temperature": 0, "stream": stream}
    if stream:
        body["stream_options"] = {"include_usage": True}  # continuous_usage_stats defaults to true, as trtllm-serve's
    status, answer = post(server["url"], "/v1/chat/completions", body)
    assert status == 200
    text, tokens = reference(ids, 5)
    assert text == "The capital of France is"
    if stream:
        assert answer[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
        assert streamed_text(answer, "chat") == text
        assert [c["finish_reason"] for c in answer[-2]["choices"]] == ["length"]
        assert [c["usage"]["completion_tokens"] for c in answer[1:-1]] == list(range(1, len(tokens) + 1))
        usage = answer[-1]["usage"]
    else:
        assert answer["choices"][0]["message"] == {"role": "assistant", "content": text}
        usage = answer["usage"]
    assert (usage["prompt_tokens"], usage["completion_tokens"]) == (len(ids), len(tokens))


def test_streamed_cjk_text_is_never_split_inside_a_character(server):
    body = {"model": server["link"].name, "prompt": "中文：北京是中国的首都。上海", "max_tokens": 16, "temperature": 0}
    _, whole = post(server["url"], "/v1/completions", body)
    _, chunks = post(server["url"], "/v1/completions", {**body, "stream": True})
    texts = [c["text"] for chunk in chunks for c in chunk["choices"]]
    assert all("\ufffd" not in t for t in texts)
    assert "".join(texts) == whole["choices"][0]["text"] != ""


def test_stop_string_and_sampling_settings(server):
    body = {"model": server["link"].name, "messages": [{"role": "user", "content": QUESTION}], "max_tokens": 24,
            "temperature": 0, "stop": [" Paris"]}  # fmt: skip
    _, answer = post(server["url"], "/v1/chat/completions", body)
    choice = answer["choices"][0]
    assert (choice["message"]["content"], choice["finish_reason"], choice["stop_reason"]) == (
        "The capital of France is",
        "stop",
        " Paris",
    )
    sampled = {**body, "max_tokens": 8, "temperature": 1.0, "top_k": 40, "seed": 11, "stop": []}
    first, second = (post(server["url"], "/v1/chat/completions", sampled)[1]["choices"] for _ in range(2))
    assert first == second  # the seed


@pytest.mark.parametrize(
    ("body", "status", "message"),
    [
        ({"model": "another-model", "prompt": "Hi"}, 404, "The model `another-model` does not exist."),
        ({"prompt": "Hi", "max_tokens": MAX_SEQ_LEN}, 400, f"should not exceed max_seq_len ({MAX_SEQ_LEN})"),
        ({"prompt": "Hi", "n": 2}, 400, "n=2 is not supported"),
        ({"prompt": "Hi", "best_of_n": 2}, 400, "unknown field(s) best_of_n"),
        ({"prompt": "Hi", "stream_options": {"include_usage": True}}, 400, "stream_options can only be set"),
        ({"prompt": "Hi", "temperature": "hot"}, 400, "temperature: expected a number"),
    ],
)
def test_bad_requests_are_json_errors(server, body, status, message):
    code, answer = post(server["url"], "/v1/completions", {"model": server["link"].name, **body})
    assert (code, answer["object"], answer["code"]) == (status, "error", status)
    assert message in answer["message"]


def first_and_last_chunk(url: str, body: dict[str, Any], times: list[tuple[float, float]]) -> None:
    request = urllib.request.Request(url + "/v1/completions", data=json.dumps(body).encode(), method="POST")
    with urllib.request.urlopen(request, timeout=120) as resp:
        stamps = [time.monotonic() for line in resp if line.startswith(b"data: {")]
    times.append((stamps[0], stamps[-1]))


def get_json(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=60) as resp:
        assert resp.headers["Content-Type"].startswith("application/json")
        return json.loads(resp.read())


def test_metrics_hands_out_each_forward_pass_once_as_iteration_stats(server):
    """enable_iter_perf_stats: /metrics takes the iteration stats kept since the last call, in TensorRT-LLM's JSON
    form: the prompt's forward pass (a context request, its tokens, the new request's queue time), then one
    generation step per further token, the last one completing the request; a second call has none left."""
    get_json(server["url"] + "/metrics")  # whatever earlier tests left
    body = {"model": server["link"].name, "prompt": "Once upon a time", "max_tokens": 5, "ignore_eos": True,
            "temperature": 0}  # fmt: skip
    status, answer = post(server["url"], "/v1/completions", body)
    assert status == 200
    stats = get_json(server["url"] + "/metrics")
    assert len(stats) == 5  # 5 tokens: the prompt's pass and 4 steps
    assert [s["iter"] for s in stats] == list(range(stats[0]["iter"], stats[0]["iter"] + 5))
    batching = [s["inflightBatchingStats"] for s in stats]
    assert [b["numContextRequests"] for b in batching] == [1, 0, 0, 0, 0]
    assert [b["numGenRequests"] for b in batching] == [0, 1, 1, 1, 1]
    assert [b["numScheduledRequests"] for b in batching] == [1] * 5
    assert batching[0]["numCtxTokens"] == answer["usage"]["prompt_tokens"]
    assert [s["numNewActiveRequests"] for s in stats] == [1, 0, 0, 0, 0]
    assert [s["numCompletedRequests"] for s in stats] == [0, 0, 0, 0, 1]
    assert all(s["numActiveRequests"] == 1 and s["numQueuedRequests"] == 0 for s in stats)
    assert all(s["iterLatencyMS"] > 0 for s in stats) and stats[0]["newActiveRequestsQueueLatencyMS"] >= 0
    assert get_json(server["url"] + "/metrics") == []


def test_max_batch_size_from_the_options_file_makes_requests_wait(server):
    """max_batch_size 1 (the options file, over --max_batch_size 4): the second request starts after the first."""
    body = {"model": server["link"].name, "prompt": "Once upon a time", "max_tokens": 12, "ignore_eos": True,
            "temperature": 0, "stream": True}  # fmt: skip
    times: list[tuple[float, float]] = []
    threads = [threading.Thread(target=first_and_last_chunk, args=(server["url"], body, times)) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    (_, first_end), (second_start, _) = sorted(times)
    assert second_start >= first_end


def test_the_options_it_does_not_use_are_logged_once(server):
    ignored = "ignores: backend, kv_cache_config, max_input_len, pipeline_parallel_size, tensor_parallel_size\n"
    assert server["log"].read_text().count(ignored) == 1


def test_a_client_that_goes_away_stops_its_generation(server):
    body = {"model": server["link"].name, "prompt": "Once upon a time", "max_tokens": 200, "ignore_eos": True,
            "stream": True}  # fmt: skip
    request = urllib.request.Request(server["url"] + "/v1/completions", data=json.dumps(body).encode(), method="POST")
    with urllib.request.urlopen(request, timeout=60) as resp:
        assert resp.readline().startswith(b"data: {")
    deadline = time.monotonic() + 30
    while "client went away" not in server["log"].read_text() and time.monotonic() < deadline:
        time.sleep(0.2)
    line = next(ln for ln in server["log"].read_text().splitlines() if "client went away" in ln)
    assert int(line.split("after ")[1].split()[0]) < 200


@pytest.mark.parametrize("endpoint", ["chat", "completions"])
def test_llm_perf_measures_it(server, demo_model, tmp_path, endpoint):
    data = tmp_path / "prompts.jsonl"
    data.write_text(json.dumps({"input": QUESTION, "output": ANSWER}) + "\n")
    export = tmp_path / "profile.json"
    cmd = [str(Path(sys.executable).parent / "llm-perf"), "--protocol", "openai", "--url",
           server["url"].removeprefix("http://"), "--model", server["link"].name, "--endpoint", endpoint,
           "--input-data", str(data), "--concurrency", "1,2", "--num-requests", "2", "--max-tokens", "16",
           "--tokenizer-path", str(demo_model.hf_dir), "--streaming", "--extra-inputs", "temperature:0",
           "--expect-server-id", server["link"].name, "--profile-export-file", str(export),
           "--server-metrics-url", server["url"] + "/metrics"]  # fmt: skip
    if endpoint == "completions":
        cmd.append("--chat-template")
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    levels = [level["summary"] for level in json.loads(export.with_name("profile.summary.json").read_text())["levels"]]
    assert [s["succeeded"] for s in levels] == [2, 2]
    # the server's usage counts are used, and agree with llm-perf's re-tokenization of the text
    assert all(s["token_count_source"] == "server" and s["token_count_mismatch_rate"] == 0.0 for s in levels)
    # the server's iteration stats of each level: its requests (one warm-up each) and nothing of another level;
    # max_batch_size 1, so concurrency 2 queues one request while the other runs
    iterations = [s["server_metrics"]["iteration_stats"] for s in levels]
    assert [it["completed_requests"] for it in iterations] == [3, 3]
    assert [it["iterations_missed"] for it in iterations] == [0, 0]
    assert all(it["batch_mean"] == 1.0 and it["queue_ms_per_request"] >= 0 for it in iterations)
    assert iterations[0]["queued_max"] == 0 and iterations[1]["queued_max"] == 1
    assert all(it["iterations"] >= 3 and it["kv_used_fraction_max"] is None for it in iterations)  # no paged KV cache


def test_a_bad_option_fails_the_start_in_one_line(demo_model, tmp_path):
    options = tmp_path / "options.yaml"
    options.write_text(yaml.safe_dump({"dtype": "fp8", "max_batch_size": 2}))
    (port,) = free_ports(1)
    run = subprocess.run(start_command(demo_model.hf_dir, port, options), capture_output=True, text=True, timeout=120)
    assert run.returncode == 2
    assert "dtype: expected auto or one of float32, bfloat16, float16, int8, got 'fp8'" in run.stderr


def test_sigterm_cancels_running_generations_and_exits_0(demo_model, tmp_path):
    (port,) = free_ports(1)
    link = served_link(tmp_path, demo_model.hf_dir)
    log = tmp_path / "serve.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(start_command(link, port, options_file(tmp_path)), stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=True)  # fmt: skip
    try:
        deadline = time.monotonic() + 180
        while True:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2).close()
                break
            except OSError:
                assert proc.poll() is None and time.monotonic() < deadline, log.read_text()
                time.sleep(0.2)
        body = {"model": link.name, "prompt": "Once upon a time", "max_tokens": 200, "ignore_eos": True,
                "stream": True}  # fmt: skip
        request = urllib.request.Request(f"http://127.0.0.1:{port}/v1/completions", data=json.dumps(body).encode())
        with urllib.request.urlopen(request, timeout=60) as resp:
            assert resp.readline().startswith(b"data: {")
            os.kill(proc.pid, signal.SIGTERM)
            payloads = [line[5:].strip() for line in resp if line.startswith(b"data:")]
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert payloads[-1] == b"[DONE]"
    assert json.loads(payloads[-2])["choices"][0]["finish_reason"] == "cancelled"
    assert "stopped" in log.read_text()
