"""A speculative-decoding point's handoff: its variant, speculative_config and draft model in bundle.json and the
README, its options file as served."""

from __future__ import annotations

import json
from pathlib import Path

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


def _draft_results(tmp_path, server: str):
    """A speculative point whose options name the draft model's directory on the benchmark host (a real one)."""
    from tests.unit.test_handoff import CKPT

    draft_dir = tmp_path / "hub" / "models--yuhuili--EAGLE3" / "snapshots" / "0123"
    draft_dir.mkdir(parents=True)
    (draft_dir / "config.json").write_text("{}")
    results, point_id = _pytorch_results(tmp_path, server)
    options = {**OPTIONS, "speculative_config": {**SPEC, "speculative_model": str(draft_dir)}}
    point_file = results / point_id / "point.json"
    point = json.loads(point_file.read_text())
    point.update(speculative="eagle3", draft_model=DRAFT, llm_api={**OPTIONS, "speculative_config": SPEC})
    point_file.write_text(json.dumps(point))
    (results / point_id / "llm_api_options.yml").write_text(yaml.safe_dump(options))
    if server == "triton":
        model_yaml = results / point_id / "triton_repo" / "tensorrt_llm" / "1" / "model.yaml"
        model_yaml.write_text(yaml.safe_dump({"model": CKPT, "backend": "pytorch", **options}))
    return results, point_id, str(draft_dir)


def test_the_draft_model_is_deployed_like_the_checkpoint_its_directory_filled_into_the_options(tmp_path):
    from tests.unit.test_handoff import _recording, _run_script

    results, point_id, draft_dir = _draft_results(tmp_path, "trtllm-serve")
    out = tmp_path / "bundle"
    manifest = write_bundle(results, point_id, out, base_dir=tmp_path)
    draft = manifest["speculative"]["draft"]
    assert (draft["variable"], draft["dir_on_benchmark_host"], draft["in_model_store"]) == (
        "TRTSWEEP_DRAFT_DIR", draft_dir, "/models/draft")  # fmt: skip
    assert [f["path"] for f in draft["files"]] == ["config.json"] and len(draft["files"][0]["sha256"]) == 64
    assert manifest["variables"]["TRTSWEEP_DRAFT_DIR"] == draft_dir
    config = yaml.safe_load((out / "llm_api_options.yml").read_text())["speculative_config"]
    assert config == {**SPEC, "speculative_model": "${TRTSWEEP_DRAFT_DIR}"}
    # native: the script fills the host's draft directory in before trtllm-serve reads the options
    args = _recording(tmp_path, "trtllm-serve")
    ran = _run_script(out / "launch" / "native.sh", tmp_path, TRTSWEEP_MODEL_DIR="/srv/model",
                      TRTSWEEP_DRAFT_DIR="/srv/draft")  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    argv = args.read_text().splitlines()
    rendered = argv[argv.index("--extra_llm_api_options") + 1]
    assert rendered == f"{out}/rendered/llm_api_options.yml"
    assert yaml.safe_load(Path(rendered).read_text())["speculative_config"]["speculative_model"] == "/srv/draft"
    missing = _run_script(out / "launch" / "native.sh", tmp_path, TRTSWEEP_MODEL_DIR="/srv/model")
    assert missing.returncode != 0 and "TRTSWEEP_DRAFT_DIR" in missing.stderr
    # the container and the pod: the model store's draft/
    docker = _recording(tmp_path, "docker")
    assert _run_script(out / "launch" / "container.sh", tmp_path, TRTSWEEP_MODEL_STORE="/srv/store").returncode == 0
    assert f"{out}/llm_api_options.store.yml:/config/llm_api_options.yml:ro" in docker.read_text().splitlines()
    store = yaml.safe_load((out / "llm_api_options.store.yml").read_text())["speculative_config"]
    configmap = yaml.safe_load((out / "k8s" / "configmap.yaml").read_text())["data"]["llm_api_options.yml"]
    assert store["speculative_model"] == yaml.safe_load(configmap)["speculative_config"]["speculative_model"] == (
        "/models/draft")  # fmt: skip
    unit = next((out / "systemd").glob("*.service")).read_text()
    assert (
        "ExecStartPre=python3 ${TRTSWEEP_BUNDLE}/render_repository.py ${TRTSWEEP_BUNDLE}/llm_api_options.yml "
        "${TRTSWEEP_BUNDLE}/rendered/llm_api_options.yml TRTSWEEP_DRAFT_DIR=${TRTSWEEP_DRAFT_DIR}"
    ) in unit
    # the benchmark host's path is a variable everywhere but where the bundle says what it was (as the model's)
    leaked = [p for p in out.rglob("*") if p.is_file() and draft_dir in p.read_text() and p.parts[-2] != "evidence"]
    assert sorted(p.name for p in leaked) == ["README.md", "bundle.json"]
    readme = (out / "README.md").read_text()
    assert "TRTSWEEP_DRAFT_DIR=/srv/draft sh launch/native.sh" in readme and "is deployed like the checkpoint" in readme


def test_a_triton_points_draft_is_a_variable_of_its_repository(tmp_path):
    import subprocess
    import sys

    results, point_id, draft_dir = _draft_results(tmp_path, "triton")
    out = tmp_path / "bundle"
    write_bundle(results, point_id, out, base_dir=tmp_path)
    model_yaml = (out / "model_repository" / "tensorrt_llm" / "1" / "model.yaml").read_text()
    assert "speculative_model: ${TRTSWEEP_DRAFT_DIR}" in model_yaml and draft_dir not in model_yaml
    rendered = tmp_path / "rendered"
    variables = ["TRTSWEEP_MODEL_DIR=/m", "TRTSWEEP_MODEL_REPOSITORY=/r", "TRTSWEEP_DRAFT_DIR=/d"]
    subprocess.run([sys.executable, str(out / "render_repository.py"), str(out / "model_repository"), str(rendered),
                    *variables], check=True)  # fmt: skip
    served = yaml.safe_load((rendered / "tensorrt_llm" / "1" / "model.yaml").read_text())
    assert served["speculative_config"]["speculative_model"] == "/d" and served["model"] == "/m"
    assert "TRTSWEEP_DRAFT_DIR=/srv/draft" in (out / "README.md").read_text()
