"""A speculative point's acceptance as the client measures it (llm-perf's tokens per streamed chunk after the first,
trtsweep.perf.metrics) beside the server's iteration stats, and what the two say together
(trtsweep.report.acceptance)."""

from __future__ import annotations

import pytest

from trtsweep.perf.metrics import LevelStats, request_metrics
from trtsweep.perf.protocols.base import RequestResult
from trtsweep.report import acceptance


def streamed(chunks: list[str], tokens: int | None) -> RequestResult:
    result = RequestResult(0, 0, False)
    result.sent_ns, result.end_ns = 1_000, 1_000 + 10_000_000 * (len(chunks) + 1)
    result.chunk_ns = [1_000 + 10_000_000 * (i + 1) for i in range(len(chunks))]
    result.chunk_text = chunks
    result.server_output_tokens = tokens
    return result


def test_the_client_counts_tokens_a_step_and_accepted_tokens_from_its_chunks():
    # 1 token in the context pass's chunk, then 3 steps of 3, 2 and 4 tokens: 9 / 3 = 3.0 tokens a step
    m = request_metrics(streamed(["a", "bcd", "ef", "ghij"], 10), "p", None, None)
    assert m.tokens_per_chunk == pytest.approx(3.0) and m.accepted_tokens == 6  # 10 tokens, 4 chunks
    assert request_metrics(streamed(["a", "b", "", "c"], 3), "p", None, None).tokens_per_chunk == pytest.approx(1.0)
    # the count from the chunks themselves (no tokenizer, no server count) measures nothing: none
    assert request_metrics(streamed(["a", "bc", "d"], None), "p", None, None).tokens_per_chunk is None
    assert request_metrics(streamed(["abc"], 3), "p", None, None).tokens_per_chunk is None  # one chunk: no step
    stats = LevelStats()
    for chunks, tokens in ((["a", "bcd", "ef", "ghij"], 10), (["a", "bc"], 3)):
        result = streamed(chunks, tokens)
        stats.add(result, request_metrics(result, "p", None, None))
    assert stats.summary()["tokens_per_chunk"]["mean"] == pytest.approx(2.5)
    assert stats.summary()["accepted_tokens"] == 6 + 1


NGRAM = {"llm_api_release": "1.1", "llm_api": {"speculative_config": {"decoding_type": "NGram"}}}
EAGLE = {"llm_api_release": "1.1", "llm_api": {"speculative_config": {"decoding_type": "Eagle"}}}


@pytest.mark.parametrize(
    ("point", "row", "said"),
    [
        ({"llm_api": {}}, {"tokens_per_chunk": 1.0}, None),
        (EAGLE, {"tokens_per_chunk": 2.31, "accepted_tokens": 400, "server_accepted_tokens": None},
         "server reports none for Eagle at 1.1 (NGram only before PR 9855): client 2.31 tokens a step"),
        ({**EAGLE, "llm_api_release": "1.2"}, {"accepted_tokens": 400, "server_accepted_tokens": None}, "client only"),
        (NGRAM, {"accepted_tokens": 412, "server_accepted_tokens": 250},
         "client 412 vs server 250 accepted tokens (differ by more than 25%)"),
        (NGRAM, {"accepted_tokens": 260, "server_accepted_tokens": 250}, "agree"),
        (NGRAM, {"accepted_tokens": 0, "server_accepted_tokens": 0}, "agree"),
        (NGRAM, {"accepted_tokens": None, "server_accepted_tokens": 250}, "server only"),
        (EAGLE, {"tokens_per_chunk": None, "accepted_tokens": None, "server_accepted_tokens": None},
         "server reports none for Eagle at 1.1 (NGram only before PR 9855): no client measure (not streamed)"),
    ],
)  # fmt: skip
def test_the_check_says_what_the_server_and_the_client_counted_together(point, row, said):
    assert acceptance.check(point, row) == said


def test_the_server_columns_say_what_they_cover_where_it_is_not_every_request():
    from trtsweep.report.results_table import metrics_scope

    assert metrics_scope({"tp": 4, "attention_dp": True, "server": "trtllm-serve"}) == (
        "rank 0 of 4 (attention DP): about 1/4 of the requests")  # fmt: skip
    shaped = {"tp": 1, "disaggregated": {"context": {"instances": 1}, "generation": {"instances": 2}}}
    assert metrics_scope(shaped).startswith("generation0 of 2 generation worker(s), no context worker")
    assert metrics_scope({"tp": 4, "attention_dp": False, "server": "trtllm-serve"}) is None
