"""Speculative drafting for the hf backend's stand-ins: the drafts TensorRT-LLM's NGram (prompt lookup: the tokens
that followed the latest n-gram's earlier occurrence) or DraftTarget (a draft model's greedy tokens) speculative
decoding would propose, verified against the tokens the stand-in decodes, so a point with `speculative_config:
{decoding_type: NGram | DraftTarget}` reports drafted and accepted tokens in its iteration stats
(specDecodingStats) as trtllm-serve does.

The stand-in decodes one token a forward pass whatever it drafts: what it reports is how many of a drafter's tokens
a greedy target would have accepted on this output, not a speed-up. A step starts with a draft of up to
`max_draft_len` tokens from the context so far (NGram: `max_matching_ngram_size` down to 1 tokens matched, the
oldest earlier occurrence when `is_use_oldest`, as NGramDecodingConfig says; DraftTarget: the draft model's greedy
continuation, the model loaded from `speculative_model` (1.2) or `speculative_model_dir` (1.0, 1.1)); each decoded
token equal to the next draft token is accepted; the first one that is not (or the one after the whole draft, the
target's own) ends the step. Drafting starts after the context pass (its token is not drafted), and a step's tokens
are streamed together when it ends, a chunk per step as trtllm-serve streams them: a client counting tokens per
chunk sees the acceptance length the stats report (trtsweep.report.acceptance compares the two).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

NGRAM_KEYS = ("decoding_type", "max_draft_len", "max_matching_ngram_size", "is_keep_all", "is_use_oldest",
              "is_public_pool")  # fmt: skip
DRAFT_MODEL_FIELDS = ("speculative_model", "speculative_model_dir")  # 1.2's name, 1.0 and 1.1's
DRAFT_TARGET_KEYS = ("decoding_type", "max_draft_len", *DRAFT_MODEL_FIELDS)
KINDS = ("NGram", "DraftTarget")


@dataclass(frozen=True)
class NGramSettings:
    max_draft_len: int
    max_matching_ngram_size: int
    is_use_oldest: bool = True


@dataclass(frozen=True)
class DraftModelSettings:
    """DraftTarget: the draft model's checkpoint directory and the tokens it drafts a step."""

    model: str
    max_draft_len: int


def _positive(name: str, value: Any) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ValueError(f"speculative_config.{name}: expected an integer >= 1, got {value!r}")
    return value


def from_config(config: Any) -> NGramSettings | DraftModelSettings | None:
    """The stand-in's drafting from an LLM API speculative_config (None without one); ValueError for anything it
    cannot stand in for."""
    if config is None:
        return None
    kind = config.get("decoding_type") if isinstance(config, Mapping) else config
    if not isinstance(config, Mapping) or kind not in KINDS:
        raise ValueError(f"speculative_config: the hf backend drafts by decoding_type {' or '.join(KINDS)} only, "
                         f"got {kind!r}")  # fmt: skip
    unknown = sorted(set(config) - set(NGRAM_KEYS if kind == "NGram" else DRAFT_TARGET_KEYS))
    if unknown:
        raise ValueError(f"speculative_config: {kind} has no field {unknown[0]!r}")
    draft_len = _positive("max_draft_len", config.get("max_draft_len"))
    if kind == "DraftTarget":
        model = next((config[f] for f in DRAFT_MODEL_FIELDS if config.get(f)), None)
        if not isinstance(model, str):
            raise ValueError(f"speculative_config: DraftTarget needs the draft model's directory "
                             f"({' or '.join(DRAFT_MODEL_FIELDS)}), got {model!r}")  # fmt: skip
        return DraftModelSettings(model, draft_len)
    oldest = config.get("is_use_oldest", True)
    if not isinstance(oldest, bool):
        raise ValueError(f"speculative_config.is_use_oldest: expected true or false, got {oldest!r}")
    return NGramSettings(draft_len, _positive("max_matching_ngram_size", config.get("max_matching_ngram_size")), oldest)


def draft(context: Sequence[int], settings: NGramSettings) -> list[int]:
    """The tokens that followed the longest (up to max_matching_ngram_size) suffix of `context` where it occurred
    before, up to max_draft_len of them; [] when no suffix occurred before."""
    tokens = list(context)
    for size in range(min(settings.max_matching_ngram_size, len(tokens) - 1), 0, -1):
        suffix = tokens[-size:]
        starts = [i for i in range(len(tokens) - size) if tokens[i : i + size] == suffix]
        if starts:
            start = (starts[0] if settings.is_use_oldest else starts[-1]) + size
            return tokens[start : start + settings.max_draft_len]
    return []


class DraftSteps:
    """One request's speculative steps over its decoded tokens: `feed` each token with the context before it; the
    specDecodingStats of the forward pass that decoded it (a step's counts on the pass that ends it). `propose`
    drafts from a context (`draft` with NGram settings, a draft model's greedy tokens)."""

    def __init__(self, propose: Callable[[Sequence[int]], list[int]]) -> None:
        self.propose = propose
        self.proposed: list[int] | None = None  # the current step's draft (None: no step open)
        self.accepted = 0

    @property
    def open(self) -> bool:
        """Whether a step is open: its accepted tokens wait for the token that ends it."""
        return self.proposed is not None

    def feed(self, context: Sequence[int], token: int) -> dict[str, float]:
        if self.proposed is None:
            self.proposed, self.accepted = self.propose(context), 0
        if self.accepted < len(self.proposed) and token == self.proposed[self.accepted]:
            self.accepted += 1
            return stats(0, 0, 0)
        return self.close()

    def close(self) -> dict[str, float]:
        """Ends the open step (also when the generation ends inside it): its counts."""
        proposed, accepted = self.proposed or [], self.accepted
        self.proposed, self.accepted = None, 0
        return stats(len(proposed), accepted, 1 if proposed else 0)


def add(one: dict[str, float], other: dict[str, float]) -> dict[str, float]:
    """Two steps' counts reported by one forward pass."""
    keys = ("numDraftTokens", "numAcceptedTokens", "numRequestsWithDraftTokens")
    return stats(*(int(one[k] + other[k]) for k in keys))


def stats(drafted: int, accepted: int, requests: int) -> dict[str, float]:
    """specDecodingStats in the executor's JSON names (cpp/tensorrt_llm/executor/jsonSerialization.cpp)."""
    return {"numDraftTokens": drafted, "numAcceptedTokens": accepted, "numRequestsWithDraftTokens": requests,
            "acceptanceLength": (accepted + requests) / requests if requests else 0.0, "iterLatencyMS": 0.0,
            "draftOverhead": 0.0}  # fmt: skip
