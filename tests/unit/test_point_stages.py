"""A point's stages are one mapping (trtsweep.lane.point.PointStages): the lane's PointRun runs them, and so do the
roles' point mode (trtsweep_point_stage) from a measured point's point.json, e.g. in a handoff on another host.

What shaped the artifacts travels with the point: point.json records the host settings the stages read to make
them (`stage_settings`: never a token), and they win over the settings of the host that builds the point again; the
model is taken at the commit measured, whatever its branch names now.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from tests.unit.test_schema_reaches import MADE, point_run, settings, trt_sweep
from trtsweep.lane.point import STAGE_SETTINGS, Made, PointStages
from trtsweep.lane.spec import PointPaths
from trtsweep.sweep import planning

SECRET = "hf_StAgEsEcReT42"
# the sweep host's inventory: settings that shape the checkpoint, the engine and the repository
SWEEP_HOST = {"quantize_smoothquant_alpha": 0.8, "quantize_extra_flags": {"--load_by_shard": True},
              "trtllm_build_max_num_tokens": 2048, "trtllm_build_gemm_plugin": "float16",
              "triton_repo_max_queue_size": 7, "hf_download_ignore_patterns": ["*.bin"]}  # fmt: skip


def measured_point(tmp_path: Path) -> tuple[dict[str, Any], Any]:
    """point.json of an int8_sq point the lane ran on a host with SWEEP_HOST (and a hub token), and that run."""
    (point,) = planning.expand(trt_sweep(precisions=["int8_sq"]))
    run = point_run(point, tmp_path, trtsweep_work_dir=str(tmp_path / "work"), hf_download_token=SECRET,
                    quantize_hf_token=SECRET, **SWEEP_HOST)  # fmt: skip
    run._preflight()
    return json.loads((run.paths.results / "point.json").read_text()), run


def test_point_json_records_the_settings_that_shaped_the_artifacts_and_never_a_token(tmp_path):
    recorded, run = measured_point(tmp_path)
    assert set(recorded["stage_settings"]) == set(STAGE_SETTINGS)
    assert {name: recorded["stage_settings"][name] for name in SWEEP_HOST} == SWEEP_HOST
    assert SECRET not in (run.paths.results / "point.json").read_text()
    assert not any(name.endswith(("_token", "_timeout", "_docker", "_gpus", "_mounts")) for name in STAGE_SETTINGS)


def test_a_measured_point_maps_onto_its_stages_as_the_lane_mapped_it_whatever_the_host_sets(tmp_path):
    recorded, run = measured_point(tmp_path)
    serving = settings(quantize_smoothquant_alpha=0.5, trtllm_build_max_num_tokens=None)  # another host's own
    stages = PointStages(recorded, serving, PointPaths(tmp_path / "p", tmp_path / "p", tmp_path / "p" / "artifacts"),
                         made=Made(**MADE))  # fmt: skip
    assert stages.checkpoint_spec()[0] == run.checkpoint_spec()[0]
    assert stages.engine_spec()[0] == run.engine_spec()[0]
    assert stages.repository_params() == run.repository_params()
    assert stages.download_params()["ignore"] == ["*.bin"]


def test_the_model_is_taken_at_the_commit_measured_whatever_its_branch_names_now(tmp_path):
    hub = tmp_path / "hub"
    entry = hub / "models--Qwen--Qwen2-0.5B"
    for commit in ("a" * 40, "b" * 40):
        (entry / "snapshots" / commit).mkdir(parents=True)
        (entry / "snapshots" / commit / "config.json").write_text("{}")
    (entry / "refs").mkdir()
    (entry / "refs" / "main").write_text("b" * 40)  # main moved since the sweep measured a
    (point,) = planning.expand(trt_sweep())
    stages = PointStages(point, settings(trtsweep_hf_cache_dir=str(hub), trtsweep_hf_offline=True),
                         PointPaths(tmp_path, tmp_path, tmp_path / "results"))  # fmt: skip
    assert stages.download(pinned="a" * 40).revision == "a" * 40
    assert stages.made.model_dir == str(entry / "snapshots" / ("a" * 40))
    assert PointStages(point, stages.s, stages.paths).download().revision == "b" * 40  # unpinned: main


def test_a_speculative_points_draft_is_downloaded_like_the_model_and_named_in_its_options(tmp_path):
    """EAGLE-3 needs its draft model on the host: the download stage takes it (cached like the model, offline here
    from the host's hub cache) and the options file and llmapi repository name its directory in the release's
    field (1.2: speculative_model)."""
    from tests.unit.test_pytorch_axes import DRAFT, EAGLE, sweep

    hub = tmp_path / "hub"
    for repo in ("Org/Model-8B", DRAFT):
        snapshot = hub / f"models--{repo.replace('/', '--')}" / "snapshots" / ("c" * 40)
        snapshot.mkdir(parents=True)
        (snapshot / "config.json").write_text("{}")
        (snapshot.parent.parent / "refs").mkdir()
        (snapshot.parent.parent / "refs" / "main").write_text("c" * 40)
    (point,) = [p for p in planning.expand(sweep("1.2", speculative=[EAGLE])) if p.get("draft_model")]
    stages = PointStages(point, settings(trtsweep_hf_cache_dir=str(hub), trtsweep_hf_offline=True),
                         PointPaths(tmp_path, tmp_path, tmp_path / "results"))  # fmt: skip
    stages.download()
    draft = str(hub / f"models--{DRAFT.replace('/', '--')}" / "snapshots" / ("c" * 40))
    assert stages.made.draft_dir == draft
    assert yaml.safe_load(stages.llm_api_options())["speculative_config"]["speculative_model"] == draft
    assert stages.llm_api()["speculative_config"]["decoding_type"] == "Eagle" and "speculative_model" not in str(
        point["llm_api"]
    )  # the point itself stays what was planned (no host path in its settings hash)
