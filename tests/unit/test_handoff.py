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
from trtsweep.handoff.bundle import write_bundle
from trtsweep.handoff.select import best_point

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


# -- the PyTorch flow: Triton's llmapi model, or trtllm-serve -----------------------------------------------------
CKPT = "/home/ops/.cache/trtsweep/checkpoints/modelopt-fp8-0123"
OPTIONS = {"max_batch_size": 8, "max_seq_len": 1152, "kv_cache_config": {"free_gpu_memory_fraction": 0.9}}


def _pytorch_results(tmp_path: Path, server: str, backend: str = "tensorrtllm") -> tuple[Path, str]:
    point_id = f"p1_pytorch-{'serve' if server == 'trtllm-serve' else 'triton'}"
    results = tmp_path / "results" / "demo"
    d = results / point_id
    d.mkdir(parents=True)
    point = _point(point_id, backend, 2, "nvcr.io/nvidia/tensorrt-llm/release:1.2.0")
    point.update(flow="pytorch", server=server, llm_api_release="1.2", llm_api=OPTIONS)
    if server == "triton":
        point["benchmark"]["extra_inputs"] = {"exclude_input_from_output": True}
        (d / "triton_repo" / "tensorrt_llm" / "1").mkdir(parents=True)
        model_yaml = {"model": CKPT, "backend": "pytorch", **OPTIONS,
                      "triton_config": {"max_batch_size": 0, "decoupled": True}}  # fmt: skip
        (d / "triton_repo" / "tensorrt_llm" / "1" / "model.yaml").write_text(yaml.safe_dump(model_yaml))
        (d / "triton_repo" / "tensorrt_llm" / "config.pbtxt").write_text('backend: "python"\nmax_batch_size: 0\n')
        params = {"layout": "llmapi", "backend": backend, "release": "1.2", "model": CKPT, "options": OPTIONS,
                  "decoupled": True}  # fmt: skip
        repo = {"params": params, "repository": REPO}
    else:
        repo = {"params": {"llm_api": OPTIONS, "model": CKPT}, "repository": None}
    (d / "point.json").write_text(json.dumps(point))
    (d / "status.json").write_text(json.dumps({"point": point_id, "status": "ok", "gpus": [0, 1], "host": "gpu1"}))
    (d / "repository.json").write_text(json.dumps({**repo, "model_revision": "abc123"}))
    (d / "llm_api_options.yml").write_text(yaml.safe_dump(OPTIONS))
    (d / "checkpoint.json").write_text(json.dumps({"command": ["python3", "hf_ptq.py", "--qformat", "fp8"]}))
    level = {"concurrency": 4, "summary": {"requests": 8, "succeeded": 8, "output_token_throughput": 100.0}}
    (d / "llm_perf.summary.json").write_text(json.dumps({"levels": [level]}))
    (tmp_path / "prompts.jsonl").write_text("".join(json.dumps({"input": f"q{i}"}) + "\n" for i in range(6)))
    return results, point_id


