"""Multi-turn conversations: their file format, and sending them turn by turn.

A conversations file is JSON lines, one conversation per line (blank lines skipped), in either shape:

* ``{"conversation": [{"user": "...", "reference": "...", "max_tokens": 64}, ...], "system": "...", "id": "..."}``:
  each turn a user message, with an optional recorded answer (``reference``) and output budget (``max_tokens``);
  ``system`` and ``id`` optional;
* ``{"messages": [{"role": "system", ...}, {"role": "user", ...}, {"role": "assistant", ...}, ...], "id": "..."}``
  (OpenAI style): an optional system message first, then user and assistant messages alternating from a user
  message; each assistant message is the recorded answer of the user message before it (the last user message may
  have none).

A conversation's turns are sent in order, one at a time: turn k+1 is sent only after turn k's answer ended (and a
think time after it, drawn per conversation from a seeded normal distribution clipped at 0). Each turn's request
carries the history: the system message, every earlier turn's user message and answer (`history`: "served", the
server's own answer; "recorded", the turn's reference), then its own user message. A failed turn ends its
conversation: each turn after it is not sent, and is recorded as a failed request of error class `not_sent` (its
cause: the failed turn's error class), so the level's requests, failures and success rate count what its load would
have sent. A closed-loop level of concurrency C keeps C conversations in flight.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from trtsweep.errors import TrtsweepError
from trtsweep.perf.dataset import Record, json_lines
from trtsweep.perf.protocols.base import PreparedRequest, Protocol, RequestResult
from trtsweep.perf.runner import Claim, Level, StallWatch, attempt, counter, request_order, watching
from trtsweep.perf.stats import summarize

HISTORIES = ("served", "recorded")
NOT_SENT = "not_sent"  # the error class of a turn not sent because an earlier turn of its conversation failed

Messages = list[dict[str, str]]


@dataclass(frozen=True)
class Turn:
    user: str
    reference: str | None = None
    max_tokens: int | None = None


@dataclass(frozen=True)
class Conversation:
    index: int  # its place in the file (0-based, blank lines not counted)
    id: str  # its "id", else its line number
    turns: tuple[Turn, ...]
    system: str | None
    lineno: int
    first: int  # the flat index (record) of its first turn


@dataclass(frozen=True)
class ConversationSpec:
    """--conversations and its options."""

    path: Path
    history: str = "served"
    think_time_ms: tuple[float, float] = (0.0, 0.0)  # mean, standard deviation


def _text(where: str, what: str, value: object, optional: bool = False) -> str | None:
    if value is None and optional:
        return None
    if not isinstance(value, str):
        raise TrtsweepError(f"{where}: {what} must be a string, got {type(value).__name__}")
    return value


def _native(where: str, obj: dict[str, Any]) -> tuple[list[Turn], str | None]:
    turns = obj["conversation"]
    if not isinstance(turns, list) or not turns:
        raise TrtsweepError(f"{where}: 'conversation' must be a non-empty list of turns")
    out = []
    for k, turn in enumerate(turns):
        if not isinstance(turn, dict):
            raise TrtsweepError(f"{where}: turn {k} must be an object with 'user', got {type(turn).__name__}")
        unknown = set(turn) - {"user", "reference", "max_tokens"}
        if unknown:
            raise TrtsweepError(f"{where}: turn {k} has unknown keys {sorted(unknown)} (user, reference, max_tokens)")
        if "user" not in turn:
            raise TrtsweepError(f"{where}: turn {k} has no 'user' message")
        budget = turn.get("max_tokens")
        if budget is not None and (not isinstance(budget, int) or isinstance(budget, bool) or budget < 1):
            raise TrtsweepError(f"{where}: turn {k}: 'max_tokens' must be a positive integer, got {budget!r}")
        user = _text(where, f"turn {k}'s 'user'", turn["user"])
        reference = _text(where, f"turn {k}'s 'reference'", turn.get("reference"), optional=True)
        out.append(Turn(str(user), reference, budget))
    return out, _text(where, "'system'", obj.get("system"), optional=True)


def _openai(where: str, messages: object) -> tuple[list[Turn], str | None]:
    if not isinstance(messages, list) or not messages:
        raise TrtsweepError(f"{where}: 'messages' must be a non-empty list of {{role, content}}")
    for i, m in enumerate(messages):
        if not (isinstance(m, dict) and isinstance(m.get("role"), str) and isinstance(m.get("content"), str)):
            raise TrtsweepError(f"{where}: message {i} must be an object with string 'role' and 'content'")
    system = None
    if messages[0]["role"] == "system":
        system, messages = messages[0]["content"], messages[1:]
    turns: list[Turn] = []
    for i, m in enumerate(messages):
        want = "user" if i % 2 == 0 else "assistant"
        if m["role"] != want:
            raise TrtsweepError(
                f"{where}: message {i + (system is not None)} is {m['role']!r}, expected {want!r} (an optional system "
                "message first, then user and assistant alternating from a user message)"
            )
        if want == "user":
            turns.append(Turn(m["content"]))
        else:
            turns[-1] = Turn(turns[-1].user, m["content"])
    if not turns:
        raise TrtsweepError(f"{where}: 'messages' has no user message")
    return turns, system


def load_conversations(path: Path, history: str = "served") -> list[Conversation]:
    """Every conversation of the file; the first bad line raises TrtsweepError naming file, line and problem.
    `history` "recorded" needs a reference on every turn but the last (it is the history of the next one)."""
    if history not in HISTORIES:
        raise TrtsweepError(f"history must be one of {HISTORIES}, got {history!r}")
    out: list[Conversation] = []
    first = 0
    for lineno, obj in json_lines(path, "conversations"):
        where = f"{path}:{lineno}"
        if not isinstance(obj, dict):
            raise TrtsweepError(f"{where}: expected a JSON object, got {type(obj).__name__}")
        if ("conversation" in obj) == ("messages" in obj):
            raise TrtsweepError(f"{where}: a conversation needs exactly one of 'conversation' or 'messages'")
        if "conversation" in obj:
            turns, system = _native(where, obj)
        else:
            if "system" in obj:
                raise TrtsweepError(f"{where}: with 'messages', the system prompt is a first message of role system")
            turns, system = _openai(where, obj["messages"])
        ident = obj.get("id", str(lineno))
        if not isinstance(ident, str | int) or isinstance(ident, bool):
            raise TrtsweepError(f"{where}: 'id' must be a string or an integer, got {type(ident).__name__}")
        if history == "recorded":
            for k, turn in enumerate(turns[:-1]):
                if turn.reference is None:
                    raise TrtsweepError(f"{where}: turn {k} has no recorded answer, which history 'recorded' sends "
                                        "as the history of the next turn")  # fmt: skip
        out.append(Conversation(len(out), str(ident), tuple(turns), system, lineno, first))
        first += len(turns)
    if not out:
        raise TrtsweepError(f"{path}: no conversations (empty file)")
    return out


def turn_records(conversations: Sequence[Conversation]) -> list[Record]:
    """One record per turn, flat (conversation after conversation): what a turn's accuracy and budget are read
    from (its user message as the input, its recorded answer as the reference)."""
    return [
        Record(c.first + k, t.user, None, t.reference, t.max_tokens, {"conversation": c.id, "turn": k}, c.lineno)
        for c in conversations
        for k, t in enumerate(c.turns)
    ]


class SentTurn(NamedTuple):
    """A turn of the level: its conversation's run in the level (`session`), which conversation and turn, and its
    request (the prompt where it was rendered to send it); a turn not sent has none, and its cause (`not_sent`: the
    error class of the failed turn that ended its conversation)."""

    session: int
    conversation: int
    turn: int
    prompt: str | None
    messages: Messages
    not_sent: str | None = None


class ConversationRun:
    """Sends conversations level by level. `budgets`: each turn's output budget (by flat index); `render`: the chat
    template (None without a tokenizer); `chat`: the endpoint takes the message list (OpenAI chat), else the
    rendered prompt is sent. The turns of the current level, sent or not, are kept (`sent`, by seq) for its
    processing."""

    def __init__(self, conversations: Sequence[Conversation], budgets: Sequence[int], spec: ConversationSpec,
                 seed: int, render: Callable[[Messages], str] | None, chat: bool) -> None:  # fmt: skip
        if not chat and render is None:
            raise TrtsweepError("--conversations: grpc, http and the completions endpoint are sent each turn's history "
                                "rendered with the chat template: give --tokenizer-path")  # fmt: skip
        self.conversations, self.budgets, self.spec, self.seed = conversations, budgets, spec, seed
        self.render, self.chat = render, chat
        self.order = request_order(len(conversations), seed)
        self.sent: dict[int, SentTurn] = {}
        self.next_seq = 0
        # recorded history: every prompt is known now, so none is rendered while the level runs
        self.rendered: dict[int, str] = {}
        if spec.history == "recorded" and not chat and render is not None:
            for c in conversations:
                for k in range(len(c.turns)):
                    self.rendered[c.first + k] = render(self.messages(c, k, [t.reference or "" for t in c.turns]))

    @staticmethod
    def messages(conversation: Conversation, turn: int, answers: Sequence[str]) -> Messages:
        """Turn `turn`'s message list: the system message, each earlier turn and its answer, its own user message."""
        out = [{"role": "system", "content": conversation.system}] if conversation.system is not None else []
        for k in range(turn):
            out.append({"role": "user", "content": conversation.turns[k].user})
            out.append({"role": "assistant", "content": answers[k]})
        return [*out, {"role": "user", "content": conversation.turns[turn].user}]

    def prompt(self, seq: int) -> str:
        """The prompt of the turn sent as `seq` in this level (for its input token count)."""
        sent = self.sent[seq]
        if sent.prompt is not None:
            return sent.prompt
        if self.render is not None:
            return self.render(sent.messages)
        return "\n".join(m["content"] for m in sent.messages)

    def think_times(self, session: int) -> random.Random:
        """The think times of a conversation's run: seeded by the run's seed and the session, whatever the timing."""
        return random.Random(f"think-time:{self.seed}:{session}")

    async def think(self, seconds: float) -> None:
        """Wait a think time."""
        await asyncio.sleep(seconds)

    def number(self, turn: SentTurn) -> int:
        """The next sequence number of the level, for `turn`."""
        seq, self.next_seq = self.next_seq, self.next_seq + 1
        self.sent[seq] = turn
        return seq

    def unsent(self, conv: Conversation, session: int, failed: RequestResult,
               sink: Callable[[RequestResult], None]) -> None:  # fmt: skip
        """Every turn after the failed one, each to `sink` as a request that failed without being sent (error class
        NOT_SENT), its cause the failed turn's error class."""
        cause, turn = str(failed.error_class), self.sent[failed.seq].turn
        for k in range(turn + 1, len(conv.turns)):
            seq = self.number(SentTurn(session, conv.index, k, None, [], cause))
            error = f"not sent: turn {turn} of its conversation failed ({cause})"
            sink(RequestResult(seq, conv.first + k, failed.warmup, error=error, error_class=NOT_SENT))

    async def conversation(self, protocol: Protocol, session: int, warmup: bool, watch: StallWatch | None,
                           sink: Callable[[RequestResult], None]) -> None:  # fmt: skip
        """Run one conversation, turn after turn, each sent once the answer before it ended (and the think time)."""
        conv = self.conversations[self.order[session % len(self.order)]]
        rng = self.think_times(session)
        mean, std = self.spec.think_time_ms
        answers: list[str] = []
        for k, turn in enumerate(conv.turns):
            if k and (mean or std):
                await self.think(max(0.0, rng.gauss(mean, std)) / 1e3)
            index = conv.first + k
            messages = self.messages(conv, k, answers)
            prompt = None if self.chat else self.rendered.get(index) or (self.render and self.render(messages))
            request = PreparedRequest(index, prompt or "", self.budgets[index], messages)
            seq = self.number(SentTurn(session, conv.index, k, prompt, messages))
            result = RequestResult(seq=seq, record_index=index, warmup=warmup)
            await attempt(protocol, request, result, watch, sink)
            if not result.ok:
                self.unsent(conv, session, result, sink)
                return
            answers.append(result.text if self.spec.history == "served" else turn.reference or "")

    async def closed(self, protocol: Protocol, watch: StallWatch | None, claim: Claim, width: int, warmup: bool,
                     sink: Callable[[RequestResult], None], deadline: float | None,
                     stop: Callable[[], bool]) -> None:  # fmt: skip
        """`width` conversations in flight, each followed by the next one `claim` hands out (a conversation once
        started runs to its end; none starts after the deadline or once `stop()` says so)."""

        async def lane() -> None:
            while (deadline is None or time.monotonic() < deadline) and not stop():
                if (session := claim()) is None:
                    return
                await self.conversation(protocol, session, warmup, watch, sink)

        await asyncio.gather(*(lane() for _ in range(width)))

    async def run_level(self, protocol: Protocol, level: Level, sink: Callable[[RequestResult], None],
                        stop: Callable[[], bool] = lambda: False) -> None:  # fmt: skip
        """The level's warm-up conversations, then its measured ones (`num_requests` counts conversations), at its
        concurrency."""
        if level.concurrency is None:
            raise TrtsweepError("--conversations runs closed loop: give --concurrency levels")
        self.sent.clear()
        self.next_seq = 0
        async with watching(protocol) as watch:
            warm = level.warmup_requests
            await self.closed(protocol, watch, counter(0, warm), min(level.concurrency, warm), True, sink, None,
                              lambda: False)  # fmt: skip
            count = level.planned_requests
            deadline = time.monotonic() + level.duration_s if level.duration_s else None
            end = warm + (10**9 if count is None else count)
            await self.closed(protocol, watch, counter(warm, end), min(level.concurrency, end - warm), False, sink,
                              deadline, stop)  # fmt: skip


