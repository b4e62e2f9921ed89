"""llm-perf's conversations (trtsweep.perf.conversations): the file format and its one-line errors, turns sent in
order and never overlapping, the history (served or recorded answers), seeded think times, the profile's turn
columns and the level's per-conversation summary."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from trtsweep.errors import TrtsweepError
from trtsweep.perf.argv import command
from trtsweep.perf.benchmark import run
from trtsweep.perf.cli import config_from_args, parser
from trtsweep.perf.conversations import ConversationRun, ConversationSpec, ConversationStats, load_conversations
from trtsweep.perf.levels import BenchmarkConfig
from trtsweep.perf.protocols.base import Endpoint, PreparedRequest, Protocol, RequestResult
from trtsweep.perf.runner import Level

NATIVE = {"id": "a", "system": "be brief", "conversation": [{"user": "a0", "reference": "r-a0"},
                                                             {"user": "a1", "reference": "r-a1", "max_tokens": 7},
                                                             {"user": "a2"}]}  # fmt: skip
OPENAI = {"messages": [{"role": "user", "content": "b0"}, {"role": "assistant", "content": "r-b0"},
                       {"role": "user", "content": "b1"}, {"role": "assistant", "content": "r-b1"}]}  # fmt: skip
SHORT = {"id": 7, "conversation": [{"user": "c0", "reference": "r-c0"}]}


def write(path: Path, *lines: Any) -> Path:
    path.write_text("".join((line if isinstance(line, str) else json.dumps(line)) + "\n" for line in lines))
    return path


def test_both_shapes_load_to_the_same_turns(tmp_path):
    path = write(tmp_path / "c.jsonl", NATIVE, "", OPENAI, SHORT)
    a, b, c = load_conversations(path)
    assert (a.id, a.system, a.lineno, a.first) == ("a", "be brief", 1, 0)
    assert [(t.user, t.reference, t.max_tokens) for t in a.turns] == [("a0", "r-a0", None), ("a1", "r-a1", 7),
                                                                      ("a2", None, None)]  # fmt: skip
    assert (b.id, b.system, b.lineno, b.first) == ("3", None, 3, 3)  # no id: its line
    assert [(t.user, t.reference) for t in b.turns] == [("b0", "r-b0"), ("b1", "r-b1")]
    assert (c.id, c.first, len(c.turns)) == ("7", 5, 1)
    with_system = {"messages": [{"role": "system", "content": "s"}, *OPENAI["messages"][:3]]}
    (d,) = load_conversations(write(tmp_path / "d.jsonl", with_system))
    assert (d.system, [(t.user, t.reference) for t in d.turns]) == ("s", [("b0", "r-b0"), ("b1", None)])


@pytest.mark.parametrize(
    ("line", "says"),
    [
        ("{not json", "invalid JSON"),
        ("[1]", "expected a JSON object"),
        ({"input": "x"}, "exactly one of 'conversation' or 'messages'"),
        ({"conversation": [], "messages": []}, "exactly one of"),
        ({"conversation": []}, "non-empty list of turns"),
        ({"conversation": [{"reference": "r"}]}, "turn 0 has no 'user'"),
        ({"conversation": [{"user": 3}]}, "turn 0's 'user' must be a string"),
        ({"conversation": [{"user": "u", "answer": "r"}]}, "unknown keys ['answer']"),
        ({"conversation": [{"user": "u", "max_tokens": 0}]}, "'max_tokens' must be a positive integer"),
        ({"conversation": [{"user": "u"}], "system": 1}, "'system' must be a string"),
        ({"conversation": [{"user": "u"}], "id": [1]}, "'id' must be a string or an integer"),
        ({"messages": [{"role": "assistant", "content": "x"}]}, "message 0 is 'assistant', expected 'user'"),
        ({"messages": [{"role": "user", "content": "x"}, {"role": "user", "content": "y"}]}, "message 1 is 'user'"),
        ({"messages": [{"role": "system", "content": "s"}]}, "no user message"),
        ({"messages": [{"role": "user"}]}, "message 0 must be an object with string 'role' and 'content'"),
        ({"messages": [{"role": "user", "content": "x"}], "system": "s"}, "first message of role system"),
    ],
)
def test_a_bad_line_is_one_error_naming_file_and_line(tmp_path, line, says):
    path = write(tmp_path / "bad.jsonl", SHORT, line)
    with pytest.raises(TrtsweepError) as err:
        load_conversations(path)
    assert str(err.value).startswith(f"{path}:2: ") and says in str(err.value), str(err.value)
    assert "\n" not in str(err.value)


def test_empty_file_and_recorded_history_without_references_are_refused(tmp_path):
    with pytest.raises(TrtsweepError, match="no conversations"):
        load_conversations(write(tmp_path / "empty.jsonl", ""))
    path = write(tmp_path / "c.jsonl", SHORT, NATIVE, {"conversation": [{"user": "x"}, {"user": "y"}]})
    assert len(load_conversations(path, "served")) == 3
    with pytest.raises(TrtsweepError) as err:
        load_conversations(path, "recorded")
    assert str(err.value).startswith(f"{path}:3: turn 0 has no recorded answer")


class Recorder(Protocol):
    """A protocol double: answers "ans(<user message>)" after a few loop turns, records each request, and counts
    requests of one conversation in flight at once (`overlaps`); turn `fail_turn` of conversation a fails."""

    def __init__(self, fail_user: str | None = None) -> None:
        super().__init__(Endpoint(url="x", model="m"))
        self.fail_user = fail_user
        self.seen: list[PreparedRequest] = []
        self.inflight: set[str] = set()
        self.overlaps = 0

    async def start(self) -> None:
        pass

    async def close(self) -> None:
        pass

    async def server_id(self) -> str:
        return "x"

    async def send(self, request: PreparedRequest, result: RequestResult) -> None:
        assert request.messages is not None
        user = request.messages[-1]["content"]
        key = user[0]  # conversation a, b, c: its turns' messages start with its letter
        self.overlaps += key in self.inflight
        self.inflight.add(key)
        self.seen.append(request)
        result.mark_sent()
        try:
            for _ in range(3):
                await asyncio.sleep(0)
            if user == self.fail_user:
                raise ConnectionError("reset")
            result.add_chunk(f"ans({user})")
            result.mark_end()
        finally:
            self.inflight.discard(key)


def render(messages: list[dict[str, str]]) -> str:
    return "|".join(f"{m['role']}:{m['content']}" for m in messages)


def level_run(run_: ConversationRun, protocol: Protocol, level: Level) -> list[RequestResult]:
    results: list[RequestResult] = []
    asyncio.run(run_.run_level(protocol, level, results.append))
    return results


def test_rendered_prompts_carry_the_recorded_history_in_order(tmp_path, monkeypatch):
    convs = load_conversations(write(tmp_path / "c.jsonl", NATIVE, OPENAI, SHORT), "recorded")
    spec = ConversationSpec(tmp_path / "c.jsonl", "recorded", (0.0, 0.0))
    talks = ConversationRun(convs, [5] * 6, spec, seed=1, render=render, chat=False)
    proto = Recorder()
    results = level_run(talks, proto, Level(num_requests=3, concurrency=3))
    assert proto.overlaps == 0 and len(results) == 6 and all(r.ok for r in results)
    prompts = {r.prompt for r in proto.seen}
    assert "system:be brief|user:a0|assistant:r-a0|user:a1|assistant:r-a1|user:a2" in prompts
    assert "user:b0|assistant:r-b0|user:b1" in prompts and "user:c0" in prompts
    # a conversation's turns went out in order; the profile's seq, turn and record agree
    for result in results:
        sent = talks.sent[result.seq]
        assert result.record_index == convs[sent.conversation].first + sent.turn
        assert talks.prompt(result.seq) == proto.seen[result.seq].prompt
    by_session: dict[int, list[int]] = {}
    for seq in sorted(talks.sent):
        by_session.setdefault(talks.sent[seq].session, []).append(talks.sent[seq].turn)
    assert sorted(by_session.values()) == [[0], [0, 1], [0, 1, 2]]
    with pytest.raises(TrtsweepError, match="give --tokenizer-path"):
        ConversationRun(convs, [5] * 6, spec, seed=1, render=None, chat=False)


def test_served_history_is_the_answers_and_a_failed_turn_ends_its_conversation(tmp_path, monkeypatch):
    slept: list[float] = []

    async def no_sleep(seconds: float) -> None:
        slept.append(seconds)

    convs = load_conversations(write(tmp_path / "c.jsonl", NATIVE, OPENAI))
    spec = ConversationSpec(tmp_path / "c.jsonl", "served", (40.0, 30.0))
    talks = ConversationRun(convs, [5] * 5, spec, seed=3, render=None, chat=True)
    proto = Recorder(fail_user="a1")
    monkeypatch.setattr(talks, "think", no_sleep)  # the think times, recorded instead of waited
    results = level_run(talks, proto, Level(num_requests=1, concurrency=1, warmup_requests=1))
    sent = [(talks.sent[r.seq].session, talks.sent[r.seq].turn, r.ok, r.warmup) for r in results]
    first = talks.order[0]  # the warm-up conversation (session 0) is the first of the seeded order; then session 1
    a_turns = [(0, True), (1, False), (2, False)]  # a's turn 1 fails: its turn 2 is never sent, and recorded so
    b_turns = [(0, True), (1, True)]
    expect = [(0, *t, True) for t in (a_turns if first == 0 else b_turns)]
    expect += [(1, *t, False) for t in (b_turns if first == 0 else a_turns)]
    assert sent == expect
    assert "a2" not in [r.messages[-1]["content"] for r in proto.seen if r.messages]
    (unsent,) = [r for r in results if talks.sent[r.seq].not_sent is not None]
    assert (unsent.error_class, talks.sent[unsent.seq].not_sent, unsent.sent_ns) == ("not_sent", "connection", 0)
    b1 = next(r for r in proto.seen if r.messages and r.messages[-1]["content"] == "b1")
    assert b1.messages == [{"role": "user", "content": "b0"}, {"role": "assistant", "content": "ans(b0)"},
                           {"role": "user", "content": "b1"}]  # fmt: skip
    # one think time before each later turn, drawn per session from the seed, clipped at 0
    want = []
    for session in (0, 1):
        rng = talks.think_times(session)
        want.append(max(0.0, rng.gauss(40.0, 30.0)) / 1e3)
    assert slept == want
    stats = ConversationStats(lambda c: len(convs[c].turns))
    for r in results:
        stats.add(r, talks.sent[r.seq])
    summary = stats.summary()
    assert (summary["conversations"], summary["completed"], summary["failed"]) == (1, int(first == 0),
                                                                                   int(first != 0))  # fmt: skip
    assert stats.unsent() == ({} if first == 0 else {"connection": 1})  # a warm-up's unsent turn is not measured


def test_think_times_are_normal_clipped_at_zero_and_seeded(tmp_path, monkeypatch):
    turns = [{"user": f"a{k}", "reference": "r"} for k in range(8)]
    convs = load_conversations(write(tmp_path / "c.jsonl", {"conversation": turns}))
    slept: list[float] = []

    async def no_sleep(seconds: float) -> None:
        slept.append(seconds)

    spec = ConversationSpec(tmp_path / "c.jsonl", "served", (0.0, 50.0))
    talks = ConversationRun(convs, [5] * 8, spec, seed=11, render=None, chat=True)
    monkeypatch.setattr(talks, "think", no_sleep)
    level_run(talks, Recorder(), Level(num_requests=1, concurrency=1, warmup_requests=0))
    rng = talks.think_times(0)
    draws = [rng.gauss(0.0, 50.0) for _ in range(7)]
    assert slept == [max(0.0, d) / 1e3 for d in draws]  # one before each turn but the first
    assert 0.0 in slept and any(s > 0 for s in slept)  # some draws were negative, and clipped
    again = ConversationRun(convs, [5] * 8, spec, seed=11, render=None, chat=True)
    rng_again = again.think_times(0)
    assert [rng_again.gauss(0.0, 50.0) for _ in range(7)] == draws


class ChatServer:
    """A tiny OpenAI chat server on a loopback port, in its own thread: streams "ans(<last user message>)" in two
    chunks after a short wait, and records each request's messages and whether a request of the same conversation
    (its first user message) was in flight."""

    def __init__(self) -> None:
        self.requests: list[list[dict[str, str]]] = []
        self.inflight: set[str] = set()
        self.overlaps = 0
        self.loop = asyncio.new_event_loop()
        self.ready = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)

    async def health(self, request: web.Request) -> web.Response:
        return web.Response(text="ok")

    async def chat(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        messages = body["messages"]
        key = messages[0]["content"] if messages[0]["role"] != "system" else messages[1]["content"]
        self.overlaps += key in self.inflight
        self.inflight.add(key)
        self.requests.append(messages)
        try:
            resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
            await resp.prepare(request)
            answer = f"ans({messages[-1]['content']})"
            for part in (answer[:3], answer[3:]):
                await asyncio.sleep(0.005)
                chunk = {"choices": [{"delta": {"content": part}}]}
                await resp.write(f"data: {json.dumps(chunk)}\n\n".encode())
            await resp.write(b"data: [DONE]\n\n")
            return resp
        finally:
            self.inflight.discard(key)

    def _serve(self) -> None:
        asyncio.set_event_loop(self.loop)
        app = web.Application()
        app.router.add_get("/health", self.health)
        app.router.add_post("/v1/chat/completions", self.chat)
        self.runner = web.AppRunner(app)
        self.loop.run_until_complete(self.runner.setup())
        site = web.TCPSite(self.runner, "127.0.0.1", 0)
        self.loop.run_until_complete(site.start())
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self.ready.set()
        self.loop.run_forever()
        self.loop.run_until_complete(self.runner.cleanup())
        self.loop.close()

    def __enter__(self) -> ChatServer:
        self.thread.start()
        assert self.ready.wait(10)
        return self

    def __exit__(self, *exc: object) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)


@pytest.fixture
def chat_server() -> Iterator[ChatServer]:
    with ChatServer() as server:
        yield server


def test_llm_perf_sends_conversations_to_a_chat_server(tmp_path, chat_server):
    path = write(tmp_path / "c.jsonl", NATIVE, OPENAI, SHORT)
    args = parser().parse_args(["-u", f"127.0.0.1:{chat_server.port}", "-i", "openai", "-m", "m", "--conversations",
                                str(path), "--concurrency", "2", "--warmup-requests", "0", "--think-time-ms", "1,1",
                                "--profile-export-file", str(tmp_path / "out.json")])  # fmt: skip
    (report,) = run(config_from_args(args))
    assert chat_server.overlaps == 0 and len(chat_server.requests) == 6
    # every turn's history holds the server's answers to the turns before it, in order
    for messages in chat_server.requests:
        turns = [m for m in messages if m["role"] != "system"]
        for user, answer in zip(turns[0::2], turns[1::2], strict=False):
            assert answer == {"role": "assistant", "content": f"ans({user['content']})"}
    assert ["be brief", "a0", "ans(a0)", "a1", "ans(a1)", "a2"] in [[m["content"] for m in r]
                                                                    for r in chat_server.requests]  # fmt: skip
    rows = list(report.rows())
    # the OpenAI-style conversation has no id: it is its line, 2
    assert sorted((r["conversation"], r["turn"]) for r in rows) == [("2", 0), ("2", 1), ("7", 0), ("a", 0), ("a", 1),
                                                                    ("a", 2)]  # fmt: skip
    letters = {"a": "a", "2": "b", "7": "c"}
    assert all(r["text"] == f"ans({letters[r['conversation']]}{r['turn']})" for r in rows)
    scored = {(r["conversation"], r["turn"]): r["reference"] for r in rows}
    assert scored[("a", 0)] == "scored" and scored[("a", 2)] == "no_reference"  # per turn, where it has a reference
    summary = report.summary
    assert summary["requests"] == 6 and summary["accuracy_records"]["scored"] == 5
    talks = summary["conversations"]
    assert (talks["conversations"], talks["completed"], talks["failed"]) == (3, 3, 0)
    assert talks["turns_sent"]["max"] == 3 and talks["total_time_ms"]["p99"] > 0
    saved = json.loads((tmp_path / "out.summary.json").read_text())
    assert "conversations" in json.dumps(saved)


def test_the_command_line_refuses_what_conversations_cannot_go_with(tmp_path):
    path = write(tmp_path / "c.jsonl", SHORT)
    base = ["-i", "openai", "-m", "m", "--conversations", str(path)]
    refusals = {
        "--workers 2": (["--workers", "2"], "--workers 2: conversations are sent from llm-perf's own process"),
        "rate": (["--request-rate", "2"], "runs closed loop"),
        "input": (["--input-data", str(path)], "give no --input-data"),
    }
    for extra, says in refusals.values():
        config = config_from_args(parser().parse_args(base + extra))
        with pytest.raises(TrtsweepError, match=says):
            config.levels(1)
    with pytest.raises(TrtsweepError, match="--history, --think-time-ms: only with --conversations"):
        config_from_args(parser().parse_args(["-m", "m", "--history", "recorded", "--think-time-ms", "5"]))
    with pytest.raises(SystemExit):
        parser().parse_args([*base, "--think-time-ms", "-1"])
    config = config_from_args(parser().parse_args([*base, "--workers", "1", "--concurrency", "4"]))
    assert [level.concurrency for level in config.levels(1)] == [4]


def test_the_sweep_command_line_reaches_llm_perf(tmp_path):
    params = {"url": "h:1", "protocol": "grpc", "model": "ensemble", "concurrency": [2], "streaming": True,
              "chat_template": False, "extra_inputs": {},
              "conversations": {"path": "/in/c.jsonl", "history": "recorded", "think_time_ms": 250,
                                "think_time_std_ms": 50.5}}  # fmt: skip
    args = parser().parse_args(command(params)[3:])
    spec = config_from_args(args).conversations
    assert spec == ConversationSpec(Path("/in/c.jsonl"), "recorded", (250.0, 50.5))
    assert isinstance(config_from_args(args), BenchmarkConfig) and args.concurrency == [2]


def test_the_live_count_of_a_conversation_level_counts_turns_of_its_conversations():
    from trtsweep.perf.cli import progress_line
    from trtsweep.perf.runner import Level

    level = Level(concurrency=2, num_requests=10, warmup_requests=1)
    assert progress_line(level, 7, conversations=False) == f"{level.label}: 7/11 requests"
    assert progress_line(level, 37, conversations=True) == f"{level.label}: 37 turns of 11 conversations"
    timed = Level(concurrency=2, num_requests=10, duration_s=30.0)
    assert progress_line(timed, 5, conversations=False) == f"{timed.label}: 5/? requests"
    assert progress_line(timed, 5, conversations=True) == f"{timed.label}: 5 turns"
