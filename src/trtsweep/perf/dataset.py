"""Benchmark input data: the seed's jsonl format, one record per line.

Accepted record shapes (one JSON object per line; blank lines are skipped):
* ``{"input": "<prompt>", "output": "<reference answer>"}`` (``output`` optional), extra keys kept;
* ``{"messages": [{"role": ..., "content": ...}, ...], "output": ...}`` (chat records).
An optional ``max_tokens`` (int) sets that record's output length.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trtsweep.errors import TrtsweepError


@dataclass(frozen=True)
class Record:
    """One prompt of the data set."""

    index: int
    input: str | None
    messages: tuple[dict[str, str], ...] | None
    reference: str | None
    max_tokens: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    lineno: int = 0  # line of the input file (0: synthetic)
    prefix_tokens: int = 0  # tokens of a prefix shared with other records (trtsweep.perf.workloads)

    def as_messages(self) -> list[dict[str, str]]:
        if self.messages is not None:
            return [dict(m) for m in self.messages]
        return [{"role": "user", "content": self.input or ""}]


def _record(path: Path, lineno: int, index: int, obj: object) -> Record:
    where = f"{path}:{lineno}"
    if not isinstance(obj, dict):
        raise TrtsweepError(f"{where}: expected a JSON object, got {type(obj).__name__}")
    text, messages = obj.get("input"), obj.get("messages")
    if text is None and messages is None:
        raise TrtsweepError(f"{where}: record has neither 'input' nor 'messages'")
    if text is not None and not isinstance(text, str):
        raise TrtsweepError(f"{where}: 'input' must be a string, got {type(text).__name__}")
    if messages is not None:
        ok = (
            isinstance(messages, list)
            and messages
            and all(
                isinstance(m, dict) and isinstance(m.get("role"), str) and isinstance(m.get("content"), str)
                for m in messages
            )
        )
        if not ok:
            raise TrtsweepError(f"{where}: 'messages' must be a non-empty list of {{role, content}} strings")
        messages = tuple(messages)
    reference = obj.get("output")
    if reference is not None and not isinstance(reference, str):
        raise TrtsweepError(f"{where}: 'output' must be a string, got {type(reference).__name__}")
    max_tokens = obj.get("max_tokens")
    if max_tokens is not None and (not isinstance(max_tokens, int) or max_tokens < 1):
        raise TrtsweepError(f"{where}: 'max_tokens' must be a positive integer, got {max_tokens!r}")
    known = {"input", "messages", "output", "max_tokens"}
    extra = {k: v for k, v in obj.items() if k not in known}
    return Record(index, text, messages, reference, max_tokens, extra, lineno)


def json_lines(path: Path, what: str) -> Iterator[tuple[int, Any]]:
    """(line number, value) of every non-blank line of a JSON-lines file; a line that is not JSON text raises one
    TrtsweepError naming file and line, an unreadable file one naming `what` it holds."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise TrtsweepError(f"{path}: cannot read {what}: {exc.strerror}") from exc
    for lineno, line in enumerate(raw.splitlines(), 1):
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except UnicodeDecodeError as exc:
            raise TrtsweepError(f"{path}:{lineno}: not UTF-8 text") from exc
        except json.JSONDecodeError as exc:
            raise TrtsweepError(f"{path}:{lineno}: invalid JSON: {exc.msg} at column {exc.colno}") from exc
        yield lineno, value


def load_jsonl(path: Path) -> list[Record]:
    """Read every record; the first bad line raises TrtsweepError naming file, line and problem."""
    records: list[Record] = []
    for lineno, obj in json_lines(path, "input data"):
        records.append(_record(path, lineno, len(records), obj))
    if not records:
        raise TrtsweepError(f"{path}: no records (empty file)")
    return records


def synthetic(
    tokenizer: Any, count: int, input_tokens: tuple[float, float], output_tokens: tuple[float, float], seed: int
) -> list[Record]:
    """`count` prompts whose token lengths follow normal distributions (mean, std), like TRT-LLM's
    `prepare_dataset.py token-norm-dist`: words drawn from the tokenizer's own vocabulary, cut to the sampled
    number of tokens; each record's `max_tokens` drawn from the output distribution (at least 1)."""
    rng = random.Random(seed)
    vocab = sorted(
        word for word in (tokenizer.convert_tokens_to_string([t]).strip() for t in tokenizer.get_vocab())
        if word.isascii() and word.isalpha() and 3 <= len(word) <= 10
    )  # fmt: skip
    if not vocab:
        raise TrtsweepError("synthetic prompts: the tokenizer has no plain words to draw from")
    records = []
    for index in range(count):
        want_in = max(1, round(rng.gauss(*input_tokens)))
        want_out = max(1, round(rng.gauss(*output_tokens)))
        ids = tokenizer.encode(" ".join(rng.choice(vocab) for _ in range(want_in)), add_special_tokens=False)
        text = tokenizer.decode(ids[:want_in])
        records.append(Record(index, text, None, None, want_out, {"synthetic_input_tokens": want_in}))
    return records
