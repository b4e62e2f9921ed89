"""llm-perf against models with known timing: what it measures must be what the server did."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import start_server
from trtsweep.perf.benchmark import BenchmarkConfig, run
from trtsweep.perf.paced import write_paced_model
from trtsweep.perf.protocols import Endpoint
from trtsweep.serve import server
from trtsweep.serve.spec import ServerSpec

pytestmark = pytest.mark.quiet  # latencies checked to a few milliseconds: no other test beside it

FIRST_MS, GAP_MS, TOKENS = 100.0, 20.0, 10
E2E_MS = FIRST_MS + GAP_MS * (TOKENS - 1)


@pytest.fixture(scope="module")
def paced_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerSpec]:
    work = tmp_path_factory.mktemp("paced")
    write_paced_model(work / "repo", "paced", FIRST_MS, GAP_MS, decoupled=True)
    write_paced_model(work / "repo", "paced_unary", FIRST_MS, GAP_MS, decoupled=False)
    state, spec = start_server(work / "repo", work)
    try:
        yield spec
    finally:
        server.stop(state)


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("data") / "p.jsonl"
    path.write_text("".join(json.dumps({"input": f"q{i}", "max_tokens": TOKENS}) + "\n" for i in range(8)))
    return path


def bench(spec, data, protocol, model, streaming, concurrency):
    port = spec.grpc_port if protocol == "grpc" else spec.http_port
    config = BenchmarkConfig(
        endpoint=Endpoint(url=f"127.0.0.1:{port}", model=model, streaming=streaming), protocol=protocol,
        input_data=data, concurrency=[concurrency], num_requests=16, warmup_requests=2,
    )  # fmt: skip
    (report,) = run(config)
    return report.summary


@pytest.mark.parametrize("protocol", ["grpc", "http"])
def test_streaming_ttft_icl_tpot_match_the_model(paced_server, data, protocol):
    s = bench(paced_server, data, protocol, "paced", True, 1)
    assert s["succeeded"] == 16 and s["failed"] == 0
    # the client may add a little (server hop, decoding), never subtract; 2-core CI noise allowed
    assert FIRST_MS - 1 <= s["ttft_ms"]["p50"] <= FIRST_MS + 15
    assert GAP_MS - 3 <= s["icl_ms"]["p50"] <= GAP_MS + 3
    assert GAP_MS - 3 <= s["tpot_ms"]["p50"] <= GAP_MS + 3
    assert E2E_MS - 1 <= s["e2e_ms"]["p50"] <= E2E_MS + 20
    assert s["output_tokens"]["mean"] == TOKENS  # chunks counted without a tokenizer
    # closed loop at concurrency 1: one request per E2E
    assert s["request_throughput"] == pytest.approx(1000 / E2E_MS, rel=0.12)
    assert s["output_token_throughput"] == pytest.approx(TOKENS * 1000 / E2E_MS, rel=0.12)


@pytest.mark.parametrize(
    ("protocol", "model"), [("grpc", "paced_unary"), ("http", "paced_unary"), ("grpc", "paced"), ("http", "paced")]
)
def test_non_streaming_ttft_equals_e2e(paced_server, data, protocol, model):
    s = bench(paced_server, data, protocol, model, False, 1)
    assert s["succeeded"] == 16
    assert E2E_MS - 1 <= s["e2e_ms"]["p50"] <= E2E_MS + 20
    assert s["ttft_ms"]["p50"] == pytest.approx(s["e2e_ms"]["p50"], abs=1.0)


def test_concurrency_scales_throughput_of_an_unsaturated_server(paced_server, data):
    s = bench(paced_server, data, "grpc", "paced", True, 4)
    assert s["request_throughput"] == pytest.approx(4 * 1000 / E2E_MS, rel=0.15)
    assert FIRST_MS - 1 <= s["ttft_ms"]["p50"] <= FIRST_MS + 20


def bench_rate(spec, data, rate, **options):
    config = BenchmarkConfig(
        endpoint=Endpoint(url=f"127.0.0.1:{spec.grpc_port}", model="paced"), protocol="grpc", input_data=data,
        request_rate=[rate], arrival="constant", num_requests=12, warmup_requests=1, **options,
    )  # fmt: skip
    (report,) = run(config)
    return report.summary


def test_open_loop_keeps_its_schedule_when_the_server_keeps_up(paced_server, data):
    s = bench_rate(paced_server, data, 10.0)
    assert s["succeeded"] == 12
    # sends keep the schedule (a loop waiting for answers would lag 180 ms more per request: each takes 280 ms,
    # one is due every 100 ms); the bound leaves room for a loaded 2-core machine's scheduling (8 ms seen), not more
    assert s["schedule_lag_ms"]["p99"] < 40
    assert s["ttft_from_schedule_ms"]["p50"] == pytest.approx(s["ttft_ms"]["p50"], abs=40)
    # 12 requests sent 100 ms apart: window = 11 gaps + one E2E
    assert s["window_s"] == pytest.approx(1.1 + E2E_MS / 1000, abs=0.08)
    assert "warnings" not in s


def test_open_loop_counts_queueing_behind_a_cap_instead_of_hiding_it(paced_server, data):
    # one request in flight at a time, but one due every 100 ms while each takes 280 ms
    s = bench_rate(paced_server, data, 10.0, max_concurrency=1, slo={"e2e": 0.5})
    assert s["e2e_ms"]["p50"] == pytest.approx(E2E_MS, abs=20)  # what the server did
    assert s["e2e_from_schedule_ms"]["max"] > 5 * E2E_MS  # what a user arriving on schedule saw
    assert any("fell behind the schedule" in w for w in s["warnings"])
    # only the first requests meet a 500 ms e2e SLO measured from the schedule
    assert 0 < s["good_fraction"] < 0.5


def test_server_metrics_deltas_count_exactly_this_levels_requests(paced_server, data):
    config = BenchmarkConfig(
        endpoint=Endpoint(url=f"127.0.0.1:{paced_server.grpc_port}", model="paced"), protocol="grpc",
        input_data=data, concurrency=[2], num_requests=10, warmup_requests=2,
        server_metrics_url=f"http://127.0.0.1:{paced_server.metrics_port}/metrics",
    )  # fmt: skip
    (report,) = run(config)
    server_side = report.summary["server_metrics"]
    assert server_side["per_model"]["paced"]["requests"] == 12  # 10 measured + 2 warm-up, nothing else
    assert server_side["counters"]['nv_inference_request_success{model="paced",version="1"}'] == 12
    assert server_side["per_model"]["paced"]["queue_ms_per_request"] >= 0
