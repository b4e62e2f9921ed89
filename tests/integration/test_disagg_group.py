"""A disaggregated group for real on this machine: one context and two generation workers (the hf backend's
trtllm-serve, serve/hf_openai.py) and the stand-in proxy (serve/disagg_proxy.py) reading the config file
toolchain.llmapi.disagg writes, started, checked ready, measured through the proxy and stopped by serve/group.py.
The answers through the proxy are the aggregated server's (transformers' greedy decoding), streamed or not, the
generation workers take turns, and a worker killed mid-request fails the group naming it; every process is gone
afterwards."""

from __future__ import annotations

import json
import os
import signal
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import free_ports
from trtsweep.common.procs import running as process_runs
from trtsweep.serve import group, server
from trtsweep.serve.openai_server import OpenAIServe
from trtsweep.serve.spec import ServerSpec
from trtsweep.toolchain.llmapi import disagg

RELEASE = "1.2"
SHAPE = {"context": {"tp": 1, "instances": 1}, "generation": {"tp": 1, "instances": 2}}
NGRAM = {"decoding_type": "NGram", "max_draft_len": 3, "max_matching_ngram_size": 2}
OPTIONS = {"max_batch_size": 2, "max_seq_len": 512, "max_input_len": 256, "enable_iter_perf_stats": True,
           "speculative_config": NGRAM}  # fmt: skip
PROMPT = "Repeat after me: one two three, one two three, one two three,"


def _start(work: Path, model_dir: Path) -> group.GroupState:
    shape = disagg.Shape.from_point(SHAPE)
    proxy_port, *ports = free_ports(1 + shape.instances())
    workers = disagg.workers(shape, RELEASE, OPTIONS, [], "127.0.0.1", ports)
    starts = []
    for worker in workers:
        options = work / f"llm_api_options_{worker.name}.yml"
        options.write_text(yaml.safe_dump(worker.options))
        openai = OpenAIServe(backend="hf", release=RELEASE, model=model_dir, options_file=options,
                             served_dir=work / "served" / worker.name, flags=worker.flags)  # fmt: skip
        spec = ServerSpec(model_repository=model_dir, log_file=work / f"{worker.name}.log", runtime="native",
                          http_port=worker.port, openai=openai)  # fmt: skip
        starts.append(group.WorkerStart(worker.name, worker.role, list(worker.gpus), spec))
    config = work / "proxy.yml"
    config.write_text(yaml.safe_dump(disagg.proxy_config(shape, workers, "127.0.0.1", proxy_port)))
    argv = disagg.proxy_argv(RELEASE, config)
    argv = [sys.executable, "-m", "trtsweep.serve.disagg_proxy", *argv[1:]]
    spec = ServerSpec(model_repository=work, log_file=work / "proxy.log", runtime="native", http_port=proxy_port)
    state = group.start_workers(starts, work / "group.json")
    group.wait_ready(state, 180)
    group.start_proxy(state, group.ProxyStart(argv, spec))
    group.wait_ready(state, 60)
    return state


def _pids(state: group.GroupState) -> list[int]:
    return [pid for m in group.record(state) for pid in (m["pid"], m["supervisor_pid"])]


@pytest.fixture(scope="module")
def running(demo_model, tmp_path_factory):
    work = tmp_path_factory.mktemp("disagg")
    state = _start(work, demo_model.hf_dir)
    try:
        yield state, work
    finally:
        group.stop(state)
    deadline = time.monotonic() + 10
    while any(process_runs(pid) for pid in _pids(state)) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not [pid for pid in _pids(state) if process_runs(pid)]


def _url(state: group.GroupState, name: str) -> str:
    return f"http://127.0.0.1:{next(m.port for m in state.members if m.name == name)}"


def _post(url: str, body: dict[str, Any]) -> Any:
    request = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST")
    with urllib.request.urlopen(request, timeout=120) as resp:
        raw = resp.read().decode()
    if not body.get("stream"):
        return json.loads(raw)
    payloads = [line[5:].strip() for line in raw.splitlines() if line.startswith("data:")]
    assert payloads[-1] == "[DONE]"
    return [json.loads(p) for p in payloads[:-1]]


def test_every_member_is_ready_and_answers_as_the_group(running):
    state, _ = running
    assert [m.name for m in state.members] == ["context0", "generation0", "generation1", "proxy"]
    for member in state.members:
        with urllib.request.urlopen(_url(state, member.name) + "/v1/models", timeout=10) as resp:
            assert json.loads(resp.read())["data"][0]["id"] == state.model_id
    assert group.gone(state) is None
    links = {Path(state.state(m).argv[3]) for m in state.members if m.role != "proxy"}
    assert len(links) == 3 and {link.name for link in links} == {state.model_id}  # a link of its own, one model id


