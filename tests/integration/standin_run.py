"""A sweep on this machine (`ansible_connection: local`) whose points are served by the sleep-bound stand-in server
(benchmarks/standin_tritonserver.py): for fault tests that need a run in a known stage (a long model load, a slow
benchmark) without the cost of a real model. Also finds and ends the processes of one test's run by its tmp folder.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

import yaml

from tests.conftest import ROOT
from tests.integration.test_lanes_over_forks import free_block

STANDIN = ROOT / "benchmarks" / "standin_tritonserver.py"


def write_run(tmp_path: Path, name: str, load_s: float, ttl_s: float, token_ms: float = 5.0,
              points: int = 1, **extra: Any) -> Path:  # fmt: skip
    """The extra-vars file of a run of `points` stand-in points (float32, int8, bfloat16, ...) in `tmp_path`."""
    wrapper = tmp_path / f"tritonserver-standin-{load_s:g}"
    wrapper.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{STANDIN}" --standin-load-s {load_s:g} '
                       f'--standin-first-token-ms 20 --standin-token-ms {token_ms:g} "$@"\n')  # fmt: skip
    wrapper.chmod(0o755)
    base = free_block(3)
    sweep = {
        "name": name, "backend": "hf",
        "models": [{"repo_id": "HuggingFaceTB/SmolLM2-135M-Instruct", "name": "smol"}],
        "precisions": ["float32", "int8", "bfloat16"][:points], "parallelism": [{"tp": 1, "pp": 1}],
        "max_batch_sizes": [2], "lengths": [{"input": 256, "output": 16}], "streaming": [True],
        "placement": {"mode": "exclusive", "gpus_per_point": 1},
        "benchmark": {"input_data": "data/prompts.jsonl", "concurrency": [1], "num_requests": 8, "warmup_requests": 0,
                      "max_tokens": 16, "chat_template": True},
    }  # fmt: skip
    extravars = tmp_path / f"vars-{load_s:g}.yml"
    extravars.write_text(yaml.safe_dump({
        "trtsweep_sweep": sweep, "trtsweep_sweep_dir": str(ROOT), "trtsweep_results_dir": str(tmp_path / "results"),
        "trtsweep_work_dir": str(tmp_path / "work"), "trtsweep_triton_runtime": "native",
        "triton_serve_tritonserver": str(wrapper), "trtsweep_server_lease_ttl": ttl_s,
        "trtsweep_triton_http_port": base, "trtsweep_triton_grpc_port": base + 1,
        "trtsweep_triton_metrics_port": base + 2, "trtsweep_gpus": 1, **extra,
    }))  # fmt: skip
    return extravars


def playbook_argv(extravars: Path) -> list[str]:
    return [str(Path(sys.executable).parent / "ansible-playbook"), "sweep.yml", "-e", f"@{extravars}"]


def playbook_env() -> dict[str, str]:
    return {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
            "ANSIBLE_STDOUT_CALLBACK": "default"}  # fmt: skip


def procs(marker: str) -> dict[int, str]:
    """Pid -> command line of every process whose command line names `marker` (a test's own tmp folder)."""
    out = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        with contextlib.suppress(OSError):
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            if marker in cmdline:
                out[int(entry.name)] = cmdline
    return out


def all_gone(marker: str, timeout_s: float, what: str = "") -> float:
    """Seconds until no process names `marker` (only those whose command line holds `what`, if given); fails
    naming what is left."""
    start = time.monotonic()
    while True:
        left = {pid: line for pid, line in procs(marker).items() if what in line}
        if not left:
            return time.monotonic() - start
        assert time.monotonic() - start < timeout_s, f"still running after {timeout_s} s: {left}"
        time.sleep(0.1)


def kill_all(pids: list[int]) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def journal_stages(work: Path) -> list[str]:
    """The stages the run's lanes have entered so far (their journals under the work dir), in order."""
    out = []
    for path in sorted(work.glob("*/.runs/*/*.jsonl")):
        for line in path.read_text().splitlines():
            with contextlib.suppress(ValueError):
                event = json.loads(line)
                if event.get("event") == "stage":
                    out.append(event["stage"])
    return out


def records(tmp_path: Path, name: str) -> dict[str, dict[str, Any]]:
    folder = tmp_path / "results" / name
    plan = json.loads((folder / "plan.json").read_text())
    return {p["id"]: json.loads((folder / p["id"] / "status.json").read_text()) for p in plan["points"]}
