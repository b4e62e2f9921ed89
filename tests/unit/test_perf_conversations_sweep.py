"""benchmark.conversations in a sweep: checked at plan time (the file read as llm-perf reads it, one line naming file
and line; not beside a trace, a load search or shared prefixes), carried into the point with its hash, and handed to
llm-perf as the host's copy of the file."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.unit.test_schema_reaches import llm_perf_argv, point_run, trt_sweep
from trtsweep.errors import TrtsweepError
from trtsweep.perf.argv import command
from trtsweep.sweep import planning, schema


def talks(tmp_path: Path, text: str = '{"conversation": [{"user": "hi", "reference": "hello"}, {"user": "and?"}]}\n'):
    path = tmp_path / "talks.jsonl"
    path.write_text(text)
    return path


def test_a_point_carries_the_conversations_with_defaults_and_hash(tmp_path):
    path = talks(tmp_path)
    (point,) = planning.expand(trt_sweep(benchmark={"conversations": {"path": str(path)}}))
    got = point["benchmark"]["conversations"]
    assert {k: v for k, v in got.items() if k != "sha256"} == {
        "path": str(path), "history": "served", "think_time_ms": 0, "think_time_std_ms": 0}  # fmt: skip
    assert len(got["sha256"]) == 64 and point["benchmark"]["concurrency"] == [1]
    (plain,) = planning.expand(trt_sweep())
    assert "conversations" not in plain["benchmark"]  # a sweep without them plans as before
    path.write_text(path.read_text() + '{"conversation": [{"user": "x"}]}\n')
    (edited,) = planning.expand(trt_sweep(benchmark={"conversations": {"path": str(path)}}))
    assert edited["benchmark"]["conversations"]["sha256"] != got["sha256"]


def test_the_plan_fails_on_a_bad_line_or_a_workload_beside_it(tmp_path):
    path = talks(tmp_path, '{"conversation": [{"user": "hi"}, {"user": "and?"}]}\n{"conversation": [{}]}\n')
    with pytest.raises(TrtsweepError) as err:
        planning.expand(trt_sweep(benchmark={"conversations": {"path": str(path)}}))
    assert f"benchmark.conversations.path': {path}:2: turn 0 has no 'user'" in str(err.value)
    one = talks(tmp_path, '{"conversation": [{"user": "hi"}, {"user": "and?"}]}\n')
    with pytest.raises(TrtsweepError, match=f"{one}:1: turn 0 has no recorded answer"):
        planning.expand(trt_sweep(benchmark={"conversations": {"path": str(one), "history": "recorded"}}))
    for other, value in (("shared_prefix", {"count": 2, "tokens": 8}), ("trace", {"path": str(one)})):
        sweep = trt_sweep()
        sweep["benchmark"] = {"input_data": "data/prompts.jsonl", other: value, "conversations": {"path": str(one)}}
        with pytest.raises(TrtsweepError, match=f"give conversations or {other}, not both"):
            schema.validate(sweep)
    with pytest.raises(TrtsweepError, match="think_time_ms"):
        schema.validate(trt_sweep(benchmark={"input_data": "x", "conversations": {"path": "p", "think_time_ms": -1}}))


def test_llm_perf_reads_the_hosts_copy_and_no_prompts(tmp_path):
    path = talks(tmp_path)
    sweep = trt_sweep(benchmark={"concurrency": [3], "conversations": {"path": str(path), "think_time_ms": 5}})
    (point,) = planning.expand(sweep)
    run = point_run(point, tmp_path)
    run.spec.inputs[str(path)] = "/inputs/1-talks.jsonl"  # the controller sent it (trtsweep_lanes)
    argv = command(run.benchmark_params())
    flags = dict(zip(argv, [*argv[1:], None], strict=True))
    assert flags["--conversations"] == "/inputs/1-talks.jsonl" and "--input-data" not in argv
    assert (flags["--history"], flags["--think-time-ms"], flags["--concurrency"]) == ("served", "5,0", "3")
    assert "--conversations" not in llm_perf_argv(planning.expand(trt_sweep())[0], tmp_path)
