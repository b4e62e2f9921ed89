"""`trtsweep compare`: two sweeps' results side by side, changes marked by direction and size."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from trtsweep.cli import main
from trtsweep.errors import TrtsweepError
from trtsweep.report.compare import compare, page, text


def _sweep(root: Path, name: str, tok_s: float, ttft_p99: float, only: str | None = None) -> Path:
    results = root / name
    for point in ("p_fp16", only) if only else ("p_fp16",):
        d = results / point
        d.mkdir(parents=True)
        (d / "point.json").write_text(json.dumps({"model": {"repo_id": "m"}, "precision": "float16"}))
        (d / "status.json").write_text(json.dumps({"status": "ok", "gpus": [0]}))
        summary = {"requests": 10, "succeeded": 10, "output_token_throughput": tok_s, "window_s": 5.0,
                   "ttft_ms": {"p99": ttft_p99}, "tpot_ms": {"p99": 20.0}, "e2e_ms": {"p99": 900.0},
                   "accuracy": {"rougeL": 0.5}}  # fmt: skip
        (d / "llm_perf.summary.json").write_text(json.dumps({"levels": [{"concurrency": 4, "summary": summary}]}))
    return results


def test_changes_are_marked_by_direction_and_size(tmp_path, capsys):
    a = _sweep(tmp_path, "a", 100.0, 500.0)
    b = _sweep(tmp_path, "b", 130.0, 510.0, only="p_int8")
    result = compare(a, b)
    (row,) = result["rows"]
    cells = {c["column"]: c for c in row["cells"]}
    assert cells["output_token_throughput"]["delta"] == pytest.approx(0.30)
    assert cells["output_token_throughput"]["sense"] == "better"
    assert cells["ttft_p99_ms"]["sense"] == "worse" and cells["ttft_p99_ms"]["delta"] == pytest.approx(0.02)
    assert cells["rougeL"]["sense"] == "same"
    assert result["only"] == {"a": [], "b": ["p_int8"]}
    assert "out tok/s 100.0 -> 130.0 +30.0%!" in text(result)  # 5% or more: flagged
    assert 'class="better strong" data-column="output_token_throughput">+30.0%' in page(result)
    assert 'class="worse" data-column="ttft_p99_ms">+2.0%' in page(result)  # worse, but under 5%: not bold
    out = tmp_path / "c.html"
    assert main(["compare", str(a), str(b), "--out", str(out)]) == 0
    assert out.read_text().startswith("<!DOCTYPE html>") and "only in b: p_int8" in capsys.readouterr().out


def test_a_missing_sweep_is_one_line(tmp_path):
    with pytest.raises(TrtsweepError, match="no such results directory"):
        compare(tmp_path / "nope", tmp_path / "nope2")
