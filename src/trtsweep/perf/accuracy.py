"""Accuracy of a generated text against the record's reference output; every score is in [0, 1].

* ``exact``    1 when the texts are equal after normalization (Unicode NFKC, case-folded, whitespace
               collapsed and stripped), else 0.
* ``contains`` 1 when the normalized reference occurs inside the normalized prediction.
* ``rouge1``, ``rouge2`` F1 of clipped n-gram overlap; ``rougeL`` F1 from the longest common subsequence.
               Tokens: every CJK ideograph, kana or hangul syllable is one token; other text is split
               into lower-case alphanumeric words, punctuation dropped ("订单号是A123" -> 订 单 号 是 a123).
* ``bleu``     sacrebleu sentence BLEU (effective order), tokenizer "zh" when the reference has CJK text,
               else "13a"; divided by 100.
* ``chrf``     sacrebleu sentence chrF, divided by 100.
A user scorer is given as "module:function" taking (prediction, reference) and returning a float or a
dict of floats.
"""

from __future__ import annotations

import importlib
import re
import unicodedata
from collections import Counter
from collections.abc import Callable, Iterable

from trtsweep.errors import TrtsweepError

CJK = (
    "\u3040-\u309f\u30a0-\u30fa\u30fc-\u30ff"  # hiragana, katakana (not the middle dot U+30FB)
    "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"  # CJK ideographs (ext A, unified, compatibility)
    "\U00020000-\U0003134f"  # CJK ideographs ext B-G
    "\uac00-\ud7af"  # hangul syllables
)
TOKEN = re.compile(rf"[{CJK}]|[^\W_{CJK}]+")
HAS_CJK = re.compile(rf"[{CJK}]")
Scorer = Callable[[str, str], "float | dict[str, float]"]


class ScorerError(TrtsweepError, ValueError):
    """A user scorer spec that cannot be loaded (a ValueError, shown to users as a one-line error)."""


def normalize(text: str) -> str:
    return " ".join(unicodedata.normalize("NFKC", text).casefold().split())


def tokens(text: str) -> list[str]:
    return TOKEN.findall(unicodedata.normalize("NFKC", text).lower())


def exact_match(pred: str, ref: str) -> float:
    return float(normalize(pred) == normalize(ref))


def contains(pred: str, ref: str) -> float:
    return float(normalize(ref) in normalize(pred))


def _f1(overlap: float, n_pred: int, n_ref: int) -> float:
    if n_pred == 0 and n_ref == 0:
        return 1.0
    if overlap == 0 or n_pred == 0 or n_ref == 0:
        return 0.0
    precision, recall = overlap / n_pred, overlap / n_ref
    return 2 * precision * recall / (precision + recall)


def _ngrams(toks: list[str], n: int) -> Counter[tuple[str, ...]]:
    return Counter(tuple(toks[i : i + n]) for i in range(len(toks) - n + 1))


def rouge_n(pred: str, ref: str, n: int) -> float:
    tp, tr = tokens(pred), tokens(ref)
    p, r = _ngrams(tp, n), _ngrams(tr, n)
    if not p and not r:  # both sides shorter than n tokens: nothing to count, so they agree or they do not
        return float(tp == tr)
    return _f1(sum((p & r).values()), sum(p.values()), sum(r.values()))


def _lcs(a: list[str], b: list[str]) -> int:
    prev = [0] * (len(b) + 1)
    for x in a:
        cur = [0]
        for j, y in enumerate(b, 1):
            cur.append(prev[j - 1] + 1 if x == y else max(prev[j], cur[j - 1]))
        prev = cur
    return prev[-1]


def rouge_l(pred: str, ref: str) -> float:
    p, r = tokens(pred), tokens(ref)
    return _f1(_lcs(p, r), len(p), len(r))


def bleu(pred: str, ref: str) -> float:
    from sacrebleu.metrics import BLEU

    metric = BLEU(tokenize="zh" if HAS_CJK.search(ref) else "13a", effective_order=True)
    return metric.sentence_score(pred, [ref]).score / 100.0


def chrf(pred: str, ref: str) -> float:
    from sacrebleu.metrics import CHRF

    return CHRF().sentence_score(pred, [ref]).score / 100.0


def score(pred: str, ref: str, user: Scorer | None = None) -> dict[str, float]:
    """Every built-in score of one prediction, plus the user scorer's (as "user" or "user_<key>")."""
    scores = {
        "exact": exact_match(pred, ref),
        "contains": contains(pred, ref),
        "rouge1": rouge_n(pred, ref, 1),
        "rouge2": rouge_n(pred, ref, 2),
        "rougeL": rouge_l(pred, ref),
        "bleu": bleu(pred, ref),
        "chrf": chrf(pred, ref),
    }
    if user is not None:
        extra = user(pred, ref)
        if isinstance(extra, dict):
            scores.update({f"user_{k}": float(v) for k, v in extra.items()})
        else:
            scores["user"] = float(extra)
    return scores


def mean_scores(rows: Iterable[dict[str, float]]) -> dict[str, float]:
    """Per-key mean over score dicts (keys missing from a row are averaged over the rows that have them)."""
    sums: dict[str, float] = {}
    counts: Counter[str] = Counter()
    for row in rows:
        for key, value in row.items():
            sums[key] = sums.get(key, 0.0) + float(value)
            counts[key] += 1
    return {key: sums[key] / counts[key] for key in sums}


def load_scorer(spec: str) -> Scorer:
    """Import a user scorer "package.module:function"; a one-line ScorerError when it is unusable."""
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise ScorerError(f"scorer {spec!r}: expected 'module:function'")
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:  # ImportError, but also a relative name or an error raised while importing
        raise ScorerError(f"scorer {spec!r}: cannot import {module_name}: {exc}") from exc
    func = getattr(module, attr, None)
    if not callable(func):
        raise ScorerError(f"scorer {spec!r}: {module_name} has no callable {attr!r}")
    return func
