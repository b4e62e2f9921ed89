"""Prompts longer than a point's max_input_len, counted with the model's tokenizer, before anything is spent.

A prompt over the engine's limit is refused by the server after the engine was built (or, without a limit,
computed for minutes and timed out on). The plan counts every prompt as llm-perf will send it (the chat
template applied when the benchmark asks for it, special tokens included) with the model's tokenizer when
the controller already has it (a hub cache or the demo model; nothing is downloaded while planning);
otherwise the point's check is deferred to its host, right after the download stage
(module trtsweep_prompt_check).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shlex
import subprocess
import sys
from functools import cache
from pathlib import Path
from typing import Any

from trtsweep.errors import TrtsweepError
from trtsweep.sweep.paths import sweep_path

TOKENIZER_FILES = ["tokenizer*", "special_tokens_map.json", "config.json", "*.model", "*.tiktoken", "*.jinja",
                   "vocab*", "merges.txt", "added_tokens.json", "generation_config.json"]  # fmt: skip
DEMO_REPO_ID = "HuggingFaceTB/SmolLM2-135M-Instruct"


def _count_key(input_data: str, tokenizer_dir: str, chat_template: bool) -> str:
    """What decides a count: the prompts file's bytes, the tokenizer's files' (names and bytes), the template flag."""
    digest = hashlib.sha256(f"{chat_template}\n".encode())
    digest.update(Path(input_data).read_bytes())
    for name in sorted(p.name for pattern in TOKENIZER_FILES for p in Path(tokenizer_dir).glob(pattern)):
        digest.update(f"\n{name}\n".encode())
        digest.update((Path(tokenizer_dir) / name).read_bytes())
    return digest.hexdigest()


@cache
def longest_prompt(input_data: str, tokenizer_dir: str, chat_template: bool) -> tuple[int, int]:
    """(token count, line) of the longest prompt of `input_data` as llm-perf sends it.

    Counted in a child process: transformers (and torch) must not load inside an Ansible module, whose
    sys.intern patch breaks torch, nor stay loaded in the planning process. That costs seconds of CPU (transformers'
    tokenizer loads torch: 7-8 s on 2 cores, 11 s on a GPU host) on every plan, so a count is kept in the cache by
    what decides it (`_count_key`): the same prompts and tokenizer are counted once.
    """
    from trtsweep.common.fileio import atomic_write_text
    from trtsweep.common.paths import cache_dir

    kept = cache_dir() / "prompt-counts" / f"{_count_key(input_data, tokenizer_dir, chat_template)}.json"
    with contextlib.suppress(OSError, ValueError):
        tokens, line = json.loads(kept.read_text())
        return int(tokens), int(line)
    argv = [sys.executable, "-m", "trtsweep.sweep.promptcheck", input_data, tokenizer_dir, str(chat_template)]
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        lines = [line for line in done.stderr.splitlines() if line.strip()]
        raise TrtsweepError(lines[-1] if lines else f"counting the prompts of {input_data} failed")
    tokens, line = json.loads(done.stdout)
    with contextlib.suppress(OSError):  # a cache that cannot be written costs the next plan the count, no more
        kept.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(kept, json.dumps([tokens, line]))
    return tokens, line


def _count(input_data: str, tokenizer_dir: str, chat_template: bool) -> tuple[int, int]:
    from trtsweep.perf.dataset import load_jsonl
    from trtsweep.perf.tokenizer import Tokenizer

    tokenizer = Tokenizer(tokenizer_dir)
    longest = (0, 0)
    for record in load_jsonl(Path(input_data)):
        if chat_template:
            prompt = tokenizer.chat(record.as_messages())
        else:
            prompt = record.input if record.input is not None else "\n".join(m["content"] for m in record.as_messages())
        tokens = len(tokenizer.encode(prompt, special=not chat_template))
        longest = max(longest, (tokens, record.lineno))
    return longest


