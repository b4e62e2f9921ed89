"""A speculative-decoding point's handoff: its variant, speculative_config and draft model in bundle.json and the
README, its options file as served."""

from __future__ import annotations

import json

import yaml

from tests.unit.test_handoff import OPTIONS, _pytorch_results
from trtsweep.handoff.bundle import write_bundle

SPEC = {"decoding_type": "Eagle", "max_draft_len": 3, "eagle3_one_model": True}
DRAFT = {"repo_id": "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B", "revision": None}


def test_a_speculative_point_hands_off_its_variant_config_and_draft_model(tmp_path):
    results, point_id = _pytorch_results(tmp_path, "trtllm-serve")
    options = {**OPTIONS, "speculative_config": SPEC}
    point_file = results / point_id / "point.json"
    point = json.loads(point_file.read_text())
    point.update(speculative="eagle3", draft_model=DRAFT, llm_api=options)
    point_file.write_text(json.dumps(point))
    (results / point_id / "llm_api_options.yml").write_text(yaml.safe_dump(options))
    out = tmp_path / "bundle"
    manifest = write_bundle(results, point_id, out, base_dir=tmp_path)
    assert manifest["speculative"] == {"variant": "eagle3", "speculative_config": SPEC, "draft_model": DRAFT}
    assert json.loads((out / "bundle.json").read_text())["speculative"]["draft_model"] == DRAFT
    assert yaml.safe_load((out / "llm_api_options.yml").read_text())["speculative_config"] == SPEC
    readme = (out / "README.md").read_text()
    assert "Speculative decoding `eagle3`" in readme and "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B" in readme


def test_a_point_without_speculative_decoding_has_no_such_section(tmp_path):
    results, point_id = _pytorch_results(tmp_path, "trtllm-serve")
    manifest = write_bundle(results, point_id, tmp_path / "bundle", base_dir=tmp_path)
    assert "speculative" not in manifest
    assert "Speculative decoding" not in (tmp_path / "bundle" / "README.md").read_text()
