"""Benchmark input data: the seed's jsonl format, one record per line.

Accepted record shapes (one JSON object per line; blank lines are skipped):
* ``{"input": "<prompt>", "output": "<reference answer>"}`` (``output`` optional), extra keys kept;
* ``{"messages": [{"role": ..., "content": ...}, ...], "output": ...}`` (chat records).
An optional ``max_tokens`` (int) sets that record's output length.

Synthetic prompts (`synthetic`) take their token lengths from distributions (`Lengths`: normal, lognormal, uniform,
fixed) or from a data set's real (input, reference output) pairs (`length_pairs`).
"""

from __future__ import annotations

import json
import math
import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from trtsweep.errors import TrtsweepError

if TYPE_CHECKING:
    from trtsweep.perf.tokenizer import Tokenizer


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


DEFAULT_PROMPTS = 100
LENGTH_FORMS = "normal:MEAN[,STD], lognormal:MEDIAN,SIGMA, uniform:LO,HI or fixed:N (MEAN[,STD] is normal)"


@dataclass(frozen=True)
class Lengths:
    """A distribution of token lengths: normal (`a` mean, `b` std), lognormal (`a` median, `b` sigma of the log),
    uniform (integers `a` to `b`, both included) or fixed (`a`). Each draw is rounded and at least 1."""

    kind: str
    a: float
    b: float = 0.0

    def draw(self, rng: random.Random) -> int:
        if self.kind == "normal":
            value = rng.gauss(self.a, self.b)
        elif self.kind == "lognormal":
            value = rng.lognormvariate(math.log(self.a), self.b)
        elif self.kind == "uniform":
            value = rng.randint(int(self.a), int(self.b))
        else:
            value = self.a
        return max(1, round(value))

    def __str__(self) -> str:
        numbers = [self.a] if self.kind == "fixed" else [self.a, self.b]
        return f"{self.kind}:" + ",".join(f"{v:g}" for v in numbers)


DEFAULT_OUTPUT = Lengths("normal", 128.0)  # --synthetic-output-tokens' default (128 tokens, drawn as before)

# kind -> (its numbers, whether they are integers, what they must be)
_LENGTH_KINDS = {"normal": ((1, 2), False, "MEAN>=1[,STD>=0]"), "lognormal": ((2,), False, "MEDIAN>=1,SIGMA>=0"),
                 "uniform": ((2,), True, "integers 1<=LO<=HI"), "fixed": ((1,), True, "an integer N>=1")}  # fmt: skip


def _fits(kind: str, values: list[float]) -> bool:
    """Whether `values` are the numbers a `kind` of distribution takes (_LENGTH_KINDS)."""
    counts, integers, _ = _LENGTH_KINDS[kind]
    if len(values) not in counts or not all(math.isfinite(v) for v in values) or values[0] < 1:
        return False
    if integers and not all(v.is_integer() for v in values):
        return False
    return len(values) < 2 or values[1] >= (values[0] if kind == "uniform" else 0)


def parse_lengths(text: str) -> Lengths:
    """`normal:512,64`, `512,64` (normal), `lognormal:512,0.5`, `uniform:64,1024`, `fixed:128` -> Lengths;
    ValueError saying what is expected otherwise."""
    kind, _, numbers = text.rpartition(":")
    kind = kind or "normal"
    if kind not in _LENGTH_KINDS:
        raise ValueError(f"unknown distribution {kind!r}: expected {LENGTH_FORMS}, got {text!r}")
    try:
        values = [float(v) for v in numbers.split(",")]
    except ValueError:
        values = []
    if not _fits(kind, values):
        raise ValueError(f"expected {kind} as {_LENGTH_KINDS[kind][2]}, got {text!r}")
    return Lengths(kind, *values)


def length_pairs(path: Path, count: Callable[[str], int]) -> list[tuple[int, int]]:
    """(input tokens, reference output tokens) of every record of a prompts file, counted with `count`; a record
    without an `input` text or with a missing or blank `output` raises one line naming file and line."""
    pairs = []
    for record in load_jsonl(path):
        where = f"{path}:{record.lineno}"
        if record.input is None:
            raise TrtsweepError(f"{where}: --synthetic-lengths-from needs an 'input' text (its token count is a "
                                "prompt length), this record has only 'messages'")  # fmt: skip
        if record.reference is None or not record.reference.strip():
            raise TrtsweepError(f"{where}: --synthetic-lengths-from needs a non-blank 'output' (its token count is an "
                                "output length)")  # fmt: skip
        pairs.append((count(record.input), count(record.reference)))
    return pairs


