"""Where every number of llm-perf is defined.

Per request (successful, not warm-up):
* ``ttft``  time to first token: first response chunk carrying text - request sent.
* ``e2e``   end-to-end latency: final response - request sent.
* ``icl``   inter-chunk latency: every gap between consecutive text-carrying chunks, pooled over requests
            (what vLLM and SGLang call "ITL").
* ``tpot``  time per output token: (e2e - ttft) / (output_tokens - 1), one value per request with at least
            two output tokens (what AIPerf, GenAI-Perf and trtllm-bench call "ITL").
* ``output_tokens`` / ``input_tokens``: exact counts when the server reports them (OpenAI ``usage``; output
            tokens also from the ``num_output_tokens`` output of trtsweep's Triton ensembles), else
            the generated text and the prompt as sent, re-tokenized with the model's tokenizer (no special
            tokens added), i.e. what the ensemble's preprocessing counts. With server counts the level
            reports ``token_count_mismatch_rate``: the share of requests whose re-tokenized output differs.
            Without a tokenizer, output tokens are the number of streamed text chunks (input tokens unknown).

Open loop (request-rate levels) adds, per request, the same latencies measured from the *scheduled* send
time (``ttft_from_schedule``, ``e2e_from_schedule``) and the ``schedule_lag`` (actual - scheduled send).

Per level, over the benchmark window = first measured request sent -> last measured response received:
* ``request_throughput`` successful requests / window;
* ``output_token_throughput`` and ``input_token_throughput``, each a sum over successful requests / window.
* ``accuracy``: the mean of every score in `trtsweep.perf.accuracy.score` over requests with a usable
  reference, plus ``corpus_bleu`` / ``corpus_chrf`` of those requests; ``accuracy_records`` counts the
  successful requests by reference state (scored, no_reference, empty_reference) and scorer failures.
* ``tokens_per_chunk``: per streamed request, (output tokens - 1) / (text chunks - 1): the tokens each decoding
  step after the first delivered, as the client sees them. A server that streams a chunk per step (trtllm-serve,
  Triton's tensorrt_llm) gives 1.0 without speculative decoding and the acceptance length with it (tokens a
  drafted request gains a step), measured beside the server's own iteration stats; a server that merges steps into
  a chunk shows more than 1.0 on its baseline too. Only where the output count is known (the server's or the
  tokenizer's), never from the chunks themselves. ``accepted_tokens``: the level's sum over those requests of output
  tokens less chunks, the drafted tokens the server accepted as the client counts them (each step delivers its
  accepted tokens and one of its own; a step that drafted nothing delivers one): the number the server's iteration
  stats count too (trtsweep.report.acceptance compares them).
* ``goodput``: requests that succeeded and met every SLO (``--slo ttft=500ms,tpot=50ms,e2e=2s``; open-loop
  levels judge latencies from the schedule) / window; ``good_fraction`` = those / all measured requests.
"""

from __future__ import annotations

import itertools
from array import array
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from trtsweep.perf.accuracy import Scored, Scorer, score, usable_reference
from trtsweep.perf.bleu_chrf import CorpusStats
from trtsweep.perf.protocols.base import RequestResult
from trtsweep.perf.stats import summarize

NS = 1e-9
TokenCount = Callable[[str], int]
REFERENCE_STATES = ("scored", "no_reference", "empty_reference")


@dataclass
class RequestMetrics:
    """Derived numbers of one request (seconds, tokens)."""

    ttft: float | None
    e2e: float | None
    tpot: float | None
    icl: list[float]
    input_tokens: int | None
    output_tokens: int | None
    scores: dict[str, float] | None
    ttft_sched: float | None = None
    e2e_sched: float | None = None
    lag: float | None = None
    retokenized_output_tokens: int | None = None  # set when the server also reported a count
    # accuracy: "scored", "no_reference" or "empty_reference"; the user scorer's failure; BLEU and chrF
    # statistics (summed over the level for its corpus scores)
    reference_state: str = "no_reference"
    scorer_error: str | None = None
    corpus: tuple[list[int], list[int]] | None = None
    tokens_per_chunk: float | None = None  # a streamed request's tokens per decoding step after the first
    accepted_tokens: int | None = None  # its output tokens less its chunks: drafted tokens accepted

    def latency(self, name: str) -> float | None:
        """ttft / tpot / e2e for SLO checks: from the schedule when the request had one."""
        if name == "ttft":
            return self.ttft_sched if self.ttft_sched is not None else self.ttft
        if name == "e2e":
            return self.e2e_sched if self.e2e_sched is not None else self.e2e
        return self.tpot


