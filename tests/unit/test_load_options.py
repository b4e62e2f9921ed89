from __future__ import annotations

import argparse
import itertools
import statistics

import pytest

from trtsweep.errors import TrtsweepError
from trtsweep.perf.benchmark import BenchmarkConfig
from trtsweep.perf.cli import extra_inputs, extra_inputs_json, int_list, slo_spec
from trtsweep.perf.cli import parser as llm_perf_parser
from trtsweep.perf.protocols import Endpoint
from trtsweep.perf.runner import Level, arrival_offsets


def test_constant_arrivals_are_evenly_spaced():
    offsets = arrival_offsets(Level(num_requests=5, request_rate=4.0, arrival="constant"), 5, seed=0)
    assert offsets == pytest.approx([0.0, 0.25, 0.5, 0.75, 1.0])


@pytest.mark.parametrize(("arrival", "burstiness"), [("poisson", 1.0), ("gamma", 0.5), ("gamma", 4.0)])
def test_random_arrivals_have_the_requested_mean_rate_and_are_reproducible(arrival, burstiness):
    level = Level(num_requests=1, request_rate=20.0, arrival=arrival, burstiness=burstiness)
    offsets = arrival_offsets(level, 4001, seed=3)
    gaps = [b - a for a, b in itertools.pairwise(offsets)]
    assert statistics.fmean(gaps) == pytest.approx(0.05, rel=0.08)
    # gamma shape k: coefficient of variation 1/sqrt(k)
    assert statistics.stdev(gaps) / statistics.fmean(gaps) == pytest.approx(burstiness**-0.5, rel=0.1)
    assert arrival_offsets(level, 50, seed=3) == offsets[:50]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({}, "exactly one of concurrency or request rate"),
        ({"concurrency": 2, "request_rate": 1.0}, "exactly one of"),
        ({"request_rate": -1.0}, "must be > 0"),
        ({"request_rate": 1.0, "arrival": "weibull"}, "--arrival must be one of"),
    ],
)
def test_bad_levels(kwargs, message):
    with pytest.raises(TrtsweepError, match=message):
        Level(num_requests=1, **kwargs)


def test_cli_value_parsers():
    assert slo_spec("ttft=500ms,tpot=50,e2e=2s") == {"ttft": 0.5, "tpot": 0.05, "e2e": 2.0}
    assert int_list("1, 2,4") == [1, 2, 4]
    assert extra_inputs("top_k:1,temperature:0.5,stream:true,name:x") == {
        "top_k": 1, "temperature": 0.5, "stream": True, "name": "x"}  # fmt: skip
    assert extra_inputs_json('{"stop_words": [" France", "."], "top_k": 1}') == {"stop_words": [" France", "."],
                                                                                "top_k": 1}  # fmt: skip
    for parser, bad in ((slo_spec, "latency=5ms"), (slo_spec, "ttft=fast"), (int_list, "1,a"), (int_list, "0"),
                        (extra_inputs, "top_k"), (extra_inputs_json, "[1]"), (extra_inputs_json, '{"a": []}'),
                        (extra_inputs_json, '{"a": [1, "x"]}'), (extra_inputs_json, '{"a": {"b": 1}}'),
                        (extra_inputs_json, "{nope")):  # fmt: skip
        with pytest.raises(argparse.ArgumentTypeError):
            parser(bad)


@pytest.mark.parametrize(
    "argv",
    [
        ["--num-requests", "0"],
        ["--num-requests", "-3"],
        ["--warmup-requests", "-1"],
        ["--max-tokens", "0"],
        ["--request-timeout", "0"],
        ["--connect-timeout", "-1"],
        ["--stall-timeout", "-1"],
        ["--request-timeout", "nan"],
        ["--concurrency", "0"],
    ],
)
def test_llm_perf_refuses_counts_and_timeouts_out_of_range(argv, capsys):
    # --num-requests 0 used to mean "one per record" (config.num_requests or len(requests)), silently
    with pytest.raises(SystemExit) as exc:
        llm_perf_parser().parse_args(["-m", "ensemble", "--input-data", "p.jsonl", *argv])
    assert exc.value.code == 2
    assert f"argument {argv[0]}" in capsys.readouterr().err
    args = llm_perf_parser().parse_args(
        ["-m", "e", "--stall-timeout", "0", "--warmup-requests", "0", "--num-requests", "1"]
    )
    assert (args.stall_timeout, args.warmup_requests, args.num_requests) == (0.0, 0, 1)  # 0: the check is off


def test_benchmark_config_refuses_zero_requests_per_level():
    config = BenchmarkConfig(endpoint=Endpoint(url="x", model="m"), protocol="grpc", input_data=None,
                             concurrency=[1], num_requests=0)  # fmt: skip
    with pytest.raises(TrtsweepError, match="--num-requests must be a positive integer, got 0"):
        config.levels(5)
