"""What llm-perf sends for the workloads, recorded by a zero-cost server of the test's own (its own process on a
loopback port, stopped by PID): a Mooncake trace replayed by worker processes sends every row once, in trace order,
scheduled at the trace's times scaled by the speed, with prompts of the row's token count (demo model's tokenizer)
and its output length; shared-prefix prompts arrive with their prefix's exact tokens first; each level says its
prefix share."""

from __future__ import annotations

import json
import multiprocessing
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import PROMPTS, free_ports
from trtsweep.perf import cli
from trtsweep.perf.tokenizer import Tokenizer
from trtsweep.perf.workloads import shared_prefixes
from trtsweep.serve.process import http_service

RECORDER = """
import json, sys
from aiohttp import web
from trtsweep.perf.zeroserver import ZeroServer

port, log = int(sys.argv[1]), sys.argv[2]

@web.middleware
async def record(request, handler):
    if request.method == "POST":
        with open(log, "a") as out:
            out.write(json.dumps(await request.json()) + "\\n")
    return await handler(request)

app = ZeroServer(2, 0.0, 0.0).app()
app.middlewares.append(record)
web.run_app(app, host="127.0.0.1", port=port, print=None)
"""
TRACE = [
    {"timestamp": 0, "input_length": 40, "output_length": 3, "hash_ids": [0, 1, 2]},
    {"timestamp": 100, "input_length": 37, "output_length": 2, "hash_ids": [0, 1, 3]},
    {"timestamp": 100, "input_length": 20, "output_length": 4, "hash_ids": [0, 4]},
    {"timestamp": 300, "input_length": 10, "output_length": 1, "hash_ids": [5]},
    {"timestamp": 450, "input_length": 33, "output_length": 2, "hash_ids": [0, 1, 6]},
]


@pytest.fixture
def recorder(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """The zero-cost server, every POST body appended to a JSON-lines log."""
    (port,) = free_ports(1)
    script, log = tmp_path / "recorder.py", tmp_path / "sent.jsonl"
    script.write_text(RECORDER)
    with http_service([sys.executable, str(script), str(port), str(log)], f"http://127.0.0.1:{port}/health", 60):
        yield f"127.0.0.1:{port}", log


def sent(log: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in log.read_text().splitlines()]


def ids(tokenizer: Any, text: str) -> list[int]:
    return list(tokenizer.encode(text, add_special_tokens=False))


def test_a_mooncake_trace_replayed_by_workers_sends_its_rows_at_their_scaled_times(recorder, demo_model, tmp_path,
                                                                                   spooled):  # fmt: skip
    from transformers import AutoTokenizer

    url, log = recorder
    trace = tmp_path / "trace.jsonl"
    trace.write_text("".join(json.dumps(r) + "\n" for r in TRACE))
    export = tmp_path / "replay.json"
    rc = cli.main(["-u", url, "-i", "openai", "--endpoint", "completions", "-m", "zero", "--trace", str(trace),
                   "--trace-block-size", "16", "--replay-speed", "2", "--tokenizer-path", str(demo_model.hf_dir),
                   "--workers", "2", "--warmup-requests", "0", "--profile-export-file", str(export)])  # fmt: skip
    assert rc == 0
    assert multiprocessing.active_children() == []
    tokenizer = AutoTokenizer.from_pretrained(str(demo_model.hf_dir))
    bodies = sent(log)
    assert sorted(len(ids(tokenizer, b["prompt"])) for b in bodies) == sorted(r["input_length"] for r in TRACE)
    by_length = {len(ids(tokenizer, b["prompt"])): b for b in bodies}
    assert [by_length[r["input_length"]]["max_tokens"] for r in TRACE] == [r["output_length"] for r in TRACE]
    prompts = [ids(tokenizer, by_length[r["input_length"]]["prompt"]) for r in TRACE]
    assert prompts[0][:32] == prompts[1][:32] == prompts[4][:32] and prompts[0][:16] == prompts[2][:16]
    # every row once, in trace order, scheduled at its time / 2 from the first (the parent's one schedule)
    measured = sorted(spooled, key=lambda r: r.seq)
    assert [r.record_index for r in measured] == [0, 1, 2, 3, 4]
    t0 = measured[0].scheduled_ns
    want = [int(r["timestamp"] / 1000 / 2 * 1e9) for r in TRACE]
    assert [r.scheduled_ns - t0 for r in measured] == pytest.approx(want, abs=2)
    (level,) = json.loads(export.with_suffix(".summary.json").read_text())["levels"]
    assert level["replay_speed"] == 2.0 and level["summary"]["client"]["workers"] == 2
    shared = 32 + 32 + 16 + 0 + 32  # the leading blocks another row also has
    assert level["summary"]["prefix_share"] == pytest.approx(shared / sum(r["input_length"] for r in TRACE))


def test_shared_prefix_prompts_arrive_with_the_prefix_tokens_first(recorder, demo_model, tmp_path):
    from transformers import AutoTokenizer

    url, log = recorder
    export = tmp_path / "prefix.json"
    rc = cli.main(["-u", url, "-i", "openai", "--endpoint", "completions", "-m", "zero", "--input-data", str(PROMPTS),
                   "--shared-prefix-count", "2", "--shared-prefix-tokens", "96", "--tokenizer-path",
                   str(demo_model.hf_dir), "--warmup-requests", "0", "--concurrency", "2",
                   "--profile-export-file", str(export)])  # fmt: skip
    assert rc == 0
    tokenizer = AutoTokenizer.from_pretrained(str(demo_model.hf_dir))
    prefixes = [ids(tokenizer, p) for p in shared_prefixes(Tokenizer(str(demo_model.hf_dir)), 2, 96, seed=0)]
    bodies = sent(log)
    assert bodies and all(ids(tokenizer, b["prompt"])[:96] in prefixes for b in bodies)
    assert {tuple(ids(tokenizer, b["prompt"])[:96]) for b in bodies} == {tuple(p) for p in prefixes}
    (level,) = json.loads(export.with_suffix(".summary.json").read_text())["levels"]
    inputs = sum(len(ids(tokenizer, b["prompt"])) for b in bodies)
    assert level["summary"]["prefix_share"] == pytest.approx(96 * len(bodies) / inputs)
