"""llm-perf --search slo: the bisection and the SLO check against a fake measure, the early stop's arithmetic, the
CLI's one-line errors, and whole searches against the zero server with a known capacity (--slots)."""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import free_ports
from trtsweep.errors import TrtsweepError
from trtsweep.perf import cli
from trtsweep.perf.search import EarlyStop, Search, SearchSpec, misses, sure_misses
from trtsweep.perf.stats import percentile
from trtsweep.serve.process import http_service

# timing windows of tens of milliseconds against paced stand-in servers: run alone (`make test`'s quiet step)
pytestmark = pytest.mark.quiet

TTFT_LIMIT = {"ttft_p99_ms": 1000.0}


def level(ttft_p99: float | None, succeeded: int = 10, requests: int = 10) -> dict[str, Any]:
    """A level summary as LevelStats writes it, as far as the search reads it."""
    return {"requests": requests, "succeeded": succeeded, "ttft_ms": None if ttft_p99 is None else {"p99": ttft_p99},
            "tpot_ms": {"p99": 10.0}, "e2e_ms": {"p99": 2000.0}, "request_throughput": 1.5,
            "output_token_throughput": 150.0}  # fmt: skip


def search(spec: SearchSpec, capacity: float) -> Search:
    """The whole search against a server whose TTFT p99 meets 1000 ms up to `capacity` and is 5000 ms above it."""
    s = Search(spec)
    while (value := s.next_value()) is not None:
        s.record(value, level(500.0 if value <= capacity else 5000.0), None)
    return s


def values(s: Search) -> list[float]:
    return [step.value for step in s.steps]


def test_a_concurrency_search_bisects_to_adjacent_levels():
    s = search(SearchSpec(slo=TTFT_LIMIT, maximum=16), capacity=4)
    assert values(s) == [1, 16, 8, 4, 6, 5]
    assert s.as_dict()["capacity"] == {"value": 4, "concurrency": 4, "request_rate": 1.5,
                                       "output_token_throughput": 150.0}  # fmt: skip
    assert s.bound() == "tight"
    s = search(SearchSpec(slo=TTFT_LIMIT, maximum=64), capacity=37)
    assert values(s) == [1, 64, 32, 48, 40, 36, 38, 37] and s.bound() == "tight"  # the 8th level closes it


def test_the_saturating_level_meeting_the_slo_is_an_open_bound():
    s = search(SearchSpec(slo=TTFT_LIMIT, maximum=16), capacity=100)
    assert values(s) == [1, 16] and s.bound() == "open" and s.as_dict()["capacity"]["value"] == 16
    s = search(SearchSpec(slo=TTFT_LIMIT, maximum=1), capacity=100)  # the synchronous level is the saturating one
    assert values(s) == [1] and s.bound() == "open"


def test_a_spent_budget_is_an_open_bound():
    s = search(SearchSpec(slo=TTFT_LIMIT, maximum=64, max_levels=4), capacity=37)
    assert values(s) == [1, 64, 32, 48] and s.bound() == "open" and s.as_dict()["capacity"]["value"] == 32


def test_a_failed_synchronous_level_ends_the_search_without_capacity():
    s = search(SearchSpec(slo=TTFT_LIMIT, maximum=64), capacity=0)
    out = s.as_dict()
    assert values(s) == [1] and out["capacity"] is None and out["bound"] == "none"
    assert s.lines()[-1] == "capacity: none (bound none): no level met the SLO"


def test_a_hint_that_still_brackets_the_capacity_is_done_in_two_levels():
    s = search(SearchSpec(slo=TTFT_LIMIT, maximum=64, hint=(37, 38)), capacity=37)
    assert values(s) == [37, 38] and s.bound() == "tight"


