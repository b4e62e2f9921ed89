from __future__ import annotations

import pytest

from trtsweep.errors import TrtsweepError
from trtsweep.perf import accuracy as acc


def test_tokens_split_cjk_characters_and_words():
    assert acc.tokens("订单号是A123, ok!") == ["订", "单", "号", "是", "a123", "ok"]
    # CJK punctuation (the ideographic full stop, the katakana middle dot) is dropped like other punctuation
    assert acc.tokens("\u30ab\u30fb\u30ca\u3002한국") == ["\u30ab", "\u30ca", "한", "국"]


def test_rouge2_of_answers_shorter_than_a_bigram():
    # "A" vs "B" has no bigram on either side: that is agreement only when the tokens agree
    assert acc.rouge_n("A", "B", 2) == 0.0
    assert acc.rouge_n("A.", "a", 2) == 1.0
    assert acc.rouge_n("", "a", 2) == 0.0
    assert acc.rouge_n("", "", 1) == 1.0


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
    same = acc.score("The capital of France is Paris.", "The capital of France is Paris.")
    assert all(v == pytest.approx(1.0) for v in same.values())
    other = acc.score("alpha beta", "gamma delta")
    assert other["rouge1"] == other["rougeL"] == other["exact"] == other["contains"] == 0.0
    assert other["bleu"] == 0.0


def test_bleu_uses_chinese_tokenization_for_chinese_references():
    assert acc.bleu("北京是中国的首都", "北京是中国的首都") == pytest.approx(1.0)
    assert 0.0 < acc.bleu("北京是首都", "北京是中国的首都") < 1.0


def test_mean_scores():
    assert acc.mean_scores([{"a": 1.0, "b": 0.0}, {"a": 0.0}]) == {"a": 0.5, "b": 0.0}


def test_user_scorer(tmp_path, monkeypatch):
    (tmp_path / "myscore.py").write_text(
        "def length_ratio(p, r):\n    return len(p) / len(r)\ndef many(p, r):\n    return {'x': 1, 'y': 0.5}\n"
    )
    (tmp_path / "broken.py").write_text("raise RuntimeError('boom')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert acc.score("ab", "abcd", acc.load_scorer("myscore:length_ratio"))["user"] == 0.5
    assert acc.score("ab", "abcd", acc.load_scorer("myscore:many"))["user_y"] == 0.5
    for spec, message in (
        ("nocolon", "expected 'module:function'"),
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
