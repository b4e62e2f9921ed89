"""The handoff bundle: host paths become variables and come back exactly, the launch commands are what trtsweep
runs, and the Kubernetes manifests are valid against the Kubernetes schemas (kubernetes-validate, offline)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from trtsweep.errors import TrtsweepError
from trtsweep.handoff import best_point, write_bundle

TOKENIZER = "/home/ops/.cache/trtsweep/hf-hub/models--x/snapshots/abc"
ENGINE = "/home/ops/.cache/trtsweep/engines/llama-fp8-tp2pp1-0123"
REPO = "/home/ops/.cache/trtsweep/work/demo/p1/triton_repo"


def _point(point_id: str, backend: str, world_size: int, image: str | None) -> dict:
    return {
        "id": point_id, "sweep": "demo", "backend": backend, "precision": "fp8", "tp": world_size, "pp": 1,
        "world_size": world_size, "gpus": list(range(world_size)), "max_batch_size": 8, "streaming": True,
        "model": {"repo_id": "org/model", "revision": "main"},
        "trtllm": {"version": "0.17.0", "container_image": image} if image else {},
        "benchmark": {"protocol": "grpc", "input_data": "prompts.jsonl", "chat_template": True, "max_tokens": 32},
    }  # fmt: skip


def _results(tmp_path: Path, point_id: str, tok_s: float, gpus: int, status: str = "ok") -> Path:
    results = tmp_path / "results" / "demo"
    d = results / point_id
    (d / "triton_repo" / "tensorrt_llm" / "1").mkdir(parents=True)
    (d / "triton_repo" / "preprocessing").mkdir(parents=True)
    (d / "triton_repo" / "tensorrt_llm" / "config.pbtxt").write_text(
        f'parameters {{ key: "gpt_model_path" value: {{ string_value: "{ENGINE}" }} }}\n'
    )
    (d / "triton_repo" / "tensorrt_llm" / "1" / ".keep").write_text("")
    (d / "triton_repo" / "preprocessing" / "config.pbtxt").write_text(
        f'parameters {{ key: "tokenizer_dir" value: {{ string_value: "{TOKENIZER}" }} }}\n# served from {REPO}\n'
    )
    point = _point(point_id, "tensorrtllm", gpus, "nvcr.io/nvidia/tritonserver:25.01-trtllm-python-py3")
    (d / "point.json").write_text(json.dumps(point))
    (d / "status.json").write_text(json.dumps({"point": point_id, "status": status, "gpus": list(range(gpus)),
                                               "host": "gpu1", "run_id": "r1", "settings_hash": "h"}))  # fmt: skip
    (d / "repository.json").write_text(json.dumps({"params": {"engine_dir": ENGINE, "tokenizer_dir": TOKENIZER},
                                                   "repository": REPO, "model_revision": "abc123"}))  # fmt: skip
    level = {"concurrency": 4, "num_requests": 8, "warmup_requests": 1,
             "summary": {"requests": 8, "succeeded": 8, "output_token_throughput": tok_s}}  # fmt: skip
    (d / "llm_perf.summary.json").write_text(json.dumps({"levels": [level]}))
    (d / "trtllm_build.json").write_text(json.dumps({"command": ["trtllm-build", "--checkpoint_dir", "/c"]}))
    (tmp_path / "prompts.jsonl").write_text("".join(json.dumps({"input": f"q{i}"}) + "\n" for i in range(6)))
    return results


def test_best_is_the_highest_output_per_gpu_and_only_ok_points_count(tmp_path):
    results = _results(tmp_path, "p1", 900.0, 2)  # 450 per GPU
    _results(tmp_path, "p2", 500.0, 1)  # 500 per GPU: best
    _results(tmp_path, "p3", 9000.0, 1, status="failed")
    assert best_point(results)[0] == "p2"
    with pytest.raises(TrtsweepError, match="status 'failed', not ok"):
        write_bundle(results, "p3", tmp_path / "b", base_dir=tmp_path)


def test_the_repository_round_trips_through_its_variables(tmp_path):
    results = _results(tmp_path, "p1", 900.0, 2)
    out = tmp_path / "bundle"
    manifest = write_bundle(results, "p1", out, base_dir=tmp_path)
    config = (out / "model_repository" / "tensorrt_llm" / "config.pbtxt").read_text()
    assert "${TRTSWEEP_ENGINE_DIR}" in config and ENGINE not in config
    assert manifest["variables"] == {"TRTSWEEP_ENGINE_DIR": ENGINE, "TRTSWEEP_TOKENIZER_DIR": TOKENIZER,
                                     "TRTSWEEP_MODEL_REPOSITORY": REPO}  # fmt: skip
    rendered = tmp_path / "rendered"
    subprocess.run([sys.executable, str(out / "render_repository.py"), str(out / "model_repository"), str(rendered),
                    *(f"{k}={v}" for k, v in manifest["variables"].items())], check=True)  # fmt: skip
    served = results / "p1" / "triton_repo"
    for path in served.rglob("*"):
        if path.is_file():
            assert (rendered / path.relative_to(served)).read_text() == path.read_text()
    missing = subprocess.run([sys.executable, str(out / "render_repository.py"), str(out / "model_repository"),
                              str(tmp_path / "x")], capture_output=True, text=True)  # fmt: skip
    assert missing.returncode != 0 and "give TRTSWEEP_" in missing.stderr


def test_launch_commands_and_smoke_test(tmp_path):
    results = _results(tmp_path, "p1", 900.0, 2)
    out = tmp_path / "bundle"
    write_bundle(results, "p1", out, base_dir=tmp_path)
    native = " ".join((out / "launch" / "native.sh").read_text().replace("\\\n", " ").split())
    # TP 2: one tritonserver per rank under mpirun, as trtsweep serves it
    assert "exec mpirun --allow-run-as-root" in native and native.count("tritonserver") == 2
    assert '--model-repository="${TRTSWEEP_MODEL_REPOSITORY}"' in native
    container = " ".join((out / "launch" / "container.sh").read_text().replace("\\\n", " ").split())
    assert '-v "${TRTSWEEP_MODEL_STORE}":/models:ro' in container.replace("'", "")
    assert "--model-repository=/models/triton_repo" in container
    check = subprocess.run(["sh", "-n", str(out / "launch" / "native.sh")], capture_output=True, text=True)
    assert check.returncode == 0, check.stderr
    assert (out / "smoke" / "prompts.jsonl").read_text().count("\n") == 4
    assert "trtllm-build --checkpoint_dir /c" in (out / "build" / "build.sh").read_text()
    assert (out / "evidence" / "llm_perf.summary.json").is_file() and (out / "build" / "trtllm_build.json").is_file()
    unit = next((out / "systemd").glob("*.service")).read_text()
    assert (
        "ExecStart=mpirun --allow-run-as-root -n 1 tritonserver --model-repository=${TRTSWEEP_MODEL_REPOSITORY}" in unit
    )


def test_kubernetes_manifests_are_valid_against_the_schemas(tmp_path):
    import kubernetes_validate

    results = _results(tmp_path, "p1", 900.0, 2)
    out = tmp_path / "bundle"
    write_bundle(results, "p1", out, base_dir=tmp_path)
    docs = {p.stem: yaml.safe_load(p.read_text()) for p in (out / "k8s").glob("*.yaml")}
    assert set(docs) == {"pvc", "deployment", "service"}
    for doc in docs.values():
        kubernetes_validate.validate(doc, kubernetes_validate.latest_version(), strict=True)
    pod = docs["deployment"]["spec"]["template"]
    container = pod["spec"]["containers"][0]
    assert container["resources"]["limits"]["nvidia.com/gpu"] == 2
    assert container["readinessProbe"]["httpGet"]["path"] == "/v2/health/ready"
    assert container["livenessProbe"]["httpGet"]["path"] == "/v2/health/live"
    assert pod["metadata"]["annotations"]["prometheus.io/port"] == "8002"
    assert pod["spec"]["volumes"][0]["persistentVolumeClaim"]["claimName"] == docs["pvc"]["metadata"]["name"]
    # a broken manifest is refused: the validator is real
    container["ports"][0]["containerPort"] = "eight thousand"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(docs["deployment"], kubernetes_validate.latest_version(), strict=True)