def test_a_hint_off_the_capacity_goes_on_from_what_it_measured():
    # the longer level carries less: the hinted capacity misses, so down to the synchronous level and bisect
    s = search(SearchSpec(slo=TTFT_LIMIT, maximum=64, hint=(37, 38)), capacity=30)
    assert values(s) == [37, 1, 19, 28, 32, 30, 31] and s.capacity().value == 30 and s.bound() == "tight"
    # it carries more: past the hint's failed level to the saturating one, then bisect
    s = search(SearchSpec(slo=TTFT_LIMIT, maximum=64, hint=(37, 38)), capacity=50)
    assert values(s)[:3] == [37, 38, 64] and s.capacity().value == 50 and s.bound() == "tight"
    s = search(SearchSpec(slo=TTFT_LIMIT, maximum=64, hint=(37, 38)), capacity=0)
    assert values(s) == [37, 1] and s.bound() == "none"


@pytest.mark.parametrize("hint", [(38, 37), (0.5, 2), (37, 65), (3.5, 4)])
def test_a_hint_outside_the_search_is_refused(hint):
    with pytest.raises(TrtsweepError, match="--search-hint: expected MET,FAILED"):
        SearchSpec(slo=TTFT_LIMIT, maximum=64, hint=hint)


def test_a_request_rate_search_bisects_geometrically_to_within_5_percent():
    spec = SearchSpec(variable="request_rate", slo=TTFT_LIMIT, maximum=128, max_levels=10)
    s = search(spec, capacity=37.5)
    assert values(s)[:3] == [2.0, 128, 16.0]  # max / 64, max, then the geometric mean
    best = s.capacity()
    assert best is not None and s.bound() == "tight" and len(s.steps) == 9
    failed = min(v for v in values(s) if v > best.value)
    assert best.value <= 37.5 < failed <= best.value * 1.05
    assert s.as_dict()["capacity"]["concurrency"] is None


def test_a_level_meets_every_limit_given_and_unmeasured_numbers_miss():
    slo = {"ttft_p99_ms": 1000.0, "tpot_p99_ms": 5.0, "e2e_p99_ms": 2000.0, "min_success_rate": 0.99}
    assert misses(slo, level(1523.4, succeeded=9)) == ["TTFT p99 1523 ms > 1000 ms", "TPOT p99 10 ms > 5 ms",
                                                        "success rate 0.9 < 0.99"]  # fmt: skip
    assert misses({"ttft_p99_ms": 1000.0}, level(None)) == ["TTFT p99 not measured (limit 1000 ms)"]
    assert misses({"min_success_rate": 0.5}, {"requests": 0}) == ["success rate not measured (no request; limit 0.5)"]
    assert misses({"e2e_p99_ms": 2000.0, "min_success_rate": 1.0}, level(1.0)) == []  # limits are inclusive
    assert misses({}, {}) == []


def test_each_step_shows_its_p99_with_the_confidence_interval_against_the_limit():
    s = Search(SearchSpec(slo={"ttft_p99_ms": 1000.0, "tpot_p99_ms": 5.0, "min_success_rate": 0.5}))
    thin = {"p99": 10.0, "ci95": {"p99": [1.0, 12.0]}, "warnings": ["p99 rests on 0 samples beyond it"]}
    summary = {**level(812.0), "ttft_ms": {"p99": 812.0, "ci95": {"p99": [700.2, 951.0]}}, "tpot_ms": thin}
    step = s.record(4, summary, None)
    assert step.judged == ["TTFT p99 812 ms (95% CI 700-951) <= 1000 ms", "TPOT p99 10 ms (95% CI 1-12) > 5 ms, few "
                           "samples beyond the p99: the CI is the level's range"]  # fmt: skip
    assert s.lines()[0].endswith("[TTFT p99 812 ms (95% CI 700-951) <= 1000 ms; TPOT p99 10 ms (95% CI 1-12) > 5 ms, "
                                 "few samples beyond the p99: the CI is the level's range]")  # fmt: skip
    assert s.as_dict()["levels"][0]["judged"] == step.judged


