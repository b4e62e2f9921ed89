from __future__ import annotations

import pytest

from trtsweep.errors import TrtsweepError
from trtsweep.perf import accuracy as acc


def test_tokens_split_cjk_characters_and_words():
    assert acc.tokens("订单号是A123, ok!") == ["订", "单", "号", "是", "a123", "ok"]
    # CJK punctuation (the ideographic full stop, the katakana middle dot) is dropped like other punctuation
    assert acc.tokens("\u30ab\u30fb\u30ca\u3002한국") == ["\u30ab", "\u30ca", "한", "국"]


def test_rouge_is_zero_when_a_side_has_no_ngrams_as_in_rouge_score():
    # before: two texts that both tokenize to nothing got 1.0 (equal-empty is not agreement)
    for pred, ref in (("👍", "👎"), ("!!!", "???"), ("", "")):
        assert acc.rouge_n(pred, ref, 1) == acc.rouge_n(pred, ref, 2) == acc.rouge_l(pred, ref) == 0.0
    assert acc.rouge_n("A", "B", 2) == 0.0
    assert acc.rouge_n("A.", "a", 2) == 0.0  # no bigram on either side: rouge-score says 0; exact and rouge1 see it
    assert acc.rouge_n("A.", "a", 1) == acc.exact_match("A.", "a.") == 1.0
    assert acc.rouge_n("", "a", 2) == 0.0


def test_english_rouge_by_hand():
    # pred 3 tokens, ref 4 tokens, overlap 3: P=1, R=3/4, F1=6/7; bigrams 2 of pred, 3 of ref, overlap 2: F1=0.8
    assert acc.rouge_n("the cat sat", "the cat sat down", 1) == pytest.approx(6 / 7)
    assert acc.rouge_n("the cat sat", "the cat sat down", 2) == pytest.approx(0.8)
    assert acc.rouge_l("the cat sat", "the cat sat down") == pytest.approx(6 / 7)


def test_chinese_rouge_is_character_level():
    pred, ref = "中国的首都是北京", "北京是中国的首都"
    # 8 characters each, same multiset: ROUGE-1 = 1; LCS "中国的首都" = 5: P=R=5/8
    assert acc.rouge_n(pred, ref, 1) == 1.0
    assert acc.rouge_l(pred, ref) == pytest.approx(5 / 8)
    # bigrams: 7 each; shared 中国 国的 的首 首都 北京 = 5 -> 5/7
    assert acc.rouge_n(pred, ref, 2) == pytest.approx(5 / 7)


def test_normalization_for_exact_and_contains():
    assert acc.exact_match("  Paris\n", "paris") == 1.0
    assert acc.exact_match("\uff30\uff21\uff32\uff29\uff33", "paris") == 1.0  # full-width PARIS via NFKC
    assert acc.contains("The capital is  Paris.", "capital is paris") == 1.0
    assert acc.contains("Lyon", "Paris") == 0.0


def test_identical_and_disjoint():
    same, error, *_ = acc.score("The capital of France is Paris.", "The capital of France is Paris.")
    assert error is None and all(v == pytest.approx(1.0) for v in same.values())
    other, *_ = acc.score("alpha beta", "gamma delta")
    assert other["rouge1"] == other["rougeL"] == other["exact"] == other["contains"] == 0.0
    assert other["bleu"] == 0.0


def test_bleu_uses_chinese_tokenization_for_chinese_references():
    assert acc.bleu("北京是中国的首都", "北京是中国的首都") == pytest.approx(1.0)
    assert 0.0 < acc.bleu("北京是首都", "北京是中国的首都") < 1.0


def _random_pairs(count: int) -> list[tuple[str, str]]:
    import random

    rng = random.Random(7)
    words = ["the", "Paris", "capital,", "of", "France", "is", "(Berlin)", "a", "city.", "北京", "是", "首都", "。"]
    pairs = []
    for _ in range(count):
        pred = " ".join(rng.choices(words, k=rng.randrange(0, 14)))
        ref = " ".join(rng.choices(words, k=rng.randrange(1, 14)))
        pairs.append((pred, ref))
    return [*pairs, ("", "Paris"), ("Paris", "Paris"), ("北京是中国的首都", "北京是中国的首都"), ("a b", "a b c d e f")]