def drawn_pairs(pairs: list[tuple[int, int]], count: int, rng: random.Random) -> list[tuple[int, int]]:
    """`count` of `pairs` in a seeded order: every pair once per pass (shuffled), as many passes as it takes."""
    out: list[tuple[int, int]] = []
    while len(out) < count:
        out += rng.sample(pairs, len(pairs))
    return out[:count]


class SyntheticSpec(NamedTuple):
    """Synthetic prompts: how many (None: DEFAULT_PROMPTS, or one per record of `lengths_from`), their input and
    output token lengths (distributions), or `lengths_from`: a prompts file whose records' (input, output) token
    counts are drawn instead."""

    count: int | None
    input_tokens: Lengths | None
    output_tokens: Lengths | None
    lengths_from: Path | None = None

    def as_dict(self) -> dict[str, Any]:
        """As the exports' configuration shows it (distributions as their flags write them)."""
        text = lambda value: None if value is None else str(value)  # noqa: E731
        return {"prompts": self.count, "input_tokens": text(self.input_tokens),
                "output_tokens": text(self.output_tokens), "lengths_from": text(self.lengths_from)}  # fmt: skip

    def source(self) -> str:
        """Where the lengths came from, as the exports say (`length_source`)."""
        if self.lengths_from is not None:
            return f"file {self.lengths_from}"
        return f"input {self.input_tokens}, output {self.output_tokens}"


def _wanted(tokenizer: Tokenizer, spec: SyntheticSpec, rng: random.Random) -> Iterator[tuple[int, int]]:
    """Each prompt's (input, output) tokens: drawn from the distributions as each prompt is made (the seeded order of
    draws of token-norm-dist), or the file's pairs, drawn at once."""
    if spec.lengths_from is not None:
        pairs = length_pairs(spec.lengths_from, tokenizer.count)
        for want_in, want_out in drawn_pairs(pairs, len(pairs) if spec.count is None else spec.count, rng):
            yield max(1, want_in), want_out  # an empty input is a prompt of one token
        return
    assert spec.input_tokens is not None and spec.output_tokens is not None
    for _ in range(DEFAULT_PROMPTS if spec.count is None else spec.count):
        yield spec.input_tokens.draw(rng), spec.output_tokens.draw(rng)


def synthetic(
    tokenizer: Tokenizer,
    count: int | None,
    input_tokens: Lengths | tuple[float, float] | None,
    output_tokens: Lengths | tuple[float, float] | None,
    lengths_from: Path | None = None,
    *,
    seed: int,
) -> list[Record]:
    """Prompts whose token lengths follow distributions (a `(mean, std)` pair is a normal one, like TRT-LLM's
    `prepare_dataset.py token-norm-dist`), or are the (input, output) token counts of `lengths_from`'s records drawn
    with the seed (`SyntheticSpec`): words drawn from the tokenizer's own vocabulary, cut to the input length; each
    record's `max_tokens` the output length."""
    rng = random.Random(seed)
    vocab = sorted(
        word for word in (text.strip() for text in tokenizer.token_texts())
        if word.isascii() and word.isalpha() and 3 <= len(word) <= 10
    )  # fmt: skip
    if not vocab:
        raise TrtsweepError("synthetic prompts: the tokenizer has no plain words to draw from")
    as_lengths = lambda d: d if isinstance(d, Lengths) or d is None else Lengths("normal", *d)  # noqa: E731
    spec = SyntheticSpec(count, as_lengths(input_tokens), as_lengths(output_tokens), lengths_from)
    records = []
    for index, (want_in, want_out) in enumerate(_wanted(tokenizer, spec, rng)):
        ids = tokenizer.encode(" ".join(rng.choice(vocab) for _ in range(want_in)))
        text = tokenizer.decode(ids[:want_in])
        records.append(Record(index, text, None, None, max(1, want_out), {"synthetic_input_tokens": want_in}))
    return records
