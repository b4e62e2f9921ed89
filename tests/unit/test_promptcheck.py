"""Prompts longer than a point's max_input_len are refused before anything runs, counted with the model's
tokenizer (the demo model's, here): at plan time when the controller has the tokenizer, else on the host."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from tests.conftest import ROOT
from trtsweep import cli
from trtsweep.errors import TrtsweepError
from trtsweep.fleet import status
from trtsweep.sweep import promptcheck
from trtsweep.sweep.planning import expand


def sweep_with(tmp_path: Path, prompts: list[str], isl: int, repo_id: str | None = None, chat: bool = False) -> dict:
    data = tmp_path / "prompts.jsonl"
    data.write_text("".join(json.dumps({"input": p, "output": "ok"}) + "\n" for p in prompts), encoding="utf-8")
    sweep = yaml.safe_load((ROOT / "group_vars" / "all" / "sweep.yml").read_text())["trtsweep_sweep"]
    sweep["lengths"] = [{"input": isl, "output": 16}]
    sweep["benchmark"].update(input_data=str(data), chat_template=chat)
    if repo_id:
        sweep["models"] = [{"repo_id": repo_id, "name": "absent"}]
    return sweep


LONG = "The quick brown fox jumps over the lazy dog. " * 40  # about 400 tokens


def test_a_prompt_over_max_input_len_fails_the_plan_naming_the_file_line_and_tokens(demo_model, tmp_path, capsys):
    sweep = sweep_with(tmp_path, ["What is the capital of France?", LONG], isl=256)
    (tmp_path / "sweep.yml").write_text(yaml.safe_dump({"trtsweep_sweep": sweep}))
    assert cli.main(["plan", str(tmp_path / "sweep.yml")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0
    assert f"{tmp_path / 'prompts.jsonl'}:2: the prompt is" in err and "more than max_input_len 256" in err
    tokens = int(err.split("the prompt is ")[1].split()[0])
    assert 380 < tokens < 420


def test_prompts_within_the_limit_are_checked_and_said_so(demo_model, tmp_path):
    points = expand(sweep_with(tmp_path, ["What is the capital of France?", LONG], isl=1024))
    checks = promptcheck.plan_checks(points, tmp_path)
    assert all(v.startswith("checked: longest prompt") for v in checks.values()), checks
    assert {p["prompt_check"] for p in points} == {"checked"}


def test_the_chat_template_counts_as_llm_perf_sends_it(demo_model, tmp_path):
    data = tmp_path / "prompts.jsonl"
    sweep_with(tmp_path, ["Hi"], isl=64)
    plain, _ = promptcheck.longest_prompt(str(data), str(demo_model.hf_dir), False)
    chat, _ = promptcheck.longest_prompt(str(data), str(demo_model.hf_dir), True)
    assert chat > plain + 5  # the template's system turn and role markers are input tokens too


def test_without_a_tokenizer_on_the_controller_the_host_checks_after_the_download(demo_model, tmp_path):
    points = expand(sweep_with(tmp_path, [LONG], isl=256, repo_id="acme/not-on-this-machine"))
    checks = promptcheck.plan_checks(points, tmp_path)
    assert all(v.startswith("deferred to the host") for v in checks.values()), checks
    assert {p["prompt_check"] for p in points} == {"deferred"}
    # the plan says it once for the model's points, with the command that lets the controller check them
    said = promptcheck.lines(checks)
    assert len(said) == 1 and said[0].startswith(f"prompt lengths of {points[0]['id']}"), said
    assert ("`hf download acme/not-on-this-machine --include 'tokenizer*' --include '*.json' --include '*.model' "
            "--include '*.jinja'` puts it in the hub cache, and the plan checks them here") in said[0]  # fmt: skip
    # what trtsweep_prompt_check runs on the host, with the downloaded model's tokenizer
    with pytest.raises(TrtsweepError, match=r"prompts.jsonl:1: the prompt is \d+ tokens .* max_input_len 256"):
        promptcheck.check(str(tmp_path / "prompts.jsonl"), str(demo_model.hf_dir), 256, False, points[0]["id"])


def test_how_a_point_was_checked_does_not_change_what_it_measures(tmp_path):
    point = expand(sweep_with(tmp_path, ["hi"], isl=64))[0]
    assert status.settings_hash(point) == status.settings_hash({**point, "prompt_check": "deferred"})


def test_a_count_is_kept_by_what_decides_it_and_made_again_when_that_changes(demo_model, tmp_path, monkeypatch):
    monkeypatch.setenv("TRTSWEEP_CACHE", str(tmp_path / "cache"))
    data = tmp_path / "prompts.jsonl"
    data.write_text(json.dumps({"input": "What is the capital of France?"}) + "\n")
    first = promptcheck.longest_prompt.__wrapped__(str(data), str(demo_model.hf_dir), True)
    assert len(list((tmp_path / "cache" / "prompt-counts").glob("*.json"))) == 1

    def no_child(*args, **kwargs):
        raise AssertionError("the same prompts and tokenizer were counted again")

    monkeypatch.setattr(promptcheck.subprocess, "run", no_child)
    assert promptcheck.longest_prompt.__wrapped__(str(data), str(demo_model.hf_dir), True) == first
    monkeypatch.undo()
    monkeypatch.setenv("TRTSWEEP_CACHE", str(tmp_path / "cache"))
    data.write_text(json.dumps({"input": "What is the capital of France? Answer in one long sentence."}) + "\n")
    longer = promptcheck.longest_prompt.__wrapped__(str(data), str(demo_model.hf_dir), True)
    assert longer[0] > first[0]  # another file's bytes: counted again, not the kept count
    assert len(list((tmp_path / "cache" / "prompt-counts").glob("*.json"))) == 2
