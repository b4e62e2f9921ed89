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


def test_tokens_per_chunk_is_the_tokens_each_step_after_the_first_delivered():
    # 1 token in the context pass's chunk, then 3 steps of 3, 2 and 4 tokens: 9 / 3 = 3.0 tokens a step
    m = request_metrics(streamed(["a", "bcd", "ef", "ghij"], 10), "p", None, None)
    assert m.tokens_per_chunk == pytest.approx(3.0)
    assert request_metrics(streamed(["a", "b", "", "c"], 3), "p", None, None).tokens_per_chunk == pytest.approx(1.0)
    # the count from the chunks themselves (no tokenizer, no server count) measures nothing: none
    assert request_metrics(streamed(["a", "bc", "d"], None), "p", None, None).tokens_per_chunk is None
    assert request_metrics(streamed(["abc"], 3), "p", None, None).tokens_per_chunk is None  # one chunk: no step
    stats = LevelStats()
    for chunks, tokens in ((["a", "bcd", "ef", "ghij"], 10), (["a", "bc"], 3)):
        result = streamed(chunks, tokens)
        stats.add(result, request_metrics(result, "p", None, None))
    assert stats.summary()["tokens_per_chunk"]["mean"] == pytest.approx(2.5)


NGRAM = {"llm_api_release": "1.1", "llm_api": {"speculative_config": {"decoding_type": "NGram"}}}
EAGLE = {"llm_api_release": "1.1", "llm_api": {"speculative_config": {"decoding_type": "Eagle"}}}


@pytest.mark.parametrize(
    ("point", "row", "said"),
    [
        ({"llm_api": {}}, {"tokens_per_chunk": 1.0}, None),
        (EAGLE, {"tokens_per_chunk": 2.31, "acceptance_length": None},
         "server reports none for Eagle at 1.1 (NGram only before PR 9855): client 2.31"),
        ({**EAGLE, "llm_api_release": "1.2"}, {"tokens_per_chunk": 2.31, "acceptance_length": None}, "client only"),
        (NGRAM, {"tokens_per_chunk": 2.31, "acceptance_length": 1.62},
         "client 2.31 vs server 1.62 (differ by more than 25%)"),
        (NGRAM, {"tokens_per_chunk": 1.7, "acceptance_length": 1.62}, "agree"),
        (NGRAM, {"tokens_per_chunk": None, "acceptance_length": 1.62}, "server only"),
        (EAGLE, {"tokens_per_chunk": None, "acceptance_length": None},
         "server reports none for Eagle at 1.1 (NGram only before PR 9855): no client measure (not streamed)"),
    ],
)  # fmt: skip
def test_the_check_says_what_the_server_and_the_client_measured_together(point, row, said):
    assert acceptance.check(point, row) == said
