"""BLEU and chrF from per-request sufficient statistics: the sentence score of a request and, by summing the
statistics of a level's requests, the corpus score - without keeping any text.

The numbers equal sacrebleu's (`BLEU(effective_order=True).sentence_score`, `BLEU().corpus_score`,
`CHRF().sentence_score` / `corpus_score`; tests/unit/test_accuracy.py compares them on random texts), computed
in one pass per request: every n-gram order is counted in one `Counter` (n-grams of different orders are
different keys), which is what makes 100k requests score in seconds rather than a minute. sacrebleu's own
tokenizers (13a, zh, char, ja-mecab, ko-mecab) are used for BLEU.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable
from functools import cache
from typing import Any

BLEU_ORDER = 4
CHRF_ORDER = 6
CHRF_BETA = 2.0
LOG_ZERO = -9999999999.0  # sacrebleu's log(0)


@cache
def tokenizer(name: str) -> Callable[[str], str]:
    """sacrebleu's BLEU tokenizer by name."""
    from sacrebleu.metrics import BLEU

    return BLEU(tokenize=name).tokenizer  # type: ignore[no-any-return]


def _overlap(hyp: Counter[Any], ref: Counter[Any], orders: int) -> list[int]:
    """Clipped matches per order (index order - 1): only the n-grams both sides have are visited."""
    matched = [0] * orders
    for gram in hyp.keys() & ref.keys():
        matched[len(gram) - 1] += min(hyp[gram], ref[gram])
    return matched


def bleu_stats(pred: str, ref: str, tokenize: str) -> list[int]:
    """[hyp_len, ref_len, correct_1..4, total_1..4] of one pair (sacrebleu's segment statistics)."""
    tok = tokenizer(tokenize)
    hyp, refs = tok(pred.rstrip()).split(), tok(ref.rstrip()).split()
    grams = [tuple(hyp[i : i + n]) for n in range(1, BLEU_ORDER + 1) for i in range(len(hyp) - n + 1)]
    ref_grams = [tuple(refs[i : i + n]) for n in range(1, BLEU_ORDER + 1) for i in range(len(refs) - n + 1)]
    correct = _overlap(Counter(grams), Counter(ref_grams), BLEU_ORDER)
    total = [max(0, len(hyp) - n + 1) for n in range(1, BLEU_ORDER + 1)]
    return [len(hyp), len(refs), *correct, *total]


def bleu_score(stats: list[int], effective_order: bool) -> float:
    """BLEU in [0, 100] from summed statistics, 'exp' smoothing (sacrebleu's default)."""
    sys_len, ref_len = stats[0], stats[1]
    correct, total = stats[2 : 2 + BLEU_ORDER], stats[2 + BLEU_ORDER :]
    if not any(correct):
        return 0.0
    bp = 1.0 if sys_len >= ref_len else (math.exp(1 - ref_len / sys_len) if sys_len > 0 else 0.0)
    precisions = [0.0] * BLEU_ORDER
    smooth, order = 1.0, BLEU_ORDER
    for n in range(1, BLEU_ORDER + 1):
        if total[n - 1] == 0:
            break
        if effective_order:
            order = n
        if correct[n - 1] == 0:
            smooth *= 2
            precisions[n - 1] = 100.0 / (smooth * total[n - 1])
        else:
            precisions[n - 1] = 100.0 * correct[n - 1] / total[n - 1]
    return bp * math.exp(sum(math.log(p) if p > 0 else LOG_ZERO for p in precisions[:order]) / order)


def chrf_stats(pred: str, ref: str) -> list[int]:
    """[hyp, ref, match] per character order 1..6 (whitespace removed), sacrebleu's chrF statistics."""
    hyp, refs = "".join(pred.split()), "".join(ref.split())
    grams = Counter([hyp[i : i + n] for n in range(1, CHRF_ORDER + 1) for i in range(len(hyp) - n + 1)])
    ref_grams = Counter([refs[i : i + n] for n in range(1, CHRF_ORDER + 1) for i in range(len(refs) - n + 1)])
    matched = _overlap(grams, ref_grams, CHRF_ORDER)
    out = []
    for n in range(1, CHRF_ORDER + 1):
        n_ref = max(0, len(refs) - n + 1)
        out += [max(0, len(hyp) - n + 1) if n_ref else 0, n_ref, matched[n - 1]]
    return out


def chrf_score(stats: list[int]) -> float:
    """chrF (beta 2, effective-order averaging) in [0, 100] from summed statistics."""
    factor = CHRF_BETA**2
    avg_prec = avg_rec = 0.0
    effective = 0
    for i in range(CHRF_ORDER):
        n_hyp, n_ref, n_match = stats[3 * i : 3 * i + 3]
        if n_hyp > 0 and n_ref > 0:
            avg_prec += n_match / n_hyp
            avg_rec += n_match / n_ref
            effective += 1
    if effective:
        avg_prec, avg_rec = avg_prec / effective, avg_rec / effective
    if avg_prec + avg_rec == 0:
        return 0.0
    return 100 * (1 + factor) * avg_prec * avg_rec / (factor * avg_prec + avg_rec)


class CorpusStats:
    """The summed statistics of a level's scored requests."""

    def __init__(self) -> None:
        self.bleu = [0] * (2 + 2 * BLEU_ORDER)
        self.chrf = [0] * (3 * CHRF_ORDER)
        self.count = 0

    def add(self, bleu: list[int], chrf: list[int]) -> None:
        self.bleu = [a + b for a, b in zip(self.bleu, bleu, strict=True)]
        self.chrf = [a + b for a, b in zip(self.chrf, chrf, strict=True)]
        self.count += 1

    def scores(self) -> dict[str, float]:
        """corpus_bleu and corpus_chrf in [0, 1] (empty without a scored request)."""
        if not self.count:
            return {}
        return {"corpus_bleu": bleu_score(self.bleu, False) / 100.0, "corpus_chrf": chrf_score(self.chrf) / 100.0}