def test_a_level_stopped_early_never_meets_the_slo():
    s = Search(SearchSpec(slo=TTFT_LIMIT))
    step = s.record(1, level(500.0), "2 of 10 requests over the TTFT p99 limit of 1000 ms: the level cannot meet it")
    assert not step.met and step.misses == [] and s.bound() == "none"


def test_sure_misses_is_the_fewest_samples_over_a_limit_that_always_sink_the_p99():
    limit = 1000.0
    for n in range(1, 400):
        k = sure_misses(n)
        # k over the limit sink the p99 even with the others as fast as can be
        assert percentile([0.0] * (n - k) + [limit + 1] * k, 0.99) > limit, n
        if k > 1:  # one fewer is not sure: the p99 may still meet the limit
            assert percentile([0.0] * (n - k + 1) + [limit + 1] * (k - 1), 0.99) <= limit, n
        if n % 100 == 0:
            assert k == n // 100 + 1  # the "more than floor((1 - q) * N)" where N(1 - q) is whole
    assert (sure_misses(50), sure_misses(10)) == (2, 2)  # where floor((1 - q) * N) + 1 would say 1


def test_early_stop_counts_latencies_and_failures():
    early = EarlyStop({"ttft_p99_ms": 1000.0, "e2e_p99_ms": 5000.0, "min_success_rate": 0.97}, 100)
    early.add(True, {"ttft": 1.5, "e2e": 2.0})
    early.add(True, {"ttft": None, "e2e": 6.0})
    early.add(False, {"ttft": None, "e2e": None})
    assert not early.stopped()
    early.add(True, {"ttft": 1.2, "e2e": 2.0})
    assert early.reason == "2 of 100 requests over the TTFT p99 limit of 1000 ms: the level cannot meet it"
    early = EarlyStop({"min_success_rate": 0.97}, 100)
    for _ in range(3):
        early.add(False, {})
    assert not early.stopped()  # 97 of 100 may still succeed
    early.add(False, {})
    assert early.reason == "4 of 100 requests failed: the success rate cannot reach 0.97"
    early = EarlyStop(TTFT_LIMIT, None)  # a closed loop for --duration: its size is unknown
    for _ in range(50):
        early.add(True, {"ttft": 9.0})
    assert not early.stopped()


@pytest.mark.parametrize(
    ("argv", "error"),
    [
        (["--search", "slo", "--concurrency", "1,2"], "--search chooses the levels itself: give no --concurrency"),
        (["--search", "slo", "--search-variable", "request_rate"], "needs --search-max"),
        (["--search-slo", "ttft_p99_ms=5", "--search-max", "8"], "--search-slo, --search-max: only with --search slo"),
        (["--search", "slo", "--search-max", "7.5"], "the highest concurrency must be an integer >= 1, got 7.5"),
    ],
)
def test_search_options_that_mean_nothing_are_one_line_errors(argv, error, tmp_path, capsys):
    data = tmp_path / "p.jsonl"
    data.write_text('{"input": "hi"}\n')
    assert cli.main(["-m", "m", "--input-data", str(data), *argv]) == 2
    err = capsys.readouterr().err
    assert err == f"llm-perf: error: {err.removeprefix('llm-perf: error: ').strip()}\n" and error in err


def test_the_search_slo_keys_are_the_sweeps():
    assert cli.search_slo("ttft_p99_ms=1000,tpot_p99_ms=50,e2e_p99_ms=20000,min_success_rate=0.99") == {
        "ttft_p99_ms": 1000.0, "tpot_p99_ms": 50.0, "e2e_p99_ms": 20000.0, "min_success_rate": 0.99}  # fmt: skip
    for bad in ("ttft_ms=5", "ttft_p99_ms=fast", "min_success_rate=2", "e2e_p99_ms=-1"):
        with pytest.raises(argparse.ArgumentTypeError, match=r"SLO|key=number"):
            cli.search_slo(bad)


