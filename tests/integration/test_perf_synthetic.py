"""Synthetic prompts (token-norm-dist) and --ignore-eos against the demo model behind Triton."""

from __future__ import annotations

import statistics

from trtsweep.perf.benchmark import run
from trtsweep.perf.cli import config_from_args, parser
from trtsweep.perf.dataset import synthetic
from trtsweep.perf.tokenizer import Tokenizer


def test_synthetic_prompts_follow_the_requested_lengths(demo_model):
    tok = Tokenizer(str(demo_model.hf_dir))
    records = synthetic(tok, 200, (64.0, 8.0), (32.0, 4.0), seed=1)
    lengths = [tok.count(r.input) for r in records]
    # re-tokenizing the decoded prompt gives back (almost) the sampled length
    assert sum(abs(n - r.extra["synthetic_input_tokens"]) <= 1 for n, r in zip(lengths, records, strict=True)) >= 190
    assert abs(statistics.fmean(lengths) - 64) < 3 and 4 < statistics.stdev(lengths) < 12
    assert abs(statistics.fmean(r.max_tokens for r in records) - 32) < 2
    assert synthetic(tok, 5, (64.0, 8.0), (32.0, 4.0), seed=1) == records[:5]


def test_ignore_eos_generates_the_whole_budget(hf_server, demo_model, tmp_path):
    args = parser().parse_args([
        "-u", f"127.0.0.1:{hf_server.grpc_port}", "-m", "ensemble", "--tokenizer-path", str(demo_model.hf_dir),
        "--synthetic-input-tokens", "16", "--synthetic-output-tokens", "12", "--num-prompts", "3",
        "--num-requests", "3", "--warmup-requests", "0", "--ignore-eos",
        "--profile-export-file", str(tmp_path / "p.json"),
    ])  # fmt: skip
    config = config_from_args(args)
    assert config.endpoint.extra_inputs == {"end_id": 1 << 20}
    (report,) = run(config)
    assert report.summary["succeeded"] == 3
    # one streamed chunk per generated token (a CJK character split over tokens may share a chunk)
    assert all(10 <= row["chunks"] <= 12 for row in report.rows())
