"""llm-perf's openai protocol against a real OpenAI-compatible server (`transformers serve`, CPU)."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import free_ports
from trtsweep.perf.benchmark import BenchmarkConfig, run
from trtsweep.perf.protocols import Endpoint
from trtsweep.perf.tokenizer import Tokenizer
from trtsweep.serve.process import http_service


@pytest.fixture(scope="module")
def openai_server(demo_model, tmp_path_factory) -> Iterator[str]:
    (port,) = free_ports(1)
    log = tmp_path_factory.mktemp("openai") / "serve.log"
    cmd = [str(Path(sys.executable).parent / "transformers"), "serve", str(demo_model.hf_dir),
           "--host", "127.0.0.1", "--port", str(port)]  # fmt: skip
    with http_service(cmd, f"http://127.0.0.1:{port}/health", 180.0, log):
        yield f"127.0.0.1:{port}"


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("data") / "p.jsonl"
    rows = [
        {"input": "What is the capital of France?", "output": "The capital of France is Paris."},
        {"messages": [{"role": "user", "content": "What is the capital of France?"}], "output": "Paris"},
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


@pytest.mark.parametrize(("endpoint", "streaming"), [("chat", True), ("chat", False), ("completions", True)])
def test_openai_protocol(openai_server, demo_model, data, endpoint, streaming, tmp_path):
    config = BenchmarkConfig(
        endpoint=Endpoint(url=openai_server, model=str(demo_model.hf_dir), streaming=streaming,
                          openai_endpoint=endpoint, extra_inputs={"temperature": 0.0}),
        protocol="openai", input_data=data, concurrency=[1], num_requests=2, warmup_requests=0,
        tokenizer_path=str(demo_model.hf_dir), max_tokens=16, export_file=tmp_path / "out.json",
        chat_template=endpoint == "completions",
    )  # fmt: skip
    (report,) = run(config)
    s = report.summary
    assert s["succeeded"] == 2, s
    assert s["ttft_ms"]["p50"] > 0 and s["output_token_throughput"] > 0
    if endpoint == "chat":
        assert all("Paris" in row["text"] for row in report.rows())
    if streaming:
        # the server's usage counts are used and cross-checked against our re-tokenization (transformers
        # serve counts the end-of-turn token as a completion token, so a finished answer differs by one)
        assert s["token_count_source"] == "server"
        tokenizer = Tokenizer(str(demo_model.hf_dir))
        differ = []
        for row in report.rows():  # output_tokens: the server's count
            assert row["retokenized_output_tokens"] == tokenizer.count(row["text"])
            assert 0 <= row["output_tokens"] - row["retokenized_output_tokens"] <= 1
            differ.append(row["output_tokens"] != row["retokenized_output_tokens"])
            assert row["chunks"] > 1
        assert s["token_count_mismatch_rate"] == sum(differ) / len(differ)


def test_unreachable_server_is_a_one_line_error(data):
    from trtsweep.errors import TrtsweepError

    (port,) = free_ports(1)
    config = BenchmarkConfig(endpoint=Endpoint(url=f"127.0.0.1:{port}", model="m", connect_timeout_s=2),
                             protocol="openai", input_data=data, concurrency=[1])  # fmt: skip
    started = time.monotonic()
    with pytest.raises(TrtsweepError, match=f"cannot reach OpenAI-compatible server at http://127.0.0.1:{port}"):
        run(config)
    assert time.monotonic() - started < 5