def _recording(tmp_path: Path, name: str) -> Path:
    """A stand-in for a binary this machine lacks (trtllm-serve, docker): it writes its arguments, one per line."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    log = tmp_path / f"{name}.args"
    script = bin_dir / name
    script.write_text(f'#!/bin/sh\nprintf "%s\\n" "$@" > {log}\n')
    script.chmod(0o755)
    return log


def _run_script(script: Path, tmp_path: Path, **env: str) -> subprocess.CompletedProcess:
    import os

    path = f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}"
    return subprocess.run(["sh", str(script)], capture_output=True, text=True, env={"PATH": path, **env})


def test_a_pytorch_flow_triton_point_hands_off_its_llmapi_repository(tmp_path):
    results, point_id = _pytorch_results(tmp_path, "triton")
    out = tmp_path / "bundle"
    manifest = write_bundle(results, point_id, out, base_dir=tmp_path)
    model_yaml = (out / "model_repository" / "tensorrt_llm" / "1" / "model.yaml").read_text()
    assert "model: ${TRTSWEEP_MODEL_DIR}" in model_yaml and CKPT not in model_yaml
    assert manifest["variables"] == {"TRTSWEEP_MODEL_DIR": CKPT, "TRTSWEEP_MODEL_REPOSITORY": REPO}
    rendered = tmp_path / "rendered"
    subprocess.run([sys.executable, str(out / "render_repository.py"), str(out / "model_repository"), str(rendered),
                    f"TRTSWEEP_MODEL_DIR={CKPT}", f"TRTSWEEP_MODEL_REPOSITORY={REPO}"], check=True)  # fmt: skip
    assert yaml.safe_load((rendered / "tensorrt_llm" / "1" / "model.yaml").read_text())["model"] == CKPT
    assert yaml.safe_load((out / "llm_api_options.yml").read_text()) == OPTIONS
    # TP 2, yet one tritonserver: the llmapi model's LLM API starts the ranks
    native = " ".join((out / "launch" / "native.sh").read_text().replace("\\\n", " ").split())
    assert "mpirun" not in native and native.count("tritonserver") == 1
    smoke = manifest["smoke_command"]
    assert smoke[smoke.index("-m") + 1] == "tensorrt_llm" and smoke[smoke.index("-i") + 1] == "grpc"
    assert json.loads(smoke[smoke.index("--extra-inputs-json") + 1]) == {"exclude_input_from_output": True}
    assert manifest["checkpoint"]["dir_on_benchmark_host"] == CKPT and "engine" not in manifest
    assert "python3 hf_ptq.py --qformat fp8" in (out / "build" / "build.sh").read_text()
    readme = (out / "README.md").read_text()
    assert "pytorch flow served by Triton" in readme and "TRTSWEEP_MODEL_DIR=/srv/model" in readme


def test_a_trtllm_serve_point_launches_trtllm_serve_with_its_options(tmp_path):
    from trtsweep.toolchain.llmapi import serve as llmapi_serve

    results, point_id = _pytorch_results(tmp_path, "trtllm-serve")
    out = tmp_path / "bundle"
    manifest = write_bundle(results, point_id, out, base_dir=tmp_path)
    assert not (out / "model_repository").exists() and not (out / "render_repository.py").exists()
    assert manifest["ports"] == {"http": 8000} and manifest["server"] == "trtllm-serve"
    # the script runs: trtllm-serve (a recording stand-in) gets what the release's click options accept
    args = _recording(tmp_path, "trtllm-serve")
    ran = _run_script(out / "launch" / "native.sh", tmp_path, TRTSWEEP_MODEL_DIR="/srv/model")
    assert ran.returncode == 0, ran.stderr
    spec = llmapi_serve.ServeSpec(model="/srv/model", options_file=f"{out}/llm_api_options.yml", port=8000,
                                  host="0.0.0.0", tp=2, pp=1)  # fmt: skip
    assert args.read_text().splitlines() == llmapi_serve.argv("1.2", spec)[1:]
    missing = _run_script(out / "launch" / "native.sh", tmp_path)
    assert missing.returncode != 0 and "TRTSWEEP_MODEL_DIR" in missing.stderr
    docker = _recording(tmp_path, "docker")
    ran = _run_script(out / "launch" / "container.sh", tmp_path, TRTSWEEP_MODEL_STORE="/srv/store")
    assert ran.returncode == 0, ran.stderr
    argv = docker.read_text().splitlines()
    assert "/srv/store:/models:ro" in argv and f"{out}/llm_api_options.yml:/config/llm_api_options.yml:ro" in argv
    inner = argv[argv.index("nvcr.io/nvidia/tensorrt-llm/release:1.2.0") + 1 :]
    container_spec = llmapi_serve.ServeSpec(model="/models/model", options_file="/config/llm_api_options.yml",
                                            port=8000, host="0.0.0.0", tp=2, pp=1)  # fmt: skip
    assert inner == llmapi_serve.argv("1.2", container_spec)
    unit = next((out / "systemd").glob("*.service")).read_text()
    assert "ExecStart=trtllm-serve ${TRTSWEEP_MODEL_DIR} --backend pytorch" in unit
    assert "--extra_llm_api_options ${TRTSWEEP_BUNDLE}/llm_api_options.yml" in unit
    smoke = manifest["smoke_command"]
    assert smoke[smoke.index("-i") + 1 :][:5] == ["openai", "-m", "/@TRTSWEEP_MODEL_NAME@", "--endpoint", "completions"]
    assert smoke[smoke.index("-u") + 1].endswith(":8000")
    assert '-m "${TRTSWEEP_MODEL_NAME}"' in (out / "README.md").read_text()


def test_a_trtllm_serve_point_has_valid_kubernetes_manifests_with_its_options_in_a_configmap(tmp_path):
    import kubernetes_validate

    results, point_id = _pytorch_results(tmp_path, "trtllm-serve")
    out = tmp_path / "bundle"
    write_bundle(results, point_id, out, base_dir=tmp_path)
    docs = {p.stem: yaml.safe_load(p.read_text()) for p in (out / "k8s").glob("*.yaml")}
    assert set(docs) == {"pvc", "deployment", "service", "configmap"}
    for doc in docs.values():
        kubernetes_validate.validate(doc, kubernetes_validate.latest_version(), strict=True)
    pod = docs["deployment"]["spec"]["template"]
    container = pod["spec"]["containers"][0]
    assert container["command"] == ["trtllm-serve"] and container["args"][0] == "/models/model"
    assert container["args"][container["args"].index("--extra_llm_api_options") + 1] == "/config/llm_api_options.yml"
    assert {m["mountPath"] for m in container["volumeMounts"]} == {"/models", "/config", "/dev/shm"}
    assert yaml.safe_load(docs["configmap"]["data"]["llm_api_options.yml"]) == OPTIONS
    assert container["readinessProbe"]["httpGet"]["path"] == container["livenessProbe"]["httpGet"]["path"] == "/health"
    assert [p["containerPort"] for p in container["ports"]] == [8000]
    assert "annotations" not in pod["metadata"]  # trtllm-serve's /metrics is JSON, not Prometheus
    assert container["resources"]["limits"]["nvidia.com/gpu"] == 2


def test_the_hf_backends_trtllm_serve_counterpart_is_handed_off_as_trtsweeps_server(tmp_path):
    results, point_id = _pytorch_results(tmp_path, "trtllm-serve", backend="hf")
    out = tmp_path / "bundle"
    write_bundle(results, point_id, out, base_dir=tmp_path)
    native = " ".join((out / "launch" / "native.sh").read_text().replace("\\\n", " ").split())
    assert 'exec python3 -m trtsweep.serve.hf_openai "${TRTSWEEP_MODEL_DIR}" --backend pytorch' in native


def test_a_pytorch_point_without_its_options_file_is_refused(tmp_path):
    results, point_id = _pytorch_results(tmp_path, "trtllm-serve")
    (results / point_id / "llm_api_options.yml").unlink()
    with pytest.raises(TrtsweepError, match=r"llm_api_options.yml: missing \(a pytorch-flow point's LLM API options"):
        write_bundle(results, point_id, tmp_path / "b", base_dir=tmp_path)


# -- the generated files: templates/, shell quoting ------------------------------------------------------------------
def test_the_bundles_text_files_come_from_its_templates(tmp_path, monkeypatch):
    import importlib.resources

    import jinja2

    from trtsweep.handoff import render

    env = render.environment()
    templates = [name for name in env.list_templates() if name.endswith(".j2")]
    marked = {name: env.loader.get_source(env, name)[0] + f"# marked in {name}\n" for name in templates}
    monkeypatch.setattr(env, "loader", jinja2.ChoiceLoader([jinja2.DictLoader(marked), env.loader]))
    out = tmp_path / "bundle"
    write_bundle(_results(tmp_path, "p1", 900.0, 2), "p1", out, base_dir=tmp_path)
    made_from = {"README.md": "README.md.j2", "launch/native.sh": "launch.sh.j2", "launch/container.sh": "launch.sh.j2",
                 "build/build.sh": "build.sh.j2", "systemd/trtsweep-demo-p1.service": "unit.service.j2",
                 "slurm/trtsweep-demo-p1.sbatch": "sbatch.sh.j2"}  # fmt: skip
    assert sorted(set(made_from.values())) == sorted(templates)
    for rel, template in made_from.items():
        assert (out / rel).read_text().endswith(f"# marked in {template}\n"), rel
    shipped = importlib.resources.files("trtsweep.handoff") / "templates" / "render_repository.py.txt"
    assert (out / "render_repository.py").read_bytes() == shipped.read_bytes()


def test_values_with_shell_metacharacters_reach_the_commands_unchanged_and_no_secret_is_written(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_TOKEN", "hf_secret_0123456789")
    results = _results(tmp_path, "p1", 900.0, 1)
    point = json.loads((results / "p1" / "point.json").read_text())
    extra = {"stop": ["'$HOME'", "`id`", '"'], "x": f"a;b $(touch {tmp_path}/pwned)"}
    point["benchmark"]["extra_inputs"] = extra
    (results / "p1" / "point.json").write_text(json.dumps(point))
    image = f"registry.example/triton:1 $(touch {tmp_path}/pwned) `id` 'q' \"d\"; x"
    out = tmp_path / "bundle"
    write_bundle(results, "p1", out, image=image, base_dir=tmp_path)
    docker = _recording(tmp_path, "docker")
    ran = _run_script(out / "launch" / "container.sh", tmp_path, TRTSWEEP_MODEL_STORE="/srv/a store")
    assert ran.returncode == 0, ran.stderr
    argv = docker.read_text().splitlines()
    assert image in argv and "/srv/a store:/models:ro" in argv
    # the README's smoke test, run as written: llm-perf gets the request inputs as the point has them
    readme = (out / "README.md").read_text().splitlines()
    start = next(i for i, line in enumerate(readme) if line.strip() == "llm-perf \\")
    end = readme.index("", start)
    (tmp_path / "smoke.sh").write_text("\n".join(readme[start:end]) + "\n")
    llm_perf = _recording(tmp_path, "llm-perf")
    ran = _run_script(tmp_path / "smoke.sh", tmp_path, TRTSWEEP_HOST="h", TRTSWEEP_TOKENIZER_DIR="/t")
    assert ran.returncode == 0, ran.stderr
    args = llm_perf.read_text().splitlines()
    assert args[:2] == ["-u", "h:8001"] and json.loads(args[args.index("--extra-inputs-json") + 1]) == extra
    assert not (tmp_path / "pwned").exists()
    assert not [p for p in out.rglob("*") if p.is_file() and b"hf_secret_0123456789" in p.read_bytes()]


def test_deployment_names_fit_63_characters_and_stay_apart_when_cut():
    """The flows sweep's three points differ only past the 63rd character of their names: each keeps its own
    handoff folder, systemd unit and Kubernetes objects (before: all three were one name)."""
    import re

    from trtsweep.handoff.bundle import _name

    config = "smollm2-135m_float32_tp1pp1_bs4_isl1024osl128_stream"
    variants = ("", "_pytorch-triton", "_pytorch-serve")
    names = {_name({"sweep": "smollm2-cpu-flows"}, f"{config}{variant}") for variant in variants}
    assert len(names) == 3 and all(len(n) <= 63 and re.fullmatch(r"[a-z0-9]([a-z0-9-]*[a-z0-9])?", n) for n in names)
    assert _name({"sweep": "s"}, "p_fp8") == "trtsweep-s-p-fp8"  # a short name is left as it was