def request_metrics(
    result: RequestResult,
    prompt: str,
    reference: str | None,
    count: TokenCount | None,
    scorer: Scorer | None = None,
    scored: Scored | None = None,
) -> RequestMetrics:
    """The request's numbers; its scores are `scored` when the caller scored it already (in parallel), else
    computed here."""
    if not result.ok:
        return RequestMetrics(None, None, None, [], None, None, None)
    text = result.text
    stamps = [t for t, chunk in zip(result.chunk_ns, result.chunk_text, strict=True) if chunk]
    ttft = (stamps[0] - result.sent_ns) * NS if stamps else None
    e2e = (result.end_ns - result.sent_ns) * NS
    icl = [(b - a) * NS for a, b in itertools.pairwise(stamps)]
    retokenized = count(text) if count is not None else None
    if result.server_output_tokens is not None:
        out_tokens: int | None = result.server_output_tokens
    elif retokenized is not None:
        out_tokens = retokenized
    else:  # no tokenizer: a streamed chunk counts as one token (what a TRT-LLM/Triton stream sends)
        out_tokens = len(stamps) if len(stamps) > 1 else None
    in_tokens = (
        result.server_input_tokens if result.server_input_tokens is not None else (count(prompt) if count else None)
    )
    tpot = None
    if ttft is not None and out_tokens is not None and out_tokens > 1:
        tpot = (e2e - ttft) / (out_tokens - 1)
    out = RequestMetrics(ttft, e2e, tpot, icl, in_tokens, out_tokens, None)
    counted = result.server_output_tokens is not None or retokenized is not None
    if counted and out_tokens is not None and len(stamps) > 1:
        out.tokens_per_chunk = (out_tokens - 1) / (len(stamps) - 1)
        out.accepted_tokens = out_tokens - len(stamps)
    if reference is not None and usable_reference(reference):
        scored = scored or score(text, reference, scorer)
        out.scores, out.scorer_error, out.corpus = scored.scores, scored.error, (scored.bleu, scored.chrf)
        out.reference_state = "scored"
    elif reference is not None:
        out.reference_state = "empty_reference"
    if result.server_output_tokens is not None and retokenized is not None:
        out.retokenized_output_tokens = retokenized
    if result.scheduled_ns:
        out.ttft_sched = (stamps[0] - result.scheduled_ns) * NS if stamps else None
        out.e2e_sched = (result.end_ns - result.scheduled_ns) * NS
        out.lag = (result.sent_ns - result.scheduled_ns) * NS
    return out


def _summary(values: Sequence[float], scale: float = 1000.0) -> dict[str, Any] | None:
    summary = summarize(values)
    return summary.as_dict(scale=scale) if summary is not None else None


SLO_KEYS = ("ttft", "tpot", "e2e")
SAMPLES = ("ttft", "e2e", "tpot", "icl", "output_tokens", "ttft_sched", "e2e_sched", "lag", "tokens_per_chunk")
LAG_WARNING_S = 0.010


def _abandoned(result: RequestResult) -> str | None:
    """Why llm-perf gave up on a request: stall (no chunk for --stall-timeout), timeout (--request-timeout) or
    cancelled (the level's end or an interrupt); None for a request that ended by itself."""
    if result.error_class == "cancelled":
        return "cancelled"
    if result.error_class == "timeout":
        return "stall" if "--stall-timeout" in (result.error or "") else "timeout"
    return None


