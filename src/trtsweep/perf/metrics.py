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
* ``goodput``: requests that succeeded and met every SLO (``--slo ttft=500ms,tpot=50ms,e2e=2s``; open-loop
  levels judge latencies from the schedule) / window; ``good_fraction`` = those / all measured requests.
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from trtsweep.perf.accuracy import Scorer, corpus_scores, mean_scores, score, usable_reference
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
    # accuracy: "scored", "no_reference" or "empty_reference"; the user scorer's failure; (prediction, reference)
    reference_state: str = "no_reference"
    scorer_error: str | None = None
    scored_texts: tuple[str, str] | None = None

    def latency(self, name: str) -> float | None:
        """ttft / tpot / e2e for SLO checks: from the schedule when the request had one."""
        if name == "ttft":
            return self.ttft_sched if self.ttft_sched is not None else self.ttft
        if name == "e2e":
            return self.e2e_sched if self.e2e_sched is not None else self.e2e
        return self.tpot


def request_metrics(
    result: RequestResult, prompt: str, reference: str | None, count: TokenCount | None, scorer: Scorer | None = None
) -> RequestMetrics:
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
    scores, scorer_error = score(text, reference, scorer) if usable_reference(reference) else (None, None)
    out = RequestMetrics(ttft, e2e, tpot, icl, in_tokens, out_tokens, scores)
    if reference is not None:
        out.reference_state = "scored" if scores is not None else "empty_reference"
    out.scorer_error = scorer_error
    if scores is not None and reference is not None:
        out.scored_texts = (text, reference)
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
LAG_WARNING_S = 0.010


def _abandoned(result: RequestResult) -> str | None:
    """Why llm-perf gave up on a request: stall (no chunk for --stall-timeout), timeout (--request-timeout) or
    cancelled (the level's end or an interrupt); None for a request that ended by itself."""
    if result.error_class == "cancelled":
        return "cancelled"
    if result.error_class == "timeout":
        return "stall" if "--stall-timeout" in (result.error or "") else "timeout"
    return None


def level_summary(
    results: Sequence[RequestResult], metrics: Sequence[RequestMetrics], slo: dict[str, float] | None = None
) -> dict[str, Any]:
    """Summary of one level's measured (non-warm-up) requests; latencies in milliseconds."""
    pairs = [(r, m) for r, m in zip(results, metrics, strict=True) if not r.warmup]
    good = [(r, m) for r, m in pairs if r.ok]
    errors = Counter(r.error_class for r, _ in pairs if not r.ok)
    out: dict[str, Any] = {
        "requests": len(pairs),
        "succeeded": len(good),
        "failed": len(pairs) - len(good),
        "errors": dict(errors),
        # requests llm-perf gave up on, by cause; each was cancelled on the wire (gRPC cancel, closed connection)
        "abandoned": dict(Counter(_abandoned(r) for r, _ in pairs if _abandoned(r))),
    }
    if not good:
        return out
    window = (max(r.end_ns for r, _ in good) - min(r.sent_ns for r, _ in pairs if r.sent_ns)) * NS
    out["window_s"] = window
    out["request_throughput"] = len(good) / window if window > 0 else None
    in_tokens = [m.input_tokens for _, m in good if m.input_tokens is not None]
    out_tokens = [m.output_tokens for _, m in good if m.output_tokens is not None]
    # a count is known only when every successful request has one: a partial sum (or 0 without a
    # tokenizer) would pass for a measured number; unknown is None (null / "-"), never 0
    known_in = len(in_tokens) == len(good)
    if out_tokens and window > 0:
        out["output_tokens_total"] = sum(out_tokens)
        out["output_token_throughput"] = sum(out_tokens) / window
    out["input_tokens_total"] = sum(in_tokens) if known_in else None
    out["input_token_throughput"] = sum(in_tokens) / window if known_in and window > 0 else None
    out["ttft_ms"] = _summary([m.ttft for _, m in good if m.ttft is not None])
    out["e2e_ms"] = _summary([m.e2e for _, m in good if m.e2e is not None])
    out["tpot_ms"] = _summary([m.tpot for _, m in good if m.tpot is not None])
    out["icl_ms"] = _summary([gap for _, m in good for gap in m.icl])
    out["output_tokens"] = _summary([float(n) for n in out_tokens], scale=1.0)
    checked = [m for _, m in good if m.retokenized_output_tokens is not None]
    if checked:
        out["token_count_source"] = "server"
        out["token_count_mismatch_rate"] = sum(m.retokenized_output_tokens != m.output_tokens for m in checked) / len(
            checked
        )
    lags = [m.lag for _, m in good if m.lag is not None]
    if lags:
        out["ttft_from_schedule_ms"] = _summary([m.ttft_sched for _, m in good if m.ttft_sched is not None])
        out["e2e_from_schedule_ms"] = _summary([m.e2e_sched for _, m in good if m.e2e_sched is not None])
        out["schedule_lag_ms"] = _summary(lags)
        worst = max(lags)
        if worst > LAG_WARNING_S:
            out.setdefault("warnings", []).append(
                f"sending fell behind the schedule by up to {worst * 1e3:.1f} ms (client or --max-concurrency "
                "saturated); use the *_from_schedule latencies"
            )
    if slo:
        ok = [m for _, m in good if all((v := m.latency(k)) is not None and v <= limit for k, limit in slo.items())]
        out["slo"] = {k: v * 1e3 for k, v in slo.items()}
        out["goodput"] = len(ok) / window if window > 0 else None
        out["good_fraction"] = len(ok) / len(pairs)
    scored = [m.scores for _, m in good if m.scores is not None]
    # records without a usable reference are left out of accuracy and said so; scorer failures are counted
    out["accuracy_records"] = {
        **{state: sum(m.reference_state == state for _, m in good) for state in REFERENCE_STATES},
        "scorer_failed": sum(m.scorer_error is not None for _, m in good),
    }
    if scored:
        out["accuracy"] = mean_scores(scored)
        out["accuracy_n"] = len(scored)
        pairs_scored = [m.scored_texts for _, m in good if m.scored_texts is not None]
        out["accuracy"].update(corpus_scores([p for p, _ in pairs_scored], [r for _, r in pairs_scored]))
    return out