class ConversationStats:
    """Per conversation of a level (measured ones): its turns sent, whether every turn succeeded, and its total time
    (first turn sent -> last turn's answer ended, think times included); and the level's turns not sent, by cause."""

    def __init__(self, turns_of: Callable[[int], int]) -> None:
        self.turns_of = turns_of  # conversation index -> its turns
        self.sessions: dict[int, list[int]] = {}  # session -> [conversation, turns ok, turns failed, first, last]
        self.not_sent: Counter[str] = Counter()

    def add(self, result: RequestResult, sent: SentTurn) -> None:
        if result.warmup:
            return
        s = self.sessions.setdefault(sent.session, [sent.conversation, 0, 0, 0, 0])
        if sent.not_sent is not None:
            self.not_sent[sent.not_sent] += 1
            return
        s[1 if result.ok else 2] += 1
        if result.sent_ns and (not s[3] or result.sent_ns < s[3]):
            s[3] = result.sent_ns
        s[4] = max(s[4], result.end_ns)

    def summary(self) -> dict[str, Any]:
        done = [s for s in self.sessions.values() if not s[2] and s[1] == self.turns_of(s[0])]
        turns = summarize([float(s[1] + s[2]) for s in self.sessions.values()])
        total = summarize([(s[4] - s[3]) / 1e9 for s in done])
        return {
            "conversations": len(self.sessions),
            "completed": len(done),
            "failed": len(self.sessions) - len(done),
            "turns_sent": turns.as_dict(1.0) if turns else None,
            "total_time_ms": total.as_dict(1000.0) if total else None,
        }

    def unsent(self) -> dict[str, int]:
        """The level's turns not sent (each counted as a failed request), by the error class of the failed turn
        that ended their conversation."""
        return dict(self.not_sent)
