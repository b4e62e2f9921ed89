"""A warm llm-perf (perf/warm.py): started ahead with its imports and tokenizer, it runs the benchmark it is handed as
the cold command does (output, exports, exit status), and one never handed a benchmark is gone with its block."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from tests.unit.test_perf_search import zero_server
from trtsweep.common.procs import running
from trtsweep.perf import warm
from trtsweep.perf.argv import command
from trtsweep.serve.server import run_while

PARAMS: dict[str, Any] = {
    "protocol": "openai", "endpoint": "completions", "model": "zero", "concurrency": [1, 2], "num_requests": 6,
    "warmup_requests": 0, "max_tokens": 6, "streaming": True, "chat_template": True, "extra_inputs": {}, "seed": 0,
}  # fmt: skip


def _argv(url: str, tmp_path: Path, name: str, tokenizer: str) -> list[str]:
    data = tmp_path / "p.jsonl"
    data.write_text("".join(json.dumps({"input": f"question {i}?", "output": "an answer"}) + "\n" for i in range(6)))
    params = {**PARAMS, "url": url, "input_data": str(data), "tokenizer_path": tokenizer,
              "export_file": str(tmp_path / name / "perf.json")}  # fmt: skip
    return command(params)


def _measured(tmp_path: Path, name: str) -> list[tuple[int, int]]:
    summary = json.loads((tmp_path / name / "perf.summary.json").read_text())
    return [(level["concurrency"], level["summary"]["succeeded"]) for level in summary["levels"]]


def test_a_warm_llm_perf_runs_its_benchmark_as_the_cold_command(tmp_path: Path, demo_model: Any) -> None:
    tokenizer = str(demo_model.hf_dir)
    with zero_server(slots=4, first_ms=5, gap_ms=1) as url:
        cold = run_while(_argv(url, tmp_path, "cold", tokenizer), lambda: None)
        argv = _argv(url, tmp_path, "warm", tokenizer)
        with warm.started(sys.executable, str(tmp_path / "warm" / "perf.json"), "openai", tokenizer) as perf:
            time.sleep(0.5)  # its imports and tokenizer, as while a server loads
            assert not perf.takes(_argv(url, tmp_path, "other", tokenizer))  # another benchmark's
            assert perf.takes(argv)
            hot = run_while(perf.go(argv), lambda: None)
            assert not perf.takes(argv)  # one benchmark each
    assert (hot.returncode, cold.returncode) == (0, 0), hot.stderr
    assert _measured(tmp_path, "warm") == _measured(tmp_path, "cold") == [(1, 6), (2, 6)]
    assert hot.stdout.splitlines()[0] == cold.stdout.splitlines()[0]
    assert "TTFT p50" in hot.stdout.splitlines()[0]


def test_a_warm_llm_perf_fails_as_the_cold_command_does(tmp_path: Path) -> None:
    argv = command({**PARAMS, "url": "127.0.0.1:1", "input_data": str(tmp_path / "missing.jsonl"),
                    "export_file": str(tmp_path / "perf.json")})  # fmt: skip
    cold = run_while(argv, lambda: None)
    with warm.started(sys.executable, str(tmp_path / "perf.json"), "grpc", None) as perf:
        hot = run_while(perf.go(argv), lambda: None)
    assert hot.returncode == cold.returncode != 0
    assert hot.stderr.strip().splitlines()[-1] == cold.stderr.strip().splitlines()[-1], hot.stderr


def test_a_warm_llm_perf_never_handed_a_benchmark_is_gone_with_its_block(tmp_path: Path) -> None:
    with warm.started(sys.executable, str(tmp_path / "perf.json"), "http", None) as perf:
        pid = perf.proc.pid
        assert running(pid)
        assert not perf.takes(["llm-perf", "-u", "x"])  # not an llm-perf command line of this Python
    assert not running(pid)


def test_a_warm_llm_perf_dies_with_the_process_that_started_it(tmp_path: Path) -> None:
    code = ("import sys, time; from trtsweep.perf import warm; "
            "block = warm.started(sys.executable, 'x.json', 'grpc', None); w = block.__enter__(); "
            "print(w.proc.pid, flush=True); "
            "time.sleep(60)")  # fmt: skip
    parent = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert parent.stdout is not None
    child = int(parent.stdout.readline())
    assert running(child)
    parent.kill()
    parent.wait()
    deadline = time.monotonic() + 10
    while running(child) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not running(child)
