"""llm-perf's post-processing of a level (issue 26): made faster, its files unchanged.

A fixed, seeded spool (two levels: one from llm-perf's own process, one from two worker shards; successes, failures
of every kind, warm-up, open-loop schedules, server token counts, empty and non-ASCII chunks, references to score)
is processed as `benchmark.run` processes a level: read back, per-request metrics and scores, the summary's
statistics, the request rows, then every export. The files must be those the code before the speed-up wrote:
the request log and the CSV byte for byte, the profile byte for byte from its levels on (the configuration before
them is not post-processing), the summary's levels value for value; the digests below are of that code's output.
"""

from __future__ import annotations

import hashlib
import json
import random
from pathlib import Path

import pytest

from trtsweep.perf import export
from trtsweep.perf.dataset import Record
from trtsweep.perf.levels import BenchmarkConfig, LevelReport
from trtsweep.perf.metrics import LevelStats, request_metrics
from trtsweep.perf.protocols import Endpoint
from trtsweep.perf.protocols.base import RequestResult
from trtsweep.perf.runner import Level
from trtsweep.perf.spool import RequestLog, Spool

# the levels' digests changed once since: each summary gained `tokens_per_chunk` and `accepted_tokens` (the client's
# acceptance), checked then to be the only difference (the summaries without those keys gave the digest before)
GOLDEN = {
    "requests": "8335ca1b793c826c958cdeae3af32339ff351ebb048d3c96170c58a2ed84a7c8",
    "csv": "6dd720b9b5dd7d5c94833dd6836c6d8a2d234843bd88ae1652fa9b97222f1034",
    "profile_levels": "a5a2b7ac71beccafc5376af72db1c2c91df289e7540f9126395820fd5f1965f4",
    "summary_levels": "bfce38867f7b6c0122087d4190ab0c6250163dd9be2e6f365c169f1c1575689b",
}
WORDS = ("alpha", "beta", "Tokyo", "東京", "我们", "naïve", "émoji 🙂", "x", "")
ERRORS = (
    ("connection", "connection refused"),
    ("timeout", "no chunk within 60 s (--stall-timeout)"),
    ("timeout", "no answer within 600 s"),
    ("cancelled", "the level ended"),
    ("server_error", "HTTP 500: overloaded"),
)
T0 = 7_000_000_000_000  # a perf_counter_ns() of a machine up for two hours


def records() -> list[Record]:
    refs = ["alpha beta", "", None, "東京 我们", "naïve x alpha", None, "beta", "émoji 🙂 Tokyo"]
    return [Record(i, f"prompt {i}", None, ref, None) for i, ref in enumerate(refs)]


def result(rng: random.Random, seq: int, warmup: bool, start: int, scheduled: bool) -> RequestResult:
    sent = start + rng.randrange(0, 3_000_000_000)
    out = RequestResult(seq, rng.randrange(8), warmup, scheduled_ns=sent - rng.randrange(0, 40_000_000) * scheduled)
    out.sent_ns = sent
    if rng.random() < 0.12:
        out.error_class, out.error = rng.choice(ERRORS)
        out.sent_ns = 0 if out.error_class == "connection" else sent
        return out
    t = sent + rng.randrange(1_000_000, 90_000_000)
    for _ in range(rng.randrange(0, 40)):
        t += rng.choice((50, 150, 1_250, 31_250, rng.randrange(1, 30_000_000)))  # ties of 0.1 us included
        out.chunk_ns.append(t)
        out.chunk_text.append(rng.choice(WORDS) + " " * rng.randrange(2))
    out.end_ns = t + rng.randrange(0, 2_000_000)
    if rng.random() < 0.3:
        out.server_output_tokens = len(out.chunk_ns) + rng.randrange(-1, 2)
        out.server_input_tokens = rng.randrange(1, 4000)
    return out


def write_spool(spool: Spool, rng: random.Random, shards: int, start: int, scheduled: bool) -> None:
    """About 400 requests, the first 8 warm-up; spread over `shards` worker shards (0: the spool itself)."""
    files = [spool.path.open("w")] if not shards else [spool.shard(i).open("w") for i in range(shards)]
    for seq in range(400):
        r = result(rng, seq, seq < 8, start, scheduled)
        files[seq % len(files)].write(json.dumps(vars(r), ensure_ascii=False) + "\n")
        spool.note(r.sent_ns)
    for file in files:
        file.close()


