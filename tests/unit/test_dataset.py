from __future__ import annotations

import pytest

from trtsweep.errors import TrtsweepError
from trtsweep.perf.dataset import load_jsonl


def write(tmp_path, text: str):
    path = tmp_path / "p.jsonl"
    path.write_text(text, encoding="utf-8")
    return path


def test_records_and_chat_records(tmp_path):
    path = write(
        tmp_path,
        '{"input": "hi", "output": "hello"}\n\n'
        '{"messages": [{"role": "user", "content": "你好"}], "max_tokens": 5, "tag": 1}\n',
    )
    first, second = load_jsonl(path)
    assert (first.input, first.reference, first.as_messages()) == ("hi", "hello", [{"role": "user", "content": "hi"}])
    assert second.index == 1 and second.max_tokens == 5 and second.extra == {"tag": 1}
    assert second.as_messages() == [{"role": "user", "content": "你好"}]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"input": "a"}\n{"input": "b",}\n', ":2: invalid JSON"),
        ('{"output": "x"}\n', ":1: record has neither 'input' nor 'messages'"),
        ("[1, 2]\n", ":1: expected a JSON object, got list"),
        ('{"input": 3}\n', ":1: 'input' must be a string, got int"),
        ('{"input": "a", "max_tokens": 0}\n', ":1: 'max_tokens' must be a positive integer"),
        ('{"messages": [{"role": "user"}]}\n', ":1: 'messages' must be a non-empty list"),
        ("\n\n", "no records (empty file)"),
    ],
)
def test_bad_input_names_file_and_line(tmp_path, text, message):
    with pytest.raises(TrtsweepError) as err:
        load_jsonl(write(tmp_path, text))
    assert message in str(err.value)
    assert str(tmp_path) in str(err.value)


def test_missing_file(tmp_path):
    with pytest.raises(TrtsweepError, match="cannot read input data"):
        load_jsonl(tmp_path / "nope.jsonl")