def test_bleu_and_chrf_equal_sacrebleu_sentence_and_corpus_scores():
    from sacrebleu.metrics import BLEU, CHRF

    from trtsweep.perf.bleu_chrf import CorpusStats

    pairs = _random_pairs(300)
    corpus = {name: CorpusStats() for name in ("13a", "zh")}
    for pred, ref in pairs:
        tokenize = acc.bleu_tokenizer(ref)
        expected = BLEU(tokenize=tokenize, effective_order=True).sentence_score(pred, [ref]).score / 100
        assert acc.bleu(pred, ref) == pytest.approx(expected, abs=1e-12), (pred, ref)
        assert acc.chrf(pred, ref) == pytest.approx(CHRF().sentence_score(pred, [ref]).score / 100, abs=1e-12)
        scored = acc.score(pred, ref)
        corpus[tokenize].add(scored.bleu, scored.chrf)
    for tokenize, stats in corpus.items():
        chosen = [(p, r) for p, r in pairs if acc.bleu_tokenizer(r) == tokenize]
        preds, refs = [p for p, _ in chosen], [r for _, r in chosen]
        assert stats.scores()["corpus_bleu"] == pytest.approx(
            BLEU(tokenize=tokenize).corpus_score(preds, [refs]).score / 100, abs=1e-12
        )
        assert stats.scores()["corpus_chrf"] == pytest.approx(CHRF().corpus_score(preds, [refs]).score / 100, abs=1e-12)


