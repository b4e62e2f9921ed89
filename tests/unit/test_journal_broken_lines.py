"""A lane's journal with a line that is not an event (trtsweep.lane.journal): a writer killed mid-line, or a disk
that filled mid-write and then had space again, so the cut line runs into the next whole one. The reading goes on:
the whole line after the cut is read as usual, and the rest is handed on as a `broken` event in its place.

Fails on a reader that parsed every line as JSON: one broken line raised JSONDecodeError on every poll, and the
controller gave the host up while it kept working."""

from __future__ import annotations

import json

from trtsweep.lane import journal

START = '{"event": "start", "point": "q"}\n'
STAGE = '{"event": "stage", "point": "q", "stage": "download"}\n'


def test_a_line_cut_short_is_a_broken_event_and_the_whole_line_after_it_is_read(tmp_path):
    text = START + '{"event": "sta' + STAGE + "not json at all\n" + "[1, 2]\n" + '{"event": "lane_end"}\n'
    (tmp_path / "h--lane0.jsonl").write_text(text)
    events, offsets = journal.read_new(tmp_path, {})
    assert events == {"h--lane0": [
        {"event": "start", "point": "q"},
        {"event": "broken", "offset": len(START), "text": '{"event": "sta'},
        {"event": "stage", "point": "q", "stage": "download"},
        {"event": "broken", "offset": len(START) + len('{"event": "sta') + len(STAGE), "text": "not json at all"},
        {"event": "broken", "offset": len(text) - len('[1, 2]\n{"event": "lane_end"}\n'), "text": "[1, 2]"},
        {"event": "lane_end"},
    ]}  # fmt: skip
    assert offsets == {"h--lane0": len(text)}
    assert journal.read_new(tmp_path, offsets) == ({}, offsets)  # read once


def test_a_line_whose_cut_part_holds_an_object_start_is_read_from_the_whole_line(tmp_path):
    cut = '{"event": "end", "failure": {"msg": "x'
    (tmp_path / "a.jsonl").write_text(cut + STAGE)
    events, _ = journal.read_new(tmp_path, {})
    assert events["a"] == [{"event": "broken", "offset": 0, "text": cut},
                           {"event": "stage", "point": "q", "stage": "download"}]  # fmt: skip


def test_the_poll_names_a_broken_line_and_goes_on(tmp_path, capsys):
    (tmp_path / "a.jsonl").write_text(START + "\x00\x00garbage" + STAGE)
    assert journal.main([str(tmp_path), "--offsets", "{}", "--wait", "0"]) == 0
    polled = json.loads(capsys.readouterr().out)
    assert [e["event"] for e in polled["events"]["a"]] == ["start", "broken", "stage"]
    assert polled["events"]["a"][1]["text"] == "\x00\x00garbage"
    assert polled["offsets"] == {"a": len((START + "\x00\x00garbage" + STAGE).encode())}
