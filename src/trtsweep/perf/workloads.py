"""Workloads beyond a list of prompts: shared prefixes and trace replay (see docs/llm-perf.md, Workloads).

* Shared prefix (`--shared-prefix-count N --shared-prefix-tokens T`): N prefixes of exactly T tokens of the model's
  tokenizer; record i is sent with prefix i mod N before its own text (an `input` record: prefix, a blank line, the
  input; a `messages` record: the prefix as its system message, before a system message it has).
* Trace replay (`--trace FILE`): each row of a Mooncake trace (JSON lines `{"timestamp": ms, "input_length",
  "output_length", "hash_ids": [...]}`) or of an Azure LLM inference trace (CSV with columns TIMESTAMP,
  ContextTokens, GeneratedTokens) is one request, sent at the row's time (divided by `--replay-speed`), with a prompt
  of its input length and its output length as the budget. A Mooncake row's prompt is its hash ids' blocks in
  order, each `block_size` tokens (the last one cut to the input length): equal hash ids, equal text, so the rows
  that share leading hash ids share that prefix token for token. An Azure row's prompt is its own.

Prompt text is made of words of the tokenizer's vocabulary that are one token each with and without a leading space,
joined by spaces, so N words are N tokens (checked with the tokenizer, which refuses otherwise). A request's
`prefix_tokens` are the tokens of the prefix it shares with other requests: the shared prefix, or a Mooncake row's
leading blocks whose hash ids another row of the trace also has; the level's summary reports their share of the
input tokens (`prefix_share`).
"""

from __future__ import annotations

import csv
import json
import random
import re
from collections import Counter
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trtsweep.errors import TrtsweepError
from trtsweep.perf.dataset import Record

if TYPE_CHECKING:
    from trtsweep.perf.tokenizer import Tokenizer

FORMATS = ("auto", "mooncake", "azure")
DEFAULT_BLOCK_SIZE = 512  # Mooncake's published traces: tokens per hash id
PREFIX_SEPARATOR = "\n\n"  # between a shared prefix and an input record's own text
AZURE_COLUMNS = ("TIMESTAMP", "ContextTokens", "GeneratedTokens")
_AZURE_TIME = re.compile(r"^(\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d)(?:\.(\d{1,9}))?$")


@dataclass(frozen=True)
class TraceSpec:
    """--trace and its options: the file, its format, a Mooncake hash id's tokens, the replay speeds (levels)."""

    path: Path
    format: str = "auto"
    block_size: int = DEFAULT_BLOCK_SIZE
    speeds: tuple[float, ...] = (1.0,)

    def resolved_format(self) -> str:
        if self.format != "auto":
            return self.format
        return "azure" if self.path.suffix.lower() == ".csv" else "mooncake"


@dataclass(frozen=True)
class TraceRow:
    """One request of a trace: seconds after the trace's first request, token lengths, Mooncake's block hash ids."""

    time_s: float
    input_tokens: int
    output_tokens: int
    hash_ids: tuple[int, ...] = ()
    lineno: int = 0


class Words:
    """Text of an exact token count: words of the tokenizer's vocabulary that are one token alone and after a
    space, so `count` of them joined by spaces are `count` tokens."""

    def __init__(self, tokenizer: Tokenizer) -> None:
        self.tokenizer = tokenizer
        candidates = sorted(
            word for word in (text.strip() for text in tokenizer.token_texts())
            if word.isascii() and word.isalpha() and word.islower() and 3 <= len(word) <= 8
        )  # fmt: skip
        candidates = list(dict.fromkeys(candidates))
        alone = tokenizer.encode_batch(candidates)  # one batch each: fast tokenizers
        spaced = tokenizer.encode_batch([" " + w for w in candidates])
        self.vocab = [w for w, a, b in zip(candidates, alone, spaced, strict=True) if len(a) == len(b) == 1]
        if len(self.vocab) < 16:
            raise TrtsweepError("shared prefixes / trace prompts: the tokenizer has too few one-token words")

    def count(self, text: str) -> int:
        return self.tokenizer.count(text)

    def draw(self, rng: random.Random, count: int) -> list[str]:
        return [rng.choice(self.vocab) for _ in range(count)]

    def text(self, words: list[str]) -> str:
        """The words as text, checked to be one token each."""
        text = " ".join(words)
        if self.count(text) != len(words):
            raise TrtsweepError(
                f"the tokenizer does not split text at spaces ({len(words)} words are {self.count(text)} tokens): "
                "shared prefixes and trace prompts need one that does"
            )
        return text