def check(input_data: str, tokenizer_dir: str, max_input_len: int, chat_template: bool, point: str) -> int:
    """The longest prompt's token count; a one-line error naming the file and line when it is over the limit."""
    tokens, line = longest_prompt(input_data, tokenizer_dir, chat_template)
    if tokens > max_input_len:
        raise TrtsweepError(
            f"{input_data}:{line}: the prompt is {tokens} tokens with the model's tokenizer, more than"
            f" max_input_len {max_input_len} of point {point} (shorten it, drop it, or raise lengths[].input)"
        )
    return tokens


def local_tokenizer(model: dict[str, Any]) -> str | None:
    """A directory holding the model's tokenizer on this machine, found without downloading anything."""
    from huggingface_hub import snapshot_download

    from trtsweep.common.paths import cache_dir

    trtsweep_cache = cache_dir()
    if model["repo_id"] == DEMO_REPO_ID and model.get("revision") is None:
        demo = trtsweep_cache / "models" / "SmolLM2-135M-Instruct"
        if (demo / "tokenizer_config.json").exists():
            return str(demo)
    for hub in (None, str(trtsweep_cache / "hf-hub")):
        with contextlib.suppress(Exception):  # not in this cache (any error of the hub library means: not here)
            path = snapshot_download(model["repo_id"], revision=model.get("revision"), cache_dir=hub,
                                     local_files_only=True, allow_patterns=TOKENIZER_FILES)  # fmt: skip
            if any(Path(path).glob("tokenizer*")):
                return str(path)
    return None


def deferred(model: dict[str, Any]) -> str:
    """The outcome of a point whose tokenizer is not here, with the command that puts it here (the hub cache)."""
    revision = ["--revision", str(model["revision"])] if model.get("revision") else []
    patterns = [arg for pattern in ("tokenizer*", "*.json", "*.model", "*.jinja") for arg in ("--include", pattern)]
    command = shlex.join(["hf", "download", str(model["repo_id"]), *revision, *patterns])
    return (f"deferred to the host ({model['repo_id']}'s tokenizer is not on the controller; `{command}` puts it in "
            "the hub cache, and the plan checks them here)")  # fmt: skip


def lines(outcomes: dict[str, str]) -> list[str]:
    """The plan's lines for `outcomes` (point id -> outcome): one per outcome, naming its points (the first and how
    many more), in the order they came."""
    by_outcome: dict[str, list[str]] = {}
    for point_id, outcome in outcomes.items():
        by_outcome.setdefault(outcome, []).append(point_id)
    return [f"prompt lengths of {ids[0]}{f' and {len(ids) - 1} more point(s)' if len(ids) > 1 else ''}: {outcome}"
            for outcome, ids in by_outcome.items()]  # fmt: skip


def plan_checks(points: list[dict[str, Any]], base_dir: Path) -> dict[str, str]:
    """Check every point whose tokenizer is on this machine; point id -> 'checked: ...' or 'deferred: ...'.

    Raises on the first prompt over a point's limit. Sets `prompt_check` ('checked' / 'deferred') on each point.
    """
    outcome: dict[str, str] = {}
    os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
    for point in points:
        bench = point["benchmark"]
        data = sweep_path(bench["input_data"], base_dir)
        tokenizer = local_tokenizer(point["model"])
        if tokenizer is None:
            point["prompt_check"] = "deferred"
            outcome[point["id"]] = deferred(point["model"])
            continue
        tokens = check(str(data), tokenizer, point["max_input_len"], bool(bench.get("chat_template")), point["id"])
        point["prompt_check"] = "checked"
        outcome[point["id"]] = f"checked: longest prompt {tokens} tokens <= max_input_len {point['max_input_len']}"
    return outcome


if __name__ == "__main__":
    try:
        print(json.dumps(_count(sys.argv[1], sys.argv[2], sys.argv[3] == "True")))
    except TrtsweepError as exc:
        sys.exit(f"{exc}")