# the zero server: TTFT = first_ms, a request holds its slot for first_ms + (chunks - 1) * gap_ms
@contextlib.contextmanager
def zero_server(slots: int, first_ms: float, gap_ms: float, chunks: int = 6) -> Iterator[str]:
    (port,) = free_ports(1)
    cmd = [sys.executable, "-m", "trtsweep.perf.zeroserver", "--port", str(port), "--chunks", str(chunks),
           "--first-ms", str(first_ms), "--gap-ms", str(gap_ms), "--slots", str(slots)]  # fmt: skip
    with http_service(cmd, f"http://127.0.0.1:{port}/health", 30):
        yield f"127.0.0.1:{port}"


def llm_perf(url: str, tmp_path: Path, *argv: str) -> dict[str, Any]:
    """Run llm-perf's search against `url`; its summary JSON (whose search the profile export has too)."""
    data = tmp_path / "p.jsonl"
    data.write_text(json.dumps({"input": "hi", "output": "hello"}) + "\n")
    export = tmp_path / "perf.json"
    rc = cli.main(["-u", url, "-i", "openai", "--endpoint", "completions", "-m", "zero", "--input-data", str(data),
                   "--max-tokens", "6", "--profile-export-file", str(export),
                   "--search", "slo", *argv])  # fmt: skip
    assert rc == 0
    summary = json.loads((tmp_path / "perf.summary.json").read_text())
    assert json.loads(export.read_text())["search"] == summary["search"]
    return summary


def test_the_search_finds_the_known_concurrency_capacity(tmp_path, capsys):
    """4 slots of 200 ms: up to concurrency 4 TTFT is 100 ms; above it a request waits a whole request time (TTFT
    300 ms), so a limit of 200 ms leaves the client 100 ms either way on a busy machine."""
    with zero_server(slots=4, first_ms=100, gap_ms=20) as url:
        summary = llm_perf(url, tmp_path, "--num-requests", "16", "--search-max", "16",
                              "--search-slo", "ttft_p99_ms=200,min_success_rate=0.99")  # fmt: skip
    search = summary["search"]
    assert [lv["value"] for lv in search["levels"]] == [1, 16, 8, 4, 6, 5]  # 6 levels of the budget of 8
    assert search["capacity"]["value"] == 4 and search["capacity"]["concurrency"] == 4 and search["bound"] == "tight"
    assert search["budget_levels"] == 8 and search["variable"] == "concurrency"
    assert search["slo"] == {"ttft_p99_ms": 200.0, "min_success_rate": 0.99}
    assert set(search["capacity"]) == {"value", "concurrency", "request_rate", "output_token_throughput"}
    assert search["capacity"]["request_rate"] == pytest.approx(20.0, rel=0.2)  # 4 slots / 0.2 s
    for step in search["levels"]:
        assert set(step) == {"value", "met", "misses", "stopped_early", "request_throughput",
                             "output_token_throughput", "judged"}  # fmt: skip
        assert step["met"] == (step["value"] <= 4)
        assert step["judged"][0].startswith("TTFT p99 ") and "(95% CI " in step["judged"][0]
        assert step["met"] or step["misses"][0].startswith("TTFT p99 ")
    # every measured level is a level of the export, in the order measured
    assert [lv["concurrency"] for lv in summary["levels"]] == [1, 16, 8, 4, 6, 5]
    assert len((tmp_path / "perf.csv").read_text().splitlines()) == 7
    out = capsys.readouterr().out
    assert "search step 4: concurrency 4: met the SLO" in out
    assert out.rstrip().splitlines()[-1].startswith("capacity: concurrency 4 (bound tight): ")


def test_a_search_whose_maximum_meets_the_slo_is_open(tmp_path):
    with zero_server(slots=8, first_ms=40, gap_ms=8) as url:
        summary = llm_perf(url, tmp_path, "--num-requests", "8", "--search-max", "4",
                              "--search-slo", "ttft_p99_ms=200")  # fmt: skip
    search = summary["search"]
    assert [lv["value"] for lv in search["levels"]] == [1, 4]
    assert search["capacity"]["value"] == 4 and search["bound"] == "open"


