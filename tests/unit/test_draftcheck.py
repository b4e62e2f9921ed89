"""A draft model must share the model's tokenizer: compared at plan time with real tokenizers (the demo model's
SmolLM2 tokenizer.json and copies of it, one token changed), refused in one line naming the field; a tokenizer the
controller does not have is a note that it was not checked, never a refusal."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import huggingface_hub.constants
import pytest

from tests.conftest import ROOT
from trtsweep.errors import TrtsweepError
from trtsweep.sweep import draftcheck
from trtsweep.sweep.planning import expand

MODEL, SAME, OTHER, SPECIAL, BARE = "Org/Model", "Org/Same-Draft", "Org/Other-Draft", "Org/Special-Draft", "Org/Bare"
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "config.json")


def seed(hub: Path, repo_id: str, source: Path, edit=None, files=TOKENIZER_FILES) -> None:
    """`repo_id` in the hub cache `hub` (a snapshot + refs/main), its files copied from `source`; `edit` changes
    the tokenizer.json mapping."""
    entry = hub / ("models--" + repo_id.replace("/", "--"))
    snapshot = entry / "snapshots" / ("0" * 40)
    snapshot.mkdir(parents=True)
    for name in files:
        shutil.copyfile(source / name, snapshot / name)
    if edit is not None:
        data = json.loads((snapshot / "tokenizer.json").read_text(encoding="utf-8"))
        edit(data)
        (snapshot / "tokenizer.json").write_text(json.dumps(data), encoding="utf-8")
    (entry / "refs").mkdir()
    (entry / "refs" / "main").write_text("0" * 40)


def swap_one_token(data: dict) -> None:
    vocab = data["model"]["vocab"]
    token = next(t for t, i in vocab.items() if i == 1000)
    vocab["Ġtrtsweep"] = vocab.pop(token)  # id 1000 is another token


def move_a_special_token(data: dict) -> None:
    data["added_tokens"][2]["id"], data["added_tokens"][1]["id"] = 1, 2  # <|im_start|> and <|im_end|> swapped


@pytest.fixture
def hub(demo_model, tmp_path, monkeypatch) -> Path:
    hub = tmp_path / "hub"  # the controller's hub cache (config.json and the tokenizers are read there)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(hub))
    monkeypatch.setenv("TRTSWEEP_CACHE", str(tmp_path / "cache"))
    seed(hub, MODEL, demo_model.hf_dir)
    seed(hub, SAME, demo_model.hf_dir)
    seed(hub, OTHER, demo_model.hf_dir, swap_one_token)
    seed(hub, SPECIAL, demo_model.hf_dir, move_a_special_token)
    seed(hub, BARE, demo_model.hf_dir, files=("config.json",))  # an EAGLE-3 draft ships no tokenizer
    return hub


def sweep(draft: str) -> dict:
    ngram = {"name": "ngram", "decoding_type": "NGram", "max_draft_len": 4, "options": {"max_matching_ngram_size": 2}}
    eagle = {"name": "eagle3", "decoding_type": "Eagle", "max_draft_len": 3, "draft": {"repo_id": draft}}
    return {"name": "draft", "backend": "tensorrtllm", "flow": "pytorch", "servers": ["trtllm-serve"],
            "trtllm": {"version": "1.2.0", "family": "llama"}, "models": [{"repo_id": MODEL, "name": "model"}],
            "precisions": ["bf16"], "parallelism": [{"tp": 1, "pp": 1}], "max_batch_sizes": [8],
            "lengths": [{"input": 512, "output": 64}], "streaming": [True],
            "benchmark": {"concurrency": [1], "input_data": str(ROOT / "data" / "prompts.jsonl")},
            "speculative": ["none", ngram, eagle]}  # fmt: skip


def test_a_draft_whose_one_token_differs_is_refused_naming_the_field_and_the_token(hub):
    with pytest.raises(TrtsweepError) as err:
        expand(sweep(OTHER))
    message = str(err.value)
    assert message.startswith(f"sweep field 'speculative[2].draft': {OTHER} does not share {MODEL}'s tokenizer: ")
    assert "'Ġtrtsweep' at id 1000" in message and "\n" not in message


def test_a_special_token_at_another_id_is_refused(hub):
    with pytest.raises(TrtsweepError, match=r"speculative\[2\]\.draft': .*special token at id 1 is '<\|im_end\|>'"):
        expand(sweep(SPECIAL))


def test_the_same_tokenizer_is_checked_and_the_plan_says_what_was_compared(hub):
    points = expand(sweep(SAME))
    assert "_spec-eagle3" in points[-1]["id"] and points[-1]["draft_model"]["repo_id"] == SAME
    assert draftcheck.plan_notes(points) == [
        f"draft tokenizer of {SAME} against {MODEL}: the same (tokenizer.json: BPE vocabulary of 49152 + 48900 "
        "merges, 17 added/special tokens' ids compared)"
    ]


def test_a_tokenizer_not_on_the_controller_is_not_checked_and_said_so(hub):
    for draft in (BARE, "Org/Not-Here"):
        points = expand(sweep(draft))  # no refusal
        assert draftcheck.plan_notes(points) == [
            f"draft tokenizer of {draft} against {MODEL}: not checked: no tokenizer of {draft} on the controller"
        ]


def test_merges_as_pairs_or_strings_are_the_same_and_a_dropped_merge_is_not(demo_model, tmp_path):
    data = json.loads((demo_model.hf_dir / "tokenizer.json").read_text(encoding="utf-8"))
    for name, merges in (("strings", [" ".join(m) for m in data["model"]["merges"]]),
                         ("dropped", data["model"]["merges"][:-1])):  # fmt: skip
        (tmp_path / name).mkdir()
        (tmp_path / name / "tokenizer.json").write_text(json.dumps({**data, "model": {**data["model"],
                                                                                     "merges": merges}}))  # fmt: skip
    ours = draftcheck.read(str(demo_model.hf_dir))
    assert draftcheck.difference(ours, draftcheck.read(str(tmp_path / "strings"))) is None
    assert draftcheck.difference(ours, draftcheck.read(str(tmp_path / "dropped"))) == (
        "its BPE merges differ from merge 48899 on (48899 and 48900 merges)"
    )


def test_a_model_given_by_search_model_dirs_is_compared_with_its_draft(hub, demo_model, tmp_path):
    local = tmp_path / "local-model"  # the model only on this machine (search.model_dirs), not in the hub cache
    shutil.copytree(demo_model.hf_dir, local)
    given = {**sweep(OTHER), "models": [{"repo_id": "Org/Only-Local", "name": "model"}],
             "search": {"model_dirs": {"model": str(local)}}}  # fmt: skip
    with pytest.raises(TrtsweepError, match=rf"'speculative\[2\]\.draft': {OTHER} does not share Org/Only-Local's"):
        expand(given)
    points = expand({**given, "speculative": ["none", {**sweep(SAME)["speculative"][2], "draft": {"repo_id": SAME}}]})
    assert draftcheck.plan_notes(points, {"model": str(local)})[0].startswith(
        f"draft tokenizer of {SAME} against Org/Only-Local: the same"
    )