def shared_prefixes(tokenizer: Tokenizer, count: int, tokens: int, seed: int) -> list[str]:
    """`count` distinct texts of exactly `tokens` tokens (each starts with its own word)."""
    words = Words(tokenizer)
    rng = random.Random(f"shared-prefix-{seed}")
    if count > len(words.vocab):
        raise TrtsweepError(f"--shared-prefix-count {count}: at most {len(words.vocab)} with this tokenizer")
    firsts = rng.sample(words.vocab, count)
    return [words.text([first, *words.draw(rng, tokens - 1)]) for first in firsts]


def with_shared_prefix(records: list[Record], tokenizer: Tokenizer, count: int, tokens: int, seed: int) -> list[Record]:
    """Each record with prefix (index mod `count`) before its own text; `prefix_tokens` set."""
    prefixes = shared_prefixes(tokenizer, count, tokens, seed)
    out = []
    for record in records:
        prefix = prefixes[record.index % count]
        if record.messages is not None:
            messages = [dict(m) for m in record.messages]
            if messages[0]["role"] == "system":
                messages[0]["content"] = prefix + PREFIX_SEPARATOR + messages[0]["content"]
            else:
                messages.insert(0, {"role": "system", "content": prefix})
            out.append(replace(record, messages=tuple(messages), prefix_tokens=tokens))
        else:
            text = prefix + PREFIX_SEPARATOR + (record.input or "")
            out.append(replace(record, input=text, prefix_tokens=tokens))
    return out


def _positive(where: str, name: str, value: Any, minimum: int = 0) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise TrtsweepError(f"{where}: '{name}' must be an integer >= {minimum}, got {value!r}")
    return value


def _mooncake(path: Path, lineno: int, line: bytes) -> TraceRow:
    where = f"{path}:{lineno}"
    try:
        obj = json.loads(line)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise TrtsweepError(f"{where}: not a JSON object of a Mooncake trace: {exc}") from exc
    if not isinstance(obj, dict):
        raise TrtsweepError(f"{where}: expected a JSON object, got {type(obj).__name__}")
    stamp = obj.get("timestamp")
    if isinstance(stamp, bool) or not isinstance(stamp, int | float) or not 0 <= stamp < float("inf"):
        raise TrtsweepError(f"{where}: 'timestamp' must be milliseconds >= 0, got {stamp!r}")
    hash_ids = obj.get("hash_ids", [])
    if not isinstance(hash_ids, list) or any(isinstance(h, bool) or not isinstance(h, int) for h in hash_ids):
        raise TrtsweepError(f"{where}: 'hash_ids' must be a list of integers, got {hash_ids!r}")
    length = _positive(where, "input_length", obj.get("input_length"), 1)
    return TraceRow(stamp / 1000.0, length, _positive(where, "output_length", obj.get("output_length"), 1),
                    tuple(hash_ids), lineno)  # fmt: skip


def _azure_time(where: str, text: str) -> float:
    """Seconds since the epoch of a TIMESTAMP cell ("2023-11-16 18:15:46.6805900", as published; or seconds)."""
    text = text.strip()
    match = _AZURE_TIME.match(text)
    if match:
        whole = datetime.fromisoformat(match.group(1).replace(" ", "T"))
        return whole.timestamp() + float(f"0.{match.group(2) or '0'}")
    try:
        return float(text)
    except ValueError:
        raise TrtsweepError(
            f"{where}: TIMESTAMP must be 'YYYY-MM-DD HH:MM:SS[.fraction]' or seconds, got {text!r}"
        ) from None


