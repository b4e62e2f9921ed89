"""The bundle's smoke test: llm-perf against the deployed server with a few of the sweep's own prompts."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from trtsweep.errors import TrtsweepError
from trtsweep.handoff.paths import sentinel
from trtsweep.handoff.server import PORTS
from trtsweep.sweep.paths import default_base_dir, sweep_path

SMOKE_REQUESTS = 4


def served_model(point: dict[str, Any]) -> str:
    """The model llm-perf asks for: the engine flow's ensemble, the llmapi model, or trtllm-serve's model id (the
    last component of the checkpoint directory it serves: `model` in the container and the pod)."""
    if point.get("server", "triton") == "trtllm-serve":
        return sentinel("TRTSWEEP_MODEL_NAME")
    return "tensorrt_llm" if point.get("flow", "engine") == "pytorch" else "ensemble"


def smoke_command(point: dict[str, Any], url: str = sentinel("TRTSWEEP_HOST")) -> list[str]:
    """llm-perf against the deployed server: the point's protocol, request inputs and options, a few prompts."""
    bench = point["benchmark"]
    openai = point.get("server", "triton") == "trtllm-serve"
    protocol = "openai" if openai else bench.get("protocol", "grpc")
    port = PORTS["grpc"] if protocol == "grpc" else PORTS["http"]
    argv = ["llm-perf", "-u", f"{url}:{port}", "-i", protocol, "-m", served_model(point)]
    if openai:
        argv += ["--endpoint", "completions"]  # the prompt as the benchmark sent it (chat template by llm-perf)
    argv += ["--input-data", "smoke/prompts.jsonl", "--concurrency", "1", "--num-requests", str(SMOKE_REQUESTS),
             "--warmup-requests", "0"]  # fmt: skip
    if bench.get("max_tokens"):
        argv += ["--max-tokens", str(bench["max_tokens"])]
    if bench.get("chat_template"):
        tokenizer = "TRTSWEEP_MODEL_DIR" if point.get("flow", "engine") == "pytorch" else "TRTSWEEP_TOKENIZER_DIR"
        argv += ["--chat-template", "--tokenizer-path", sentinel(tokenizer)]  # the pytorch flow's checkpoint has it
    if bench.get("extra_inputs"):
        argv += ["--extra-inputs-json", json.dumps(bench["extra_inputs"], sort_keys=True)]
    if not point.get("streaming", True):
        argv.append("--no-streaming")
    return argv


def sweep_base(results_dir: Path) -> Path:
    """Where the sweep's relative paths started in the run that measured `results_dir` (its plan.json), else
    where an inline sweep's start (the checkout)."""
    try:
        recorded = json.loads((results_dir / "plan.json").read_text()).get("base_dir")
    except (OSError, ValueError, AttributeError):
        recorded = None
    return Path(recorded) if isinstance(recorded, str) else default_base_dir()


def prompts(point: dict[str, Any], base_dir: Path) -> str:
    """smoke/prompts.jsonl: the first SMOKE_REQUESTS prompts of the point's input data."""
    data = sweep_path(point["benchmark"]["input_data"], base_dir)
    try:
        lines = [line for line in data.read_text(encoding="utf-8").splitlines() if line.strip()]
    except OSError as exc:
        raise TrtsweepError(
            f"{data}: the point's prompts cannot be read for the smoke test ({exc.strerror}); "
            "--base-dir names where the sweep's relative paths start"
        ) from exc
    return "\n".join(lines[:SMOKE_REQUESTS]) + "\n"
