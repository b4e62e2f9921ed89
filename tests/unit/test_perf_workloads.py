"""llm-perf's workloads with the demo model's tokenizer: shared prefixes of an exact token count that lead every
prompt token for token, Mooncake and Azure traces turned into requests (equal hash ids, equal prefix blocks), replay
levels at the trace's own times or scaled, and the sweep's fields checked at plan time and shown in results."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import PROMPTS
from trtsweep.errors import TrtsweepError
from trtsweep.perf import cli
from trtsweep.perf.benchmark import load_records, prepare
from trtsweep.perf.dataset import load_jsonl
from trtsweep.perf.protocols.base import PreparedRequest
from trtsweep.perf.tokenizer import Tokenizer
from trtsweep.perf.workloads import PREFIX_SEPARATOR, TraceSpec, load_trace, shared_prefixes, trace_order
from trtsweep.report.results_table import workload
from trtsweep.sweep import planning

MOONCAKE = [  # Mooncake's published shape; block size 16 here
    {"timestamp": 0, "input_length": 40, "output_length": 7, "hash_ids": [0, 1, 2]},
    {"timestamp": 250, "input_length": 37, "output_length": 3, "hash_ids": [0, 1, 3]},
    {"timestamp": 250, "input_length": 20, "output_length": 5, "hash_ids": [0, 4]},
    {"timestamp": 1000, "input_length": 10, "output_length": 2, "hash_ids": [5]},
]
AZURE = "TIMESTAMP,ContextTokens,GeneratedTokens\n" + "\n".join(
    ["2023-11-16 18:15:46.6805900,30,5", "2023-11-16 18:15:50.9951690,12,0", "2023-11-16 18:15:47.1000000,25,9"]
)


@pytest.fixture(scope="module")
def tokenizer(demo_model: Any) -> Tokenizer:
    return Tokenizer(str(demo_model.hf_dir))


def ids(tokenizer: Tokenizer, text: str) -> list[int]:
    return list(tokenizer.encode(text))


def requests(tokenizer: Tokenizer, *argv: str) -> tuple[list[PreparedRequest], list[float] | None]:
    config = cli.config_from_args(cli.parser().parse_args(["-m", "m", "--tokenizer-path", "unused", *argv]))
    records, times = load_records(config, tokenizer)
    return prepare(records, config, tokenizer), times


def mooncake(tmp_path: Path, rows: list[dict[str, Any]] = MOONCAKE) -> Path:
    path = tmp_path / "trace.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_shared_prefixes_are_exact_token_counts_and_lead_every_prompt_token_for_token(tokenizer):
    sent, _ = requests(tokenizer, "--input-data", str(PROMPTS), "--shared-prefix-count", "3",
                       "--shared-prefix-tokens", "64")  # fmt: skip
    prefixes = shared_prefixes(tokenizer, 3, 64, seed=0)
    assert [len(ids(tokenizer, p)) for p in prefixes] == [64, 64, 64]
    assert len({ids(tokenizer, p)[0] for p in prefixes}) == 3  # distinct from their first token on
    records = load_jsonl(PROMPTS)
    assert len(sent) == len(records) >= 6
    for request, record in zip(sent, records, strict=True):
        prefix = prefixes[record.index % 3]
        prompt = ids(tokenizer, request.prompt)
        assert prompt[:64] == ids(tokenizer, prefix), "the prefix's tokens are the prompt's first tokens"
        own = ids(tokenizer, PREFIX_SEPARATOR + str(record.input))
        assert prompt[64:] == own and len(prompt) == 64 + len(own)  # the record's own part follows, varying
        assert request.prefix_tokens == 64
    assert len({request.prompt for request in sent}) == len(sent)


def test_chat_records_and_synthetic_prompts_take_the_prefix_too(tokenizer, tmp_path):
    data = tmp_path / "chat.jsonl"
    data.write_text(json.dumps({"messages": [{"role": "user", "content": "Hi"}]}) + "\n"
                    + json.dumps({"messages": [{"role": "system", "content": "Be brief."},
                                               {"role": "user", "content": "Hello"}]}) + "\n")  # fmt: skip
    chat, _ = requests(tokenizer, "--input-data", str(data), "--shared-prefix-count", "1",
                       "--shared-prefix-tokens", "20", "--chat-template")  # fmt: skip
    (prefix,) = shared_prefixes(tokenizer, 1, 20, seed=0)
    assert chat[0].messages is not None and chat[0].messages[0] == {"role": "system", "content": prefix}
    assert chat[1].messages is not None and chat[1].messages[0]["content"] == prefix + PREFIX_SEPARATOR + "Be brief."
    assert all(prefix in r.prompt for r in chat)  # rendered through the chat template
    synthetic, _ = requests(tokenizer, "--synthetic-input-tokens", "30,5", "--num-prompts", "6",
                            "--shared-prefix-count", "2", "--shared-prefix-tokens", "48")  # fmt: skip
    two = shared_prefixes(tokenizer, 2, 48, seed=0)
    for i, request in enumerate(synthetic):
        assert ids(tokenizer, request.prompt)[:48] == ids(tokenizer, two[i % 2])
    assert len({r.prompt.removeprefix(two[i % 2]) for i, r in enumerate(synthetic)}) == 6  # own parts vary


def test_a_mooncake_trace_makes_prompts_of_its_lengths_with_equal_blocks_for_equal_hash_ids(tokenizer, tmp_path):
    sent, times = requests(tokenizer, "--trace", str(mooncake(tmp_path)), "--trace-block-size", "16")
    assert times == [0.0, 0.25, 0.25, 1.0]
    prompts = [ids(tokenizer, r.prompt) for r in sent]
    assert [len(p) for p in prompts] == [r["input_length"] for r in MOONCAKE]
    assert [r.max_tokens for r in sent] == [r["output_length"] for r in MOONCAKE]
    assert prompts[0][:32] == prompts[1][:32] and prompts[0][32] != prompts[1][32]  # hash ids 0, 1 shared; 2 != 3
    assert prompts[2][:16] == prompts[0][:16] and prompts[2][16] != prompts[0][16]  # hash id 0 only
    assert prompts[3][0] != prompts[0][0]
    # shared prefix tokens: leading blocks another row also has (0 and 1; 0; none)
    assert [r.prefix_tokens for r in sent] == [32, 32, 16, 0]


def test_an_azure_trace_is_read_by_its_columns_and_times(tokenizer, tmp_path):
    path = tmp_path / "AzureLLMInferenceTrace_conv.csv"
    path.write_text(AZURE)
    sent, times = requests(tokenizer, "--trace", str(path))
    assert times == pytest.approx([0.0, 0.4194100, 4.3145790], abs=1e-6)  # sorted by arrival
    assert [len(ids(tokenizer, r.prompt)) for r in sent] == [30, 25, 12]
    assert [r.max_tokens for r in sent] == [5, 9, 1]  # 0 generated tokens: a budget of 1
    assert [r.prefix_tokens for r in sent] == [0, 0, 0]


@pytest.mark.parametrize(
    ("content", "name", "error"),
    [
        ('{"timestamp": 0, "input_length": 5, "output_length": 1}\n{"timestamp": -1, "input_length": 5}\n',
         "t.jsonl", "t.jsonl:2: 'timestamp' must be milliseconds >= 0"),
        ('{"timestamp": 0, "input_length": 0, "output_length": 1}\n', "t.jsonl", "t.jsonl:1: 'input_length'"),
        ('{"timestamp": 0, "input_length": 3, "output_length": 1, "hash_ids": ["a"]}\n', "t.jsonl", "'hash_ids'"),
        ("TIMESTAMP,ContextTokens\n1,2\n", "t.csv", "t.csv:1: an Azure trace needs the columns"),
        ("TIMESTAMP,ContextTokens,GeneratedTokens\nyesterday,2,3\n", "t.csv", "t.csv:2: TIMESTAMP must be"),
        ("", "t.jsonl", "no requests (empty trace)"),
    ],
)  # fmt: skip
def test_a_bad_trace_is_one_error_naming_file_and_line(tmp_path, content, name, error):
    (tmp_path / name).write_text(content)
    with pytest.raises(TrtsweepError, match="^" + str(tmp_path).replace("\\", "\\\\")) as raised:
        load_trace(TraceSpec(tmp_path / name))
    assert error in str(raised.value)


def test_replay_levels_follow_the_trace_times_scaled_by_each_speed(tmp_path):
    args = cli.parser().parse_args(["-m", "m", "--trace", str(mooncake(tmp_path)), "--replay-speed", "1,4",
                                    "--max-concurrency", "3"])  # fmt: skip
    config = cli.config_from_args(args)
    slow, fast = config.levels(4, [0.0, 0.25, 0.25, 1.0])
    assert (slow.label, fast.label) == ("trace x1", "trace x4")
    assert slow.offsets == (0.0, 0.25, 0.25, 1.0) and fast.offsets == (0.0, 0.0625, 0.0625, 0.25)
    assert (slow.arrival, slow.max_concurrency, slow.planned_requests) == ("trace", 3, 4)
    assert fast.request_rate == pytest.approx(12.0)  # the mean: 3 gaps in 0.25 s
    (first,) = cli.config_from_args(cli.parser().parse_args([*vars_argv(tmp_path), "--num-requests", "2"])).levels(
        2, [0.0, 0.25, 0.25, 1.0]
    )
    assert first.offsets == (0.0, 0.25)  # --num-requests: the trace's first rows
    timed = cli.config_from_args(cli.parser().parse_args([*vars_argv(tmp_path), "--duration", "0.5"]))
    assert timed.levels(4, [0.0, 0.25, 0.25, 1.0])[0].planned_requests == 3  # the rows due within it
    # the warm-up sends the first rows, then the replay starts again at row 0
    assert trace_order(4, 2) == [0, 1, 0, 1, 2, 3]


def vars_argv(tmp_path: Path) -> list[str]:
    return ["-m", "m", "--trace", str(tmp_path / "trace.jsonl")]


@pytest.mark.parametrize(
    ("argv", "error"),
    [
        (["--replay-speed", "2"], "--replay-speed: only with --trace"),
        (["--trace-block-size", "64"], "--trace-block-size: only with --trace"),
        (["--shared-prefix-count", "2"], "--shared-prefix-count and --shared-prefix-tokens go together"),
        (["--trace", "T", "--concurrency", "4"], "--trace replays the trace's times"),
        (["--trace", "T", "--input-data", "x.jsonl"], "--trace makes its own prompts"),
        (["--trace", "T", "--shared-prefix-count", "1", "--shared-prefix-tokens", "4"], "not with --trace"),
    ],
)
def test_workload_options_that_mean_nothing_are_one_line_errors(tmp_path, capsys, argv, error):
    argv = [str(mooncake(tmp_path)) if a == "T" else a for a in argv]
    assert cli.main(["-m", "m", "-u", "127.0.0.1:9", *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and error in err, err


def sweep(**benchmark: Any) -> dict[str, Any]:
    return {"name": "w", "backend": "hf", "models": [{"repo_id": "Org/M-1B", "name": "m"}], "precisions": ["float32"],
            "parallelism": [{"tp": 1, "pp": 1}], "max_batch_sizes": [4], "lengths": [{"input": 512, "output": 64}],
            "streaming": [True], "benchmark": {"input_data": str(PROMPTS), **benchmark}}  # fmt: skip


def test_the_sweeps_workloads_are_checked_at_plan_time_and_carried_only_when_given(tmp_path):
    (plain,) = planning.expand(sweep())
    assert "trace" not in plain["benchmark"] and "shared_prefix" not in plain["benchmark"]  # the same hashes as before
    (prefixed,) = planning.expand(sweep(shared_prefix={"count": 2, "tokens": 100}))
    assert prefixed["benchmark"]["shared_prefix"] == {"count": 2, "tokens": 100}
    path = mooncake(tmp_path)
    (replay,) = planning.expand(sweep(trace={"path": "trace.jsonl", "speed": 2}), base_dir=tmp_path)
    trace = replay["benchmark"]["trace"]
    assert (trace["path"], trace["speed"], trace["format"], trace["block_size"]) == (str(path), [2.0], "auto", 512)
    assert len(trace["sha256"]) == 64 and "concurrency" not in replay["benchmark"]
    path.write_text(path.read_text() + '{"timestamp": 9, "input_length": 2}\n')
    with pytest.raises(TrtsweepError, match=r"^sweep field 'benchmark.trace.path': .*trace.jsonl:5: 'output_length'"):
        planning.expand(sweep(trace={"path": "trace.jsonl"}), base_dir=tmp_path)
    with pytest.raises(TrtsweepError, match=r"^sweep field 'benchmark.trace': .*give trace or concurrency"):
        planning.expand(sweep(trace={"path": str(path)}, concurrency=[2]))
    with pytest.raises(TrtsweepError, match=r"^sweep field 'benchmark.shared_prefix.tokens'"):
        planning.expand(sweep(shared_prefix={"count": 2, "tokens": 0}))


def test_the_results_name_each_points_workload():
    assert workload({}) == "prompts"
    assert workload({"shared_prefix": {"count": 4, "tokens": 512}}) == "prompts, 4 shared prefixes of 512 tokens"
    drawn = {"input": "lognormal:512,0.5", "output": "fixed:64"}
    assert workload({"synthetic": drawn}) == "synthetic prompts, input lognormal:512,0.5, output fixed:64"
    from_data = {"synthetic": {"lengths_from": "/d/answers.jsonl"}, "shared_prefix": {"count": 2, "tokens": 8}}
    assert workload(from_data) == "synthetic prompts, lengths from answers.jsonl, 2 shared prefixes of 8 tokens"
    assert workload({"trace": {"path": "/t/tuesday.csv", "format": "azure"}}) == "trace tuesday.csv, azure"
    talks = {"path": "/c/chats.jsonl", "history": "recorded"}
    assert workload({"conversations": talks}) == "conversations chats.jsonl, recorded history"


def test_a_trace_request_or_shared_prefix_over_max_input_len_fails_the_plan(tmp_path):
    path = mooncake(tmp_path, [*MOONCAKE, {"timestamp": 2000, "input_length": 513, "output_length": 1}])
    with pytest.raises(TrtsweepError, match=rf"^sweep field 'benchmark.trace.path': {path}:5: input_length 513 is "
                       "more than max_input_len 512"):  # fmt: skip
        planning.expand(sweep(trace={"path": str(path)}))
    planning.expand(sweep(trace={"path": str(mooncake(tmp_path))}))  # 40 tokens at most: within
    with pytest.raises(TrtsweepError, match=r"^sweep field 'benchmark.shared_prefix.tokens': 512 tokens leave no room"):
        planning.expand(sweep(shared_prefix={"count": 1, "tokens": 512}))


def test_the_console_names_a_replay_level_by_its_speed(tmp_path):
    from trtsweep.perf import export

    rows = [{"concurrency": None, "request_rate": 17.5, "replay_speed": 2.0, "requests": 5, "succeeded": 5}]
    assert "trace x2 17.5/s" in export.table(rows)
    failed = [{"concurrency": None, "request_rate": 17.5, "replay_speed": 2.0, "summary": {"errors": {"timeout": 5}}}]
    assert export.unmeasured(failed) == "trace x2: no request succeeded (5 timeout)"