def test_answers_through_the_proxy_are_the_aggregated_servers(running):
    state, work = running
    body = {"model": state.model_id, "prompt": PROMPT, "max_tokens": 12, "temperature": 0}
    # the aggregated answer: one worker alone, without disaggregated_params
    alone = _post(_url(state, "generation1") + "/v1/completions", body)["choices"][0]["text"]
    answer = _post(_url(state, "proxy") + "/v1/completions", body)
    assert answer["choices"][0]["text"] == alone and answer["choices"][0]["finish_reason"] == "length"
    assert "disaggregated_params" not in answer["choices"][0]
    assert answer["usage"]["completion_tokens"] == 12
    chunks = _post(_url(state, "proxy") + "/v1/completions", {**body, "stream": True})
    assert "".join(c["choices"][0]["text"] for c in chunks if c["choices"]) == alone
    log = (work / "proxy.log").read_text()
    gens = {m.port for m in state.members if m.role == "generation"}
    assert {port for port in gens if f"generation 127.0.0.1:{port}" in log} == gens  # round robin over both


def test_the_context_worker_returns_the_first_token_and_its_params(running):
    state, _ = running
    body = {"model": state.model_id, "prompt": PROMPT, "max_tokens": 8, "temperature": 0,
            "disaggregated_params": {"request_type": "context_only"}}  # fmt: skip
    answer = _post(_url(state, "context0") + "/v1/completions", body)
    choice = answer["choices"][0]
    params = choice["disaggregated_params"]
    assert choice["finish_reason"] == "not_finished" and answer["usage"]["completion_tokens"] == 1
    assert params["request_type"] == "context_only" and len(params["first_gen_tokens"]) == 1
    assert isinstance(params["ctx_request_id"], int) and answer["prompt_token_ids"]


def test_chat_through_the_proxy(running):
    state, _ = running
    body = {"model": state.model_id, "messages": [{"role": "user", "content": "Say hello."}], "max_tokens": 6,
            "temperature": 0}  # fmt: skip
    alone = _post(_url(state, "generation0") + "/v1/chat/completions", body)["choices"][0]["message"]["content"]
    answer = _post(_url(state, "proxy") + "/v1/chat/completions", body)
    assert answer["choices"][0]["message"]["content"] == alone


@pytest.mark.parametrize(("params", "extra", "message"), [
    ({"request_type": "generation_only", "ctx_request_id": 1}, {}, "first_gen_tokens: expected"),
    ({"request_type": "generation_only", "first_gen_tokens": [42]}, {}, "ctx_request_id: expected an integer"),
    ({"request_type": "context_only", "opaque_state": "x"}, {}, "unknown field(s) opaque_state"),
    ({"request_type": "context_only"}, {"stream": True}, "a context_only request is not streamed"),
    ({"request_type": "context_and_generation"}, {}, "expected context_only or generation_only"),
])  # fmt: skip
def test_bad_disaggregated_params_are_refused_in_one_line(running, params, extra, message):
    state, _ = running
    body = {"model": state.model_id, "prompt": "Hi", "max_tokens": 4, "disaggregated_params": params, **extra}
    request = urllib.request.Request(_url(state, "generation0") + "/v1/completions", data=json.dumps(body).encode(),
                                     method="POST")  # fmt: skip
    with pytest.raises(urllib.error.HTTPError) as caught:
        urllib.request.urlopen(request, timeout=30)
    answer = json.loads(caught.value.read())
    assert caught.value.code == 400 and message in answer["message"], answer


def test_a_worker_killed_mid_run_fails_the_group_naming_it(running):
    state, _ = running
    victim = next(m for m in state.members if m.name == "generation0")
    client = [sys.executable, "-c", "import time; time.sleep(60)"]  # a benchmark that outlives nothing
    os.kill(state.state(victim).pid, signal.SIGKILL)
    watched = server.run_while(client, lambda: group.gone(state), poll_s=0.2)
    assert watched.server_gone is not None and watched.returncode != 0
    assert watched.server_gone.startswith(f"generation worker generation0 (port {victim.port}): trtllm-serve (pid ")
    assert "signal 9" in watched.server_gone or "SIGKILL" in watched.server_gone, watched.server_gone
    assert sorted(group.stop(state)) == ["context0", "generation1", "proxy"]
    assert group.stop(state) == []
