"""Synthetic prompts' lengths (issue 26): drawn from a distribution (normal, lognormal, uniform, fixed; today's
MEAN[,STD] still normal) or taken from a prompts file's real (input, output) pairs, the exports naming the source."""

from __future__ import annotations

import json
import math
import random
import statistics
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from trtsweep.errors import TrtsweepError
from trtsweep.perf import cli, export
from trtsweep.perf.dataset import Lengths, SyntheticSpec, parse_lengths, synthetic
from trtsweep.perf.levels import LevelReport
from trtsweep.perf.runner import Level
from trtsweep.perf.spool import RequestLog, Spool
from trtsweep.perf.tokenizer import Tokenizer

N = 20_000


@pytest.fixture(scope="module")
def tokenizer(demo_model: Any) -> Tokenizer:
    return Tokenizer(str(demo_model.hf_dir))


def draws(spec: str, n: int = N) -> list[int]:
    rng = random.Random(11)
    lengths = parse_lengths(spec)
    return [lengths.draw(rng) for _ in range(n)]


@pytest.mark.parametrize(
    ("text", "parsed"),
    [("512,64", Lengths("normal", 512, 64)), ("512", Lengths("normal", 512, 0)),
     ("normal:512,64", Lengths("normal", 512, 64)), ("lognormal:300,0.5", Lengths("lognormal", 300, 0.5)),
     ("uniform:16,1024", Lengths("uniform", 16, 1024)), ("fixed:128", Lengths("fixed", 128))],
)  # fmt: skip
def test_every_form_parses_and_prints_as_its_flag_writes_it(text: str, parsed: Lengths) -> None:
    assert parse_lengths(text) == parsed
    assert parse_lengths(str(parsed)) == parsed


def test_samples_follow_their_distribution() -> None:
    normal = draws("normal:512,64")
    assert abs(statistics.fmean(normal) - 512) < 2 and abs(statistics.stdev(normal) - 64) < 2
    lognormal = draws("lognormal:300,0.5")
    assert abs(statistics.median(lognormal) - 300) < 6
    assert abs(statistics.fmean(lognormal) - 300 * math.exp(0.5**2 / 2)) < 6  # median * exp(sigma^2 / 2)
    uniform = draws("uniform:16,1024")
    assert (min(uniform), max(uniform)) == (16, 1024) and abs(statistics.fmean(uniform) - 520) < 8
    assert set(draws("fixed:128", 100)) == {128}
    assert min(draws("normal:2,5")) == 1  # clipped to one token


@pytest.mark.parametrize(
    ("flag", "value", "message"),
    [("--synthetic-input-tokens", "gamma:1,2", "unknown distribution 'gamma'"),
     ("--synthetic-input-tokens", "lognormal:300", "expected lognormal as MEDIAN>=1,SIGMA>=0, got 'lognormal:300'"),
     ("--synthetic-output-tokens", "uniform:9,3", "expected uniform as integers 1<=LO<=HI"),
     ("--synthetic-output-tokens", "fixed:2.5", "expected fixed as an integer N>=1"),
     ("--synthetic-input-tokens", "0,4", "expected normal as MEAN>=1[,STD>=0]"),
     ("--synthetic-input-tokens", "normal:x", "expected normal as MEAN>=1[,STD>=0]")],
)  # fmt: skip
def test_a_bad_spec_is_one_line_naming_the_flag(
    flag: str, value: str, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit):
        cli.parser().parse_args(["-u", "h:1", "-m", "m", flag, value])
    (line,) = [x for x in capsys.readouterr().err.splitlines() if "error:" in x]
    assert f"argument {flag}: " in line and message in line


def prompts_file(path: Path, pairs: list[tuple[str, str]]) -> Path:
    path.write_text("".join(json.dumps({"input": i, "output": o}, ensure_ascii=False) + "\n" for i, o in pairs))
    return path