def _azure(path: Path, text: str) -> list[TraceRow]:
    reader = csv.DictReader(text.splitlines())
    missing = [c for c in AZURE_COLUMNS if c not in (reader.fieldnames or [])]
    if missing:
        raise TrtsweepError(f"{path}:1: an Azure trace needs the columns {', '.join(AZURE_COLUMNS)}; missing {missing}")
    rows = []
    for lineno, cells in enumerate(reader, 2):
        where = f"{path}:{lineno}"
        try:
            context, generated = int(cells["ContextTokens"]), int(cells["GeneratedTokens"])
        except (TypeError, ValueError):
            raise TrtsweepError(f"{where}: ContextTokens and GeneratedTokens must be integers") from None
        stamp = _azure_time(where, cells["TIMESTAMP"] or "")
        rows.append(TraceRow(stamp, _positive(where, "ContextTokens", context, 1),
                             max(1, _positive(where, "GeneratedTokens", generated)), (), lineno))  # fmt: skip
    return rows


def load_trace(spec: TraceSpec) -> list[TraceRow]:
    """The trace's rows by arrival time (stable), times relative to the first; the first bad line raises one
    TrtsweepError naming file and line."""
    path = spec.path
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise TrtsweepError(f"{path}: cannot read the trace: {exc.strerror}") from exc
    if spec.resolved_format() == "mooncake":
        rows = [_mooncake(path, n, line) for n, line in enumerate(raw.splitlines(), 1) if line.strip()]
    else:
        try:
            rows = _azure(path, raw.decode("utf-8-sig"))
        except UnicodeDecodeError as exc:
            raise TrtsweepError(f"{path}: not UTF-8 text") from exc
    if not rows:
        raise TrtsweepError(f"{path}: no requests (empty trace)")
    rows.sort(key=lambda r: r.time_s)
    start = rows[0].time_s
    return [replace(r, time_s=r.time_s - start) for r in rows]


def trace_records(rows: list[TraceRow], tokenizer: Tokenizer, block_size: int, seed: int) -> list[Record]:
    """A record per row: a prompt of the row's input tokens (Mooncake: its hash ids' blocks), its output tokens as
    the budget, and `prefix_tokens`: its leading blocks that another row shares."""
    words = Words(tokenizer)
    blocks: dict[int, list[str]] = {}
    used = Counter(h for row in rows for h in set(row.hash_ids))
    records = []
    for index, row in enumerate(rows):
        prompt: list[str] = []
        shared = 0
        leading = True
        for hash_id in row.hash_ids:
            if len(prompt) >= row.input_tokens:
                break
            if hash_id not in blocks:
                blocks[hash_id] = words.draw(random.Random(f"trace-block-{seed}-{hash_id}"), block_size)
            block = blocks[hash_id][: row.input_tokens - len(prompt)]
            prompt += block
            leading = leading and used[hash_id] > 1
            shared += len(block) if leading else 0
        if len(prompt) < row.input_tokens:  # no hash ids (Azure), or fewer blocks than the length: its own words
            prompt += words.draw(random.Random(f"trace-row-{seed}-{index}"), row.input_tokens - len(prompt))
        records.append(Record(index, " ".join(prompt), None, None, row.output_tokens, {}, row.lineno, shared))
    if records:
        words.text(records[0].input.split(" ") if records[0].input else [])  # the tokenizer splits at spaces
    return records


def trace_order(count: int, warmup: int) -> list[int]:
    """The request of each sequence number: the warm-up sends the trace's first rows, then the replay sends every
    row in trace order from the first (its sequence numbers start after the warm-up's)."""
    return [i % count for i in range(warmup)] + list(range(count))