def process(tmp: Path) -> dict[str, Path]:
    """Two levels post-processed as benchmark.run's `finish` does, exported after each."""
    files = export.paths(tmp / "perf.json")
    data = records()
    config = BenchmarkConfig(endpoint=Endpoint(url="127.0.0.1:1", model="m"), protocol="http", input_data=tmp / "p",
                             concurrency=[4], slo={"ttft": 0.05, "e2e": 0.5}, export_file=files["profile"])  # fmt: skip
    log = RequestLog(files["requests"])
    count = lambda text: len(text.split())  # noqa: E731
    rng = random.Random(26)
    reports: list[LevelReport] = []
    origin: list[int] = []
    for index, (shards, scheduled) in enumerate(((0, False), (2, True))):
        level = Level(num_requests=400, concurrency=4 if not scheduled else None, request_rate=None if not scheduled
                      else 20.0, warmup_requests=8)  # fmt: skip
        spool = Spool(files["spool"])
        write_spool(spool, rng, shards, T0 + index * 10_000_000_000, scheduled)
        report = LevelReport(level, spool)
        reports.append(report)
        stats = LevelStats(config.slo)
        if not origin:
            origin.append(spool.first_sent)
        log.begin()
        for r in spool.results():
            m = request_metrics(r, f"prompt {r.record_index}", data[r.record_index].reference, count)
            stats.add(r, m)
            log.write(export.request_row(index, r, m, 16, origin[0]))
        log.end()
        spool.remove()
        report.summary = stats.summary()
        export.write_all(files["profile"], config, reports, data, log, 1.5)
    log.close()
    return files


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@pytest.fixture(scope="module")
def outputs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    files = process(tmp_path_factory.mktemp("post"))
    profile = files["profile"].read_bytes()
    summary = json.loads(files["summary"].read_text())
    return {
        "requests": digest(files["requests"].read_bytes()),
        "csv": digest(files["csv"].read_bytes()),
        "profile_levels": digest(profile[profile.index(b'"levels": [') :]),
        "summary_levels": digest(json.dumps(summary["levels"], sort_keys=True).encode()),
    }


@pytest.mark.parametrize("name", sorted(GOLDEN))
def test_exported_files_are_those_of_the_code_before_the_speed_up(outputs: dict[str, str], name: str) -> None:
    assert outputs[name] == GOLDEN[name]


def reference_ms(ns: int, t0: int) -> float:
    return round((ns - t0) / 1e6, 4)


def test_ms_since_is_round_to_the_bit_ties_negatives_and_far_times_included() -> None:
    rng = random.Random(5)
    t0 = T0 + rng.randrange(10**9)
    deltas = [rng.randrange(0, 10**13) for _ in range(20_000)]
    deltas += [100 * k + 50 for k in range(0, 2_000_000, 997)]  # exact ties of 0.1 us
    deltas += [-1, -30, -50, -70, -12_345_678, 0, 1, 49, 51, 99, 31_250, export.MS_EXACT - 1, export.MS_EXACT + 7]
    for delta in deltas:
        got, want = export.ms_since(t0 + delta, t0), reference_ms(t0 + delta, t0)
        assert (got, str(got)) == (want, str(want)), delta


def test_ms_list_of_a_long_response_is_the_same_floats() -> None:
    rng = random.Random(6)
    t0 = T0
    stamps = sorted(T0 + rng.randrange(-200, 10**11) for _ in range(3 * export.VECTOR_FROM))
    stamps[5:9] = [T0 + 31_250, T0 + 150, T0 - 30, T0 + export.MS_EXACT + 50]  # ties, just before t0, far
    for part in (stamps, stamps[: export.VECTOR_FROM - 1]):
        got = export.ms_list(part, t0)
        assert [str(v) for v in got] == [str(reference_ms(t, t0)) for t in part]


@pytest.mark.parametrize("size", [1, 97, 4096, 1 << 20])
def test_request_log_joins_a_level_rows_in_blocks_of_any_size(tmp_path: Path, size: int) -> None:
    log = RequestLog(tmp_path / "r.jsonl")
    rows = [[{"i": i, "text": "東京\n🙂" * (i % 7), "level": level} for i in range(300)] for level in range(2)]
    for level_rows in rows:
        log.begin()
        for row in level_rows:
            log.write(row)
        log.end()
    for level in range(2):
        assert "".join(log.joined(level, size)) == ",\n".join(log.lines(level))
        assert json.loads("[" + "".join(log.joined(level, size)) + "]") == rows[level]
    log.close()
