"""Resume reruns what changed: the prompts file's contents, a moving model revision's commit, and never the
spelling of a TensorRT-LLM release."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from trtsweep.fleet import hostfacts, runplan, status
from trtsweep.hub import download
from trtsweep.sweep.planning import expand
from trtsweep.toolchain.versions import canonical, same_release

REPO = "Qwen/Qwen2-0.5B"
OLD, NEW = "a" * 40, "b" * 40
PROMPTS = [{"input": f"question {i}", "output": f"answer {i}"} for i in range(3)]


def sweep(prompts: Path, **model: Any) -> dict[str, Any]:
    return {
        "name": "s",
        "backend": "hf",
        "models": [{"repo_id": REPO, "name": "qwen", **model}],
        "precisions": ["float32", "int8"],
        "parallelism": [{"tp": 1, "pp": 1}],
        "max_batch_sizes": [4],
        "lengths": [{"input": 256, "output": 16}],
        "streaming": [True],
        "benchmark": {"input_data": str(prompts)},
        "placement": {"gpus_per_point": 1, "mode": "pack"},
    }


HOSTS = {"a": {"gpus": [{"index": 0, "name": "declared", "memory_mb": 0}], "problems": []}}


def write_prompts(path: Path, records: list[dict[str, str]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def finish_ok(results: Path, point: dict[str, Any], run_id: str, commit: str | None = None) -> None:
    """A point that ran to the end; its repository.json names the commit its model resolved to."""
    status.begin(results, point, run_id, runplan.now())
    (results / point["id"] / "llm_perf.summary.json").write_text('{"levels": []}')
    (results / point["id"] / "repository.json").write_text(json.dumps({"model_revision": commit}))
    status.finish(results, point["id"], run_id, status="ok", stage="benchmark",
                  model_commit=status.model_commit(results, point["id"]))  # fmt: skip


def run_all(tmp_path: Path, the_sweep: dict[str, Any], commit: str | None = None) -> list[str]:
    plan = runplan.make_plan(the_sweep, HOSTS, tmp_path)
    for point in plan["points"]:
        finish_ok(tmp_path / "s", point, plan["run_id"], commit)
    return [p["id"] for p in plan["points"]]


def test_an_edited_prompts_file_reruns_its_points_and_an_unchanged_one_keeps_them(tmp_path):
    prompts = write_prompts(tmp_path / "prompts.jsonl", PROMPTS)
    ids = run_all(tmp_path, sweep(prompts))
    assert runplan.make_plan(sweep(prompts), HOSTS, tmp_path)["kept"] == ids

    write_prompts(prompts, PROMPTS[:-1])  # one line removed, same path
    again = runplan.make_plan(sweep(prompts), HOSTS, tmp_path)
    assert again["kept"] == [] and [p["id"] for p in again["points"]] == ids


def test_the_prompts_hash_is_the_files_contents_wherever_the_file_is(tmp_path):
    here = write_prompts(tmp_path / "prompts.jsonl", PROMPTS)
    (tmp_path / "elsewhere").mkdir()
    there = write_prompts(tmp_path / "elsewhere" / "p.jsonl", PROMPTS)
    relative = expand({**sweep(here), "benchmark": {"input_data": "prompts.jsonl"}}, base_dir=tmp_path)[0]
    assert relative["input_data_sha256"] == expand(sweep(here))[0]["input_data_sha256"]
    assert expand(sweep(there))[0]["input_data_sha256"] == relative["input_data_sha256"]
    write_prompts(there, [*PROMPTS, {"input": "one more"}])
    assert expand(sweep(there))[0]["input_data_sha256"] != relative["input_data_sha256"]


def test_the_chat_template_setting_is_part_of_the_settings(tmp_path):
    prompts = write_prompts(tmp_path / "prompts.jsonl", PROMPTS)
    plain = expand(sweep(prompts))[0]
    templated = expand({**sweep(prompts), "benchmark": {"input_data": str(prompts), "chat_template": True}})[0]
    assert status.settings_hash(plain) != status.settings_hash(templated)


def test_an_ok_record_holds_the_commit_its_model_resolved_to(tmp_path):
    prompts = write_prompts(tmp_path / "prompts.jsonl", PROMPTS)
    ids = run_all(tmp_path, sweep(prompts), OLD)
    assert {status.read(tmp_path / "s", i)["model_commit"] for i in ids} == {OLD}
    assert status.model_commit(tmp_path / "s", "no-such-point") is None


@pytest.mark.parametrize(
    ("revision", "now", "rerun"),
    [
        (None, {"a": {f"{REPO}@main": NEW}}, True),  # main moved on a host
        ("dev", {"a": {f"{REPO}@dev": NEW}}, True),  # a branch moved
        (None, {"a": {f"{REPO}@main": OLD}}, False),  # still the commit measured
        (None, {"a": {f"{REPO}@main": OLD}, "b": {f"{REPO}@main": NEW}}, True),  # one host sees it moved
        (None, {"a": {f"{REPO}@main": None}}, False),  # no host could tell: nothing shows a change
        (None, {"a": {}}, False),
        ("dev", {"a": {f"{REPO}@main": NEW}}, False),  # another ref moved
        (OLD, {"a": {f"{REPO}@{OLD}": NEW}}, False),  # a commit never moves
    ],
)
def test_a_moving_revision_is_rerun_when_a_host_resolves_it_to_another_commit(tmp_path, revision, now, rerun):
    prompts = write_prompts(tmp_path / "prompts.jsonl", PROMPTS)
    the_sweep = sweep(prompts, revision=revision)
    run_all(tmp_path, the_sweep, OLD)
    points = expand(the_sweep)
    hosts = {name: {**HOSTS["a"], "model_commits": commits} for name, commits in now.items()}
    run, kept, _ = status.select(points, tmp_path / "s", commits=status.commits_now(hosts))
    assert (len(run), len(kept)) == ((2, 0) if rerun else (0, 2))


def test_a_record_without_a_commit_is_rerun_once_a_host_names_the_ref(tmp_path):
    prompts = write_prompts(tmp_path / "prompts.jsonl", PROMPTS)
    run_all(tmp_path, sweep(prompts), None)  # e.g. a record written before commits were recorded
    run, _, _ = status.select(expand(sweep(prompts)), tmp_path / "s", commits={f"{REPO}@main": {OLD}})
    assert len(run) == 2


def hub_cache(root: Path, commits: list[str], main: str) -> Path:
    """A hub-cache entry with a complete snapshot per commit and refs/main."""
    entry = root / ("models--" + REPO.replace("/", "--"))
    for commit in commits:
        snapshot = entry / "snapshots" / commit
        snapshot.mkdir(parents=True)
        (snapshot / "config.json").write_text("{}")
    (entry / "refs").mkdir(parents=True)
    (entry / "refs" / "main").write_text(main)
    return entry


def test_a_branch_resolves_to_the_commit_the_hub_names_now_not_the_cached_ref(tmp_path, monkeypatch):
    entry = hub_cache(tmp_path, [OLD, NEW], main=OLD)
    asked = []
    monkeypatch.setattr(download, "_hub_commit", lambda repo, rev, *a: asked.append((repo, rev)) or NEW)
    snap = download.resolve(REPO, cache_dir=str(tmp_path))
    assert (snap.revision, snap.changed, snap.source) == (NEW, False, "hub-cache")
    assert asked == [(REPO, None)]
    assert (entry / "refs" / "main").read_text() == NEW  # an offline run later sees what this one saw
    assert download.resolve(REPO, cache_dir=str(tmp_path), offline=True).revision == NEW


def test_a_pinned_commit_or_an_offline_run_never_asks_the_hub(tmp_path, monkeypatch):
    hub_cache(tmp_path, [OLD, NEW], main=OLD)

    def no_hub(*args: Any) -> str:
        raise AssertionError("the hub was asked")

    monkeypatch.setattr(download, "_hub_commit", no_hub)
    assert download.resolve(REPO, revision=NEW, cache_dir=str(tmp_path)).revision == NEW
    assert download.resolve(REPO, cache_dir=str(tmp_path), offline=True).revision == OLD
    assert download.current_commit(REPO, cache_dir=str(tmp_path), offline=True) == OLD
    assert download.current_commit(REPO, revision=NEW, cache_dir=str(tmp_path)) == NEW


def test_when_the_hub_does_not_answer_the_cached_ref_decides(tmp_path, monkeypatch):
    hub_cache(tmp_path, [OLD], main=OLD)
    monkeypatch.setattr(download, "_hub_commit", lambda *a: None)
    assert download.resolve(REPO, cache_dir=str(tmp_path)).revision == OLD
    assert download.current_commit(REPO, cache_dir=str(tmp_path)) == OLD
    assert download.current_commit(REPO, revision="dev", cache_dir=str(tmp_path)) is None


@pytest.mark.parametrize(
    ("a", "b", "same"),
    [
        ("1.2", "1.2.0", True),
        ("v1.2.0", "1.2", True),
        (" 1.2.0 ", "V1.2.0", True),
        ("0.11", "0.11.0", True),
        ("1.2.0rc8", "1.2.0", False),  # a release candidate is another release
        ("1.2.0rc8", "1.2rc8", True),
        ("0.17.0.post1", "0.17.0", False),
        ("1.2.1", "1.2", False),
    ],
)
def test_trtllm_versions_are_compared_as_releases(a, b, same):
    assert same_release(a, b) is same
    assert (canonical(a) == canonical(b)) is same


def test_preflight_takes_one_release_in_any_spelling(tmp_path, monkeypatch):
    monkeypatch.setattr(hostfacts, "_runtime_problem", lambda *a: None)  # no docker here: the tags are the subject
    same, _ = hostfacts.preflight(tmp_path, 0, "container", trtllm_version_wanted="1.2",
                                  trtllm_version_declared="v1.2.0",
                                  trtllm_image="nvcr.io/nvidia/tensorrt-llm/release:1.2.0")  # fmt: skip
    assert same == []
    rc, _ = hostfacts.preflight(tmp_path, 0, "container", trtllm_version_wanted="1.2",
                                trtllm_image="nvcr.io/nvidia/tensorrt-llm/release:1.2.0rc8")  # fmt: skip
    assert rc == ["image nvcr.io/nvidia/tensorrt-llm/release:1.2.0rc8 is TensorRT-LLM 1.2.0rc8; the sweep's points "
                  "need 1.2"]  # fmt: skip


def test_preflight_takes_the_installed_release_in_any_spelling(tmp_path):
    fake = tmp_path / "python"
    fake.write_text("#!/bin/sh\necho 1.2.0\n")
    fake.chmod(0o755)
    problems, _ = hostfacts.preflight(tmp_path, 0, "local", trtllm_version_wanted="1.2", trtllm_python=str(fake))
    assert problems == []


def test_the_settings_hash_takes_one_release_in_any_spelling(tmp_path):
    prompts = write_prompts(tmp_path / "prompts.jsonl", PROMPTS)
    point = expand(sweep(prompts))[0]

    def spelled(version: str) -> dict[str, Any]:
        return {**point, "trtllm": {"version": version}, "triton": {"trtllm_version": version}}

    assert status.settings_hash(spelled("1.2")) == status.settings_hash(spelled("v1.2.0"))
    assert status.settings_hash(spelled("1.2")) != status.settings_hash(spelled("1.2.0rc8"))