def test_a_server_too_slow_at_concurrency_1_has_no_capacity(tmp_path):
    with zero_server(slots=0, first_ms=300, gap_ms=1) as url:
        summary = llm_perf(url, tmp_path, "--num-requests", "8", "--search-slo", "ttft_p99_ms=100")
    search = summary["search"]
    assert search["capacity"] is None and search["bound"] == "none" and len(search["levels"]) == 1
    assert search["levels"][0]["stopped_early"].startswith("2 of 8 requests over the TTFT p99 limit of 100 ms")


def test_an_over_saturated_level_stops_early(tmp_path, capsys):
    """2 slots, concurrency 16: the 3rd and 4th requests wait a whole request time; with 24 requests the p99 is lost
    at the 2nd of them, when 18 have been sent."""
    with zero_server(slots=2, first_ms=60, gap_ms=12) as url:
        summary = llm_perf(url, tmp_path, "--num-requests", "24", "--search-max", "16", "--search-max-levels", "2",
                              "--search-slo", "ttft_p99_ms=120")  # fmt: skip
    saturated = summary["levels"][1]
    reason = "2 of 24 requests over the TTFT p99 limit of 120 ms: the level cannot meet it"
    assert saturated["concurrency"] == 16 and saturated["summary"]["stopped_early"] == reason
    assert saturated["summary"]["requests"] < 24 and saturated["summary"]["failed"] == 0  # in flight: ended
    assert summary["search"]["levels"][1]["stopped_early"] == reason and summary["search"]["bound"] == "open"
    assert f"llm-perf: concurrency 16: stopped early: {reason}" in capsys.readouterr().err


def test_a_request_rate_search_finds_the_known_rate_within_5_percent(tmp_path):
    """4 slots of 100 ms serve 40 req/s. Constant arrivals below that never wait (TTFT 50 ms); above it the backlog
    grows, at 1.05 x by 0.05 s of waiting a second, so 1.5 s levels with an 80 ms TTFT limit tell rates 5% apart."""
    with zero_server(slots=4, first_ms=50, gap_ms=10) as url:
        summary = llm_perf(url, tmp_path, "--search-variable", "request_rate", "--search-max", "64",
                           "--search-max-levels", "10", "--duration", "1.5", "--arrival", "constant",
                           "--search-slo", "ttft_p99_ms=80")  # fmt: skip
    search = summary["search"]
    assert [lv["value"] for lv in search["levels"]][:3] == [1.0, 64, 8.0] and len(search["levels"]) <= 10
    # every measured level names its rate in the export, in the order measured (not only the search's steps)
    assert [lv["request_rate"] for lv in summary["levels"]] == [lv["value"] for lv in search["levels"]]
    assert all(lv["concurrency"] is None and lv["arrival"] == "constant" for lv in summary["levels"])
    assert search["bound"] == "tight" and search["capacity"]["concurrency"] is None
    assert search["capacity"]["value"] == pytest.approx(40.0, rel=0.05)


def test_the_console_table_of_listed_rate_levels_names_their_rates(tmp_path, capsys):
    """The fixed --request-rate path: the console table labels a level by its rate (the CSV row has none)."""
    data = tmp_path / "p.jsonl"
    data.write_text('{"input": "hi"}\n')
    with zero_server(slots=0, first_ms=0, gap_ms=0) as url:
        rc = cli.main(["-u", url, "-i", "openai", "--endpoint", "completions", "-m", "zero", "--input-data", str(data),
                       "--max-tokens", "2", "--request-rate", "50", "--num-requests", "4"])  # fmt: skip
    assert rc == 0 and capsys.readouterr().out.splitlines()[1].startswith("50/s     4/4 ")