class LevelStats:
    """What a level's summary needs, accumulated one request at a time in compact arrays (8 bytes per latency
    sample, counters otherwise): memory grows with the samples only, never with texts or per-request objects,
    and the percentiles stay exact. Warm-up requests are ignored."""

    def __init__(self, slo: dict[str, float] | None = None) -> None:
        self.slo = slo or {}
        self.requests = self.succeeded = self.good = 0
        self.errors: Counter[str] = Counter()
        self.abandoned: Counter[str] = Counter()
        self.first_sent: int | None = None
        self.last_end = 0
        self.in_sum = self.in_known = self.out_sum = self.accepted = 0
        self.samples = {name: array("d") for name in SAMPLES}
        self.checked = self.mismatched = 0
        self.references: Counter[str] = Counter()
        self.scorer_failed = 0
        self.score_sums: dict[str, float] = {}
        self.score_counts: Counter[str] = Counter()
        self.corpus = CorpusStats()

    def add(self, result: RequestResult, m: RequestMetrics) -> None:
        if result.warmup:
            return
        self.requests += 1
        if result.sent_ns and (self.first_sent is None or result.sent_ns < self.first_sent):
            self.first_sent = result.sent_ns
        if not result.ok:
            self.errors[str(result.error_class)] += 1
            if (cause := _abandoned(result)) is not None:
                self.abandoned[cause] += 1
            return
        self.succeeded += 1
        self.last_end = max(self.last_end, result.end_ns)
        if m.input_tokens is not None:
            self.in_sum += m.input_tokens
            self.in_known += 1
        if m.output_tokens is not None:
            self.out_sum += m.output_tokens
            self.samples["output_tokens"].append(m.output_tokens)
        for name in ("ttft", "e2e", "tpot", "ttft_sched", "e2e_sched", "lag", "tokens_per_chunk"):
            if (value := getattr(m, name)) is not None:
                self.samples[name].append(value)
        self.samples["icl"].extend(m.icl)
        self.accepted += m.accepted_tokens or 0
        if m.retokenized_output_tokens is not None:
            self.checked += 1
            self.mismatched += m.retokenized_output_tokens != m.output_tokens
        if self.slo and all((v := m.latency(k)) is not None and v <= limit for k, limit in self.slo.items()):
            self.good += 1
        self.references[m.reference_state] += 1
        self.scorer_failed += m.scorer_error is not None
        if m.scores is not None:
            for key, value in m.scores.items():
                self.score_sums[key] = self.score_sums.get(key, 0.0) + value
                self.score_counts[key] += 1
        if m.corpus is not None:
            self.corpus.add(*m.corpus)

    def summary(self) -> dict[str, Any]:
        """The level's summary; latencies in milliseconds."""
        out: dict[str, Any] = {
            "requests": self.requests,
            "succeeded": self.succeeded,
            "failed": self.requests - self.succeeded,
            "errors": dict(self.errors),
            # requests llm-perf gave up on, by cause; each was cancelled on the wire (gRPC cancel, closed connection)
            "abandoned": dict(self.abandoned),
        }
        if not self.succeeded:
            return out
        window = (self.last_end - (self.first_sent or 0)) * NS
        out["window_s"] = window
        out["request_throughput"] = self.succeeded / window if window > 0 else None
        # a count is known only when every successful request has one: a partial sum (or 0 without a
        # tokenizer) would pass for a measured number; unknown is None (null / "-"), never 0
        known_in = self.in_known == self.succeeded
        if self.samples["output_tokens"] and window > 0:
            out["output_tokens_total"] = self.out_sum
            out["output_token_throughput"] = self.out_sum / window
        out["input_tokens_total"] = self.in_sum if known_in else None
        out["input_token_throughput"] = self.in_sum / window if known_in and window > 0 else None
        for name in ("ttft", "e2e", "tpot", "icl"):
            out[f"{name}_ms"] = _summary(self.samples[name])
        out["output_tokens"] = _summary(self.samples["output_tokens"], scale=1.0)
        if self.samples["tokens_per_chunk"]:
            out["tokens_per_chunk"] = _summary(self.samples["tokens_per_chunk"], scale=1.0)
            out["accepted_tokens"] = self.accepted
        if self.checked:
            out["token_count_source"] = "server"
            out["token_count_mismatch_rate"] = self.mismatched / self.checked
        lags = self.samples["lag"]
        if lags:
            out["ttft_from_schedule_ms"] = _summary(self.samples["ttft_sched"])
            out["e2e_from_schedule_ms"] = _summary(self.samples["e2e_sched"])
            out["schedule_lag_ms"] = _summary(lags)
            worst = max(lags)
            if worst > LAG_WARNING_S:
                out.setdefault("warnings", []).append(
                    f"sending fell behind the schedule by up to {worst * 1e3:.1f} ms (client or --max-concurrency "
                    "saturated); use the *_from_schedule latencies"
                )
        if self.slo:
            out["slo"] = {k: v * 1e3 for k, v in self.slo.items()}
            out["goodput"] = self.good / window if window > 0 else None
            out["good_fraction"] = self.good / self.requests
        # records without a usable reference are left out of accuracy and said so; scorer failures are counted
        out["accuracy_records"] = {
            **{state: self.references[state] for state in REFERENCE_STATES},
            "scorer_failed": self.scorer_failed,
        }
        if self.score_counts:
            out["accuracy"] = {key: self.score_sums[key] / self.score_counts[key] for key in self.score_sums}
            out["accuracy_n"] = self.references["scored"]
            out["accuracy"].update(self.corpus.scores())
        return out
