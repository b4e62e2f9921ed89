"""A conversation's turns that were never sent because an earlier turn failed (trtsweep.perf.conversations): each
counts as a failed request of the level (error class `not_sent`), by the failed turn's error class in the summary's
`not_sent`, in the request rows, on the console, and so in the success rate results.csv and the SLOs judge. Driven by
a real chat server on a loopback port that fails one turn."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from aiohttp import web

from tests.unit.test_perf_conversations import OPENAI, SHORT, ChatServer, write
from trtsweep.perf.benchmark import run
from trtsweep.perf.cli import config_from_args, main, parser
from trtsweep.report.results_table import collect
from trtsweep.report.verdict import misses

# four turns: its turn 1 fails, so turns 2 and 3 are never sent
LONG = {"id": "long", "conversation": [{"user": f"d{k}", "reference": f"r-d{k}"} for k in range(4)]}


class FailingChatServer(ChatServer):
    """The chat server, answering HTTP 503 to the turn whose user message is `fail` (an overloaded server)."""

    def __init__(self, fail: str) -> None:
        super().__init__()
        self.fail = fail

    async def chat(self, request: web.Request) -> web.StreamResponse:
        messages = (await request.json())["messages"]
        if messages[-1]["content"] == self.fail:
            self.requests.append(messages)
            return web.Response(status=503, text="overloaded")
        return await super().chat(request)


@pytest.fixture
def failing_server() -> Iterator[FailingChatServer]:
    with FailingChatServer(fail="d1") as server:
        yield server


def argv(server: ChatServer, talks: Path, export: Path) -> list[str]:
    return ["-u", f"127.0.0.1:{server.port}", "-i", "openai", "-m", "m", "--conversations", str(talks),
            "--concurrency", "2", "--warmup-requests", "0", "--profile-export-file", str(export)]  # fmt: skip


def test_turns_not_sent_after_a_failed_turn_count_as_failed_requests_with_its_cause(tmp_path, failing_server):
    talks = write(tmp_path / "c.jsonl", LONG, OPENAI, SHORT)
    (report,) = run(config_from_args(parser().parse_args(argv(failing_server, talks, tmp_path / "out.json"))))
    sent = [m[-1]["content"] for m in failing_server.requests]
    assert sorted(sent) == ["b0", "b1", "c0", "d0", "d1"]  # d2 and d3 never reached the server
    summary = report.summary
    # 7 turns in the level: 4 answered, 1 failed on the server, 2 not sent
    assert (summary["requests"], summary["succeeded"], summary["failed"]) == (7, 4, 3)
    assert summary["errors"] == {"server_error": 1, "not_sent": 2}
    assert summary["not_sent"] == {"server_error": 2}  # by the error class of the turn that ended the conversation
    assert summary["abandoned"] == {}
    convs = summary["conversations"]
    assert (convs["conversations"], convs["completed"], convs["failed"]) == (3, 2, 1)
    assert convs["turns_sent"]["max"] == 2  # turns that went out: the long one's first two
    rows = {(r["conversation"], r["turn"]): r for r in report.rows()}
    assert len(rows) == 7
    for turn in (2, 3):
        row = rows[("long", turn)]
        assert row["error_class"] == "not_sent" and row["not_sent"] == "server_error"
        assert row["error"] == "not sent: turn 1 of its conversation failed (server_error)"
        assert row["sent_ms"] is None and row["end_ms"] is None and row["chunk_ms"] == [] and not row["warmup"]
        assert row["ttft_ms"] is None and row["scores"] is None
    assert rows[("long", 1)]["error_class"] == "server_error" and rows[("long", 1)]["not_sent"] is None
    assert rows[("2", 1)]["error"] is None and rows[("2", 1)]["not_sent"] is None
    saved = json.loads((tmp_path / "out.summary.json").read_text())["levels"][0]["summary"]
    assert saved["not_sent"] == {"server_error": 2} and saved["requests"] == 7
    lines = (tmp_path / "out.requests.jsonl").read_text().splitlines()
    assert sum(json.loads(line)["error_class"] == "not_sent" for line in lines) == 2


def test_the_success_rate_results_and_the_slos_judge_counts_the_turns_not_sent(tmp_path, failing_server):
    talks = write(tmp_path / "c.jsonl", LONG, OPENAI, SHORT)
    point = tmp_path / "results" / "p1"
    point.mkdir(parents=True)
    run(config_from_args(parser().parse_args(argv(failing_server, talks, point / "llm_perf.json"))))
    slo = {"min_success_rate": 0.9}
    (row,) = collect(tmp_path / "results", slo)
    assert (row["requests"], row["succeeded"], row["failed"]) == (7, 4, 3)
    assert row["success_rate"] == pytest.approx(4 / 7)  # 4 / 5 had the unsent turns been left out
    assert row["errors"] == "not_sent=2;server_error=1"
    assert "success rate 0.571 < 0.9" in misses(row, slo, {})


def test_the_console_says_how_many_turns_were_not_sent_and_why(tmp_path, failing_server, capsys):
    talks = write(tmp_path / "c.jsonl", LONG, OPENAI, SHORT)
    assert main(argv(failing_server, talks, tmp_path / "out.json")) == 0
    out, err = capsys.readouterr()
    assert "concurrency 2: 4/7 ok" in err
    assert ("llm-perf: concurrency 2: 2 turns not sent (2 after a server_error): an earlier turn of their "
            "conversation failed; counted as failed requests") in err  # fmt: skip
    assert "4/7" in out.splitlines()[1]  # the table's ok/req


def test_a_conversation_that_succeeds_sends_every_turn_and_counts_none_unsent(tmp_path, chat_server):
    talks = write(tmp_path / "c.jsonl", LONG, SHORT)
    (report,) = run(config_from_args(parser().parse_args(argv(chat_server, talks, tmp_path / "out.json"))))
    assert report.summary["not_sent"] == {} and report.summary["errors"] == {}
    assert (report.summary["requests"], report.summary["succeeded"]) == (5, 5)
    assert all(row["not_sent"] is None and row["sent_ms"] is not None for row in report.rows())


@pytest.fixture
def chat_server() -> Iterator[ChatServer]:
    with ChatServer() as server:
        yield server