def test_user_scorer(tmp_path, monkeypatch):
    (tmp_path / "myscore.py").write_text(
        "def length_ratio(p, r):\n    return len(p) / len(r)\ndef many(p, r):\n    return {'x': 1, 'y': 0.5}\n"
    )
    (tmp_path / "broken.py").write_text("raise RuntimeError('boom')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert acc.score("ab", "abcd", acc.load_scorer("myscore:length_ratio"))[0]["user"] == 0.5
    assert acc.score("ab", "abcd", acc.load_scorer("myscore:many"))[0]["user_y"] == 0.5
    for spec, message in (
        ("nocolon", "expected 'module:function' or 'file.py:function'"),
        ("nomodule_xyz:f", "cannot import"),
        ("myscore:missing", "has no callable 'missing'"),
        (".relative:f", "cannot import"),
        ("broken:f", "cannot import broken: boom"),
    ):
        with pytest.raises(TrtsweepError, match=message):
            acc.load_scorer(spec)
    with pytest.raises(ValueError, match="json has no callable 'nope'"):
        acc.load_scorer("json:nope")
    assert acc.load_scorer("os.path:join")("a", "b") == "a/b"  # any importable module works


def test_cjk_punctuation_is_folded_for_exact_and_contains():
    assert acc.exact_match("北京。", "北京.") == 1.0  # before: NFKC maps "，" but not "。"
    assert acc.exact_match("「是」、对", '"是",对') == 1.0
    assert acc.contains("答案是《北京》。", "<北京>") == 1.0


def test_bleu_tokenizer_follows_the_references_script():
    assert acc.bleu_tokenizer("東京は日本の首都です") in ("ja-mecab", "char")  # before: "zh", which splits only Han
    assert acc.bleu_tokenizer("서울은 한국의 수도입니다") in ("ko-mecab", "char")
    assert acc.bleu_tokenizer("北京是首都") == "zh"
    assert acc.bleu_tokenizer("Paris is the capital") == "13a"
    assert 0.0 < acc.bleu("東京は首都です", "東京は日本の首都です") < 1.0


def test_the_compiled_lcs_equals_the_textbook_one_on_random_cases():
    import random

    def textbook(a: list[str], b: list[str]) -> int:
        prev = [0] * (len(b) + 1)
        for x in a:
            cur = [0]
            for j, y in enumerate(b, 1):
                cur.append(prev[j - 1] + 1 if x == y else max(prev[j], cur[j - 1]))
            prev = cur
        return prev[-1]

    rng = random.Random(7)
    for _ in range(300):
        a = [rng.choice("abcde北京") for _ in range(rng.randint(0, 30))]
        b = [rng.choice("abcde北京") for _ in range(rng.randint(0, 30))]
        assert acc.lcs_length(a, b) == textbook(a, b)


def test_a_failing_user_scorer_is_recorded_and_the_built_in_scores_stand(tmp_path, monkeypatch):
    (tmp_path / "bad.py").write_text(
        "def boom(p, r):\n    raise KeyError('x')\ndef none(p, r):\n    return None\n"
        "def text(p, r):\n    return {'a': 'high'}\ndef nan(p, r):\n    return float('nan')\n"
    )
    monkeypatch.chdir(tmp_path)  # a scorer module in the current directory is found without PYTHONPATH
    for name, message in (("boom", "scorer raised KeyError"), ("none", "returned None"), ("text", "'high' for a"),
                          ("nan", "returned nan")):  # fmt: skip
        scores, error, *_ = acc.score("Paris", "Paris", acc.load_scorer(f"bad:{name}"))
        assert error is not None and message in error, error
        assert scores["exact"] == 1.0 and not any(k.startswith("user") for k in scores)


def test_a_scorer_file_path_is_accepted(tmp_path):
    (tmp_path / "team_scores.py").write_text("def ratio(p, r):\n    return len(p) / len(r)\n")
    scorer = acc.load_scorer(f"{tmp_path / 'team_scores.py'}:ratio")
    assert acc.score("ab", "abcd", scorer)[0]["user"] == 0.5
    with pytest.raises(TrtsweepError, match="no file"):
        acc.load_scorer(f"{tmp_path / 'missing.py'}:ratio")


def test_an_empty_reference_is_left_out_of_accuracy_and_counted():
    from trtsweep.perf.bleu_chrf import CorpusStats
    from trtsweep.perf.metrics import LevelStats, request_metrics
    from trtsweep.perf.protocols.base import RequestResult

    stats = LevelStats()
    for seq, reference in enumerate(["Paris", "   ", "", None, "Berlin"]):
        r = RequestResult(seq=seq, record_index=seq, warmup=False, sent_ns=1_000_000_000, end_ns=2_000_000_000,
                          chunk_ns=[1_500_000_000], chunk_text=["Paris"])  # fmt: skip
        stats.add(r, request_metrics(r, "q", reference, None))
    summary = stats.summary()
    # before: the blank references scored contains = 1.0 for any prediction, moving the mean
    assert summary["accuracy"]["contains"] == 0.5 and summary["accuracy_n"] == 2
    assert summary["accuracy_records"] == {"scored": 2, "no_reference": 1, "empty_reference": 2, "scorer_failed": 0}
    corpus = CorpusStats()
    for pred, ref in [("Paris", "Paris"), ("Paris", "Berlin")]:
        scored = acc.score(pred, ref)
        corpus.add(scored.bleu, scored.chrf)
    assert summary["accuracy"]["corpus_bleu"] == pytest.approx(corpus.scores()["corpus_bleu"])


def test_nan_is_written_as_null():
    import json

    from trtsweep.perf.export import strict_json

    text = strict_json({"a": float("nan"), "b": [float("inf"), 1.5]}, indent=None)
    assert json.loads(text) == {"a": None, "b": [None, 1.5]}


def test_many_pairs_are_scored_in_worker_processes_with_the_same_results(tmp_path):
    (tmp_path / "ratio.py").write_text("def ratio(p, r):\n    return len(p) / max(1, len(r))\n")
    scoring = acc.Scoring(f"{tmp_path / 'ratio.py'}:ratio", workers=2)
    pairs = _random_pairs(acc.Scoring.PARALLEL_FROM)
    try:
        parallel = scoring.map(pairs)
        assert scoring.pool is not None  # a level's many pairs went to the workers (each loaded the user scorer)
    finally:
        scoring.close()
    assert parallel == [acc.score(p, r, scoring.user) for p, r in pairs]
    assert all("user" in s.scores for s in parallel)