def test_lengths_from_a_file_are_its_pairs_and_the_prompts_have_them(tokenizer: Tokenizer, tmp_path: Path) -> None:
    rng = random.Random(2)
    words = ["shipping", "takes", "two", "days", "東京", "営業", "price", "?"]
    text = lambda most: " ".join(rng.choices(words, k=rng.randrange(1, most)))  # noqa: E731
    pairs = [(text(60), text(30)) for _ in range(40)]
    pairs.append(("", "ok"))  # an empty input is a prompt of one token
    path = prompts_file(tmp_path / "p.jsonl", pairs)
    want = Counter((max(1, tokenizer.count(i)), tokenizer.count(o)) for i, o in pairs)
    records = synthetic(tokenizer, None, None, None, path, seed=4)
    assert Counter((r.extra["synthetic_input_tokens"], r.max_tokens) for r in records) == want
    assert all(tokenizer.count(r.input or "") == r.extra["synthetic_input_tokens"] for r in records)  # exact here
    twice = synthetic(tokenizer, 2 * len(pairs), None, None, path, seed=4)
    assert Counter((r.extra["synthetic_input_tokens"], r.max_tokens) for r in twice) == want + want
    assert synthetic(tokenizer, None, None, None, path, seed=4) == records  # seeded
    assert [r.max_tokens for r in synthetic(tokenizer, None, None, None, path, seed=5)] != [
        r.max_tokens for r in records
    ]


def test_synthetic_prompts_of_a_lognormal_have_its_median(tokenizer: Tokenizer) -> None:
    records = synthetic(tokenizer, 400, parse_lengths("lognormal:40,0.6"), parse_lengths("fixed:7"), seed=1)
    lengths = [tokenizer.count(r.input or "") for r in records]
    assert lengths == [r.extra["synthetic_input_tokens"] for r in records]
    assert abs(statistics.median(lengths) - 40) < 5 and {r.max_tokens for r in records} == {7}  # 3 std errors


@pytest.mark.parametrize(
    ("line", "message"),
    [({"input": "a b", "max_tokens": 3}, "p.jsonl:2: --synthetic-lengths-from needs a non-blank 'output'"),
     ({"input": "a b", "output": "  "}, "p.jsonl:2: --synthetic-lengths-from needs a non-blank 'output'"),
     ({"messages": [{"role": "user", "content": "hi"}], "output": "x"}, "p.jsonl:2: --synthetic-lengths-from needs an "
      "'input' text")],
)  # fmt: skip
def test_a_file_line_without_what_it_needs_is_one_line_naming_it(
    tokenizer: Tokenizer, tmp_path: Path, line: dict[str, Any], message: str
) -> None:
    path = tmp_path / "p.jsonl"
    path.write_text(json.dumps({"input": "x", "output": "y"}) + "\n" + json.dumps(line) + "\n")
    with pytest.raises(TrtsweepError) as caught:
        synthetic(tokenizer, None, None, None, path, seed=0)
    assert message in str(caught.value) and "\n" not in str(caught.value)


def config(*argv: str) -> Any:
    return cli.config_from_args(cli.parser().parse_args(["-u", "h:1", "-m", "m", *argv]))


def test_the_flags_make_the_spec_and_refuse_both_sources_at_once(tmp_path: Path) -> None:
    assert config("--synthetic-input-tokens", "512,64").synthetic == SyntheticSpec(
        None, Lengths("normal", 512, 64), Lengths("normal", 128), None
    )
    spec = config("--synthetic-lengths-from", "d.jsonl", "--num-prompts", "7").synthetic
    assert spec == SyntheticSpec(7, None, None, Path("d.jsonl"))
    with pytest.raises(TrtsweepError, match=r"^--synthetic-output-tokens: not with --synthetic-lengths-from"):
        config("--synthetic-lengths-from", "d.jsonl", "--synthetic-output-tokens", "fixed:9")


def test_the_exports_say_where_the_lengths_came_from(tmp_path: Path) -> None:
    files = export.paths(tmp_path / "perf.json")
    log = RequestLog(files["requests"])
    for argv, source in (
        (["--synthetic-input-tokens", "lognormal:512,0.5", "--synthetic-output-tokens", "uniform:1,64"],
         "input lognormal:512,0.5, output uniform:1,64"),
        (["--synthetic-lengths-from", "d.jsonl"], "file d.jsonl"),
    ):  # fmt: skip
        run = config("--profile-export-file", str(files["profile"]), *argv)
        report = LevelReport(Level(num_requests=1, concurrency=1), Spool(files["spool"]))
        export.write_all(files["profile"], run, [report], [], log, 0.0)
        summary = json.loads(files["summary"].read_text())
        assert summary["levels"][0]["length_source"] == source
        assert json.loads(files["profile"].read_text())["levels"][0]["length_source"] == source
    assert summary["config"]["synthetic"] == {"prompts": None, "input_tokens": None, "output_tokens": None,
                                              "lengths_from": "d.jsonl"}  # fmt: skip
    prompts = config("--input-data", "p.jsonl", "--profile-export-file", str(files["profile"]))
    export.write_all(files["profile"], prompts, [report], [], log, 0.0)
    assert "length_source" not in json.loads(files["summary"].read_text())["levels"][0]
    log.close()
