"""`trtsweep handoff`: one measured point of a sweep as a bundle that operations can deploy.

Reads `results/<sweep>/<point>/` (status.json, point.json, repository.json, triton_repo/, llm_api_options.yml, the
build records and the benchmark's summary) and writes `<out>/`:

    README.md                   for operations: what it is, how to deploy it four ways, the smoke test, what to watch
    bundle.json                 the manifest: point, settings, model and revision, versions, artifacts, ports, variables
    model_repository/           Triton: the repository exactly as it was served, host paths turned into ${TRTSWEEP_*}
                                variables (engine flow: inflight_batcher_llm; pytorch flow: the llmapi model.yaml)
    render_repository.py        fills those variables in (Python 3 standard library only)
    llm_api_options.yml         pytorch flow: the LLM API options the point was served with
    build/                      how the artifacts were made: the recorded commands (*.json), their logs, build.sh
    launch/native.sh            the server on the host: tritonserver (mpirun for an engine of TP x PP > 1; one process
                                for the pytorch flow, whose LLM API starts its ranks) or trtllm-serve
    launch/container.sh         the same in the point's container image, the model store mounted at /models
    systemd/trtsweep-<name>.service
    k8s/                        PersistentVolumeClaim, Deployment (GPUs, startup/readiness/liveness probes on the
                                server's health endpoints; Triton's Prometheus scrape annotations), Service, and for
                                trtllm-serve a ConfigMap with the LLM API options
    smoke/prompts.jsonl         a few of the sweep's own prompts, for `llm-perf` against the deployed server
    evidence/                   the point's benchmark results and status (the numbers the choice was made on)

`playbooks/handoff.yml` deploys a bundle to serving hosts (native runtime) and runs its smoke test.
"""

from __future__ import annotations

import json
import re
import shlex
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from trtsweep import __version__
from trtsweep.common.fileio import atomic_write_text, file_sha256
from trtsweep.errors import TrtsweepError
from trtsweep.report import results_table, verdict
from trtsweep.serve.command import docker_run, launch_argv
from trtsweep.serve.openai_server import HF_SERVER
from trtsweep.serve.spec import ContainerSpec, ServerSpec
from trtsweep.sweep.slo import check as slo_check
from trtsweep.toolchain.llmapi import serve as llmapi_serve

# repository parameter -> the variable that replaces its host path (model: the checkpoint of the pytorch flow)
VARIABLES = {
    "engine_dir": "TRTSWEEP_ENGINE_DIR", "tokenizer_dir": "TRTSWEEP_TOKENIZER_DIR", "model": "TRTSWEEP_MODEL_DIR",
}  # fmt: skip
REPOSITORY_VARIABLE = "TRTSWEEP_MODEL_REPOSITORY"
STORE = "/models"  # the model store inside the container and the Kubernetes pod
STORE_LAYOUT = {
    REPOSITORY_VARIABLE: f"{STORE}/triton_repo",
    "TRTSWEEP_ENGINE_DIR": f"{STORE}/engine",
    "TRTSWEEP_TOKENIZER_DIR": f"{STORE}/tokenizer",
    "TRTSWEEP_MODEL_DIR": f"{STORE}/model",
}
PORTS = {"http": 8000, "grpc": 8001, "metrics": 8002}
OPENAI_PORTS = {"http": 8000}  # trtllm-serve: the OpenAI API, /health and /metrics on one port
OPTIONS_FILE = "llm_api_options.yml"
CONFIG_DIR = "/config"  # the LLM API options inside trtllm-serve's container and pod
BUILD_RECORDS = ("checkpoint", "trtllm_build", "quantize")
EVIDENCE = ("llm_perf.summary.json", "llm_perf.csv", "status.json", "point.json", "repository.json")
SMOKE_REQUESTS = 4
RENDER_SCRIPT = '''#!/usr/bin/env python3
"""Copy a trtsweep handoff model repository, filling in its ${TRTSWEEP_*} variables.

    render_repository.py <bundle>/model_repository <out> TRTSWEEP_ENGINE_DIR=/path TRTSWEEP_TOKENIZER_DIR=/path
"""
import re
import sys
from pathlib import Path

src, out, pairs = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3:]
values = dict(p.split("=", 1) for p in pairs)
for path in sorted(src.rglob("*")):
    if path.is_file():
        text = path.read_text(encoding="utf-8")
        missing = sorted(set(re.findall(r"\\$\\{(TRTSWEEP_[A-Z_]+)\\}", text)) - set(values))
        if missing:
            sys.exit(f"{path}: give {', '.join(m + '=...' for m in missing)}")
        text = re.sub(r"\\$\\{(TRTSWEEP_[A-Z_]+)\\}", lambda m: values[m.group(1)], text)
        target = out / path.relative_to(src)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
print(f"wrote {out}")
'''


def _json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise TrtsweepError(f"{path}: missing (was the point run with this trtsweep version? rerun it)") from exc
    except json.JSONDecodeError as exc:
        raise TrtsweepError(f"{path}: not valid JSON ({exc.msg} at line {exc.lineno})") from exc


def best_point(results_dir: Path) -> tuple[str, str]:
    """(the point the report names best, by the same `verdict.judge` over the same rows and the sweep's SLOs kept in
    slo.json; the report's sentence saying so). Failed or lost points, and levels of another server, never count."""
    slo_file = results_dir / "slo.json"
    slo = slo_check(_json(slo_file)) if slo_file.is_file() else {}
    judged = verdict.judge(results_table.collect(results_dir, slo), slo)
    first = verdict.summary_lines(judged)[0]
    if judged["best"] is None:
        raise TrtsweepError(f"{results_dir}: {first}; nothing to hand off (give --point to choose one)")
    return judged["best"]["point"], first


def _templated(text: str, paths: dict[str, str]) -> str:
    """`text` with every host path of `paths` (variable -> path) replaced by ${variable}, longest path first."""
    for variable, path in sorted(paths.items(), key=lambda item: -len(item[1])):
        text = text.replace(path, "${" + variable + "}")
    return text


def _repository(point_dir: Path, repo: dict[str, Any], triton: bool) -> tuple[dict[str, str], dict[str, str]]:
    """(relative path -> templated text of the served Triton repository, variable -> the host path it replaced)."""
    params = repo.get("params") or {}
    paths = {
        var: str(params[key]) for key, var in VARIABLES.items() if isinstance(params.get(key), str) and params[key]
    }
    if paths.get("TRTSWEEP_TOKENIZER_DIR") == paths.get("TRTSWEEP_ENGINE_DIR"):  # hf backend: one model directory
        paths.pop("TRTSWEEP_TOKENIZER_DIR", None)
    if not triton:  # trtllm-serve: no repository, the checkpoint only
        return {}, paths
    served = point_dir / "triton_repo"
    if not served.is_dir():
        raise TrtsweepError(f"{served}: missing (the point's results have no model repository; rerun the point)")
    paths[REPOSITORY_VARIABLE] = repo["repository"]
    files = {}
    for path in sorted(p for p in served.rglob("*") if p.is_file() and "__pycache__" not in p.parts):
        files[str(path.relative_to(served))] = _templated(path.read_text(encoding="utf-8"), paths)
    return files, paths


def _sentinel(variable: str) -> str:
    return f"/@{variable}@"


def _shell(argv: list[str]) -> str:
    """A shell command line, one option (with its value) per line, every argument quoted; the ${TRTSWEEP_*}
    sentinels are left for the shell to expand."""
    words = [shlex.quote(a) for a in argv]
    line = words[0] + "".join((" \\\n  " if w.startswith("-") or w == ":" else " ") + w for w in words[1:])
    return re.sub(r"/@(TRTSWEEP_[A-Z_]+)@", r'"${\1}"', line)


@dataclass(frozen=True)
class Serving:
    """How the bundle's server runs: Triton (the engine flow's inflight_batcher_llm or the pytorch flow's llmapi
    repository) or trtllm-serve (OpenAI-compatible). Command lines hold ${TRTSWEEP_*} sentinels (_sentinel)."""

    kind: str  # triton | trtllm-serve
    native: list[str]  # on the host
    inner: list[str]  # inside the container / pod, the model store at STORE
    volumes: list[str]  # docker run's -v arguments
    ports: dict[str, int]
    ready: str  # health paths
    live: str
    native_needs: dict[str, str]  # variable -> what to set it to, for launch/native.sh and the systemd unit
    container_needs: dict[str, str]
    scrape: bool  # Prometheus metrics (Triton's metrics port)


def _triton_argv(world_size: int, repository: str) -> list[str]:
    spec = ServerSpec(
        model_repository=Path(repository),
        log_file=Path("/dev/null"),
        runtime="native",
        http_port=PORTS["http"],
        grpc_port=PORTS["grpc"],
        metrics_port=PORTS["metrics"],
        bind_address="0.0.0.0",
        world_size=world_size,
    )
    return launch_argv(spec, "tritonserver")


def _openai_argv(point: dict[str, Any], model: str, options_file: str) -> list[str]:
    """trtllm-serve as the point ran it (checked against the release's options), on all addresses; the hf backend's
    counterpart for a point of the CPU test bed."""
    spec = llmapi_serve.ServeSpec(
        model=model, options_file=options_file, port=OPENAI_PORTS["http"], host="0.0.0.0", tp=int(point["tp"]),
        pp=int(point["pp"]), ep=(point.get("llm_api") or {}).get("moe_expert_parallel_size"),
    )  # fmt: skip
    argv = llmapi_serve.argv(point["llm_api_release"], spec)
    return ["python3", *HF_SERVER, *argv[1:]] if point["backend"] == "hf" else argv


def serving(point: dict[str, Any]) -> Serving:
    if point.get("server", "triton") == "trtllm-serve":
        options = f"{_sentinel('TRTSWEEP_BUNDLE')}/{OPTIONS_FILE}"
        return Serving(
            kind="trtllm-serve",
            native=_openai_argv(point, _sentinel("TRTSWEEP_MODEL_DIR"), options),
            inner=_openai_argv(point, STORE_LAYOUT["TRTSWEEP_MODEL_DIR"], f"{CONFIG_DIR}/{OPTIONS_FILE}"),
            volumes=[
                "-v",
                f"{_sentinel('TRTSWEEP_MODEL_STORE')}:{STORE}:ro",
                "-v",
                f"{options}:{CONFIG_DIR}/{OPTIONS_FILE}:ro",
            ],
            ports=OPENAI_PORTS,
            ready="/health",
            live="/health",
            native_needs={"TRTSWEEP_MODEL_DIR": "the model checkpoint directory"},
            container_needs={"TRTSWEEP_MODEL_STORE": "the model store (model/)"},
            scrape=False,
        )
    # the pytorch flow's Triton is one process: its LLM API starts the TP x PP ranks
    pytorch = point.get("flow", "engine") == "pytorch"
    world = 1 if pytorch else int(point.get("world_size") or 1)
    return Serving(
        kind="triton",
        native=_triton_argv(world, _sentinel(REPOSITORY_VARIABLE)),
        inner=_triton_argv(world, STORE_LAYOUT[REPOSITORY_VARIABLE]),
        volumes=["-v", f"{_sentinel('TRTSWEEP_MODEL_STORE')}:{STORE}:ro"],
        ports=PORTS,
        ready="/v2/health/ready",
        live="/v2/health/live",
        native_needs={REPOSITORY_VARIABLE: "the rendered model repository"},
        container_needs={
            "TRTSWEEP_MODEL_STORE": f"the model store (triton_repo/, {'model/' if pytorch else 'engine/, tokenizer/'})"
        },
        scrape=True,
    )


HEAD = "#!/bin/sh\n# generated by trtsweep handoff; see ../README.md\nset -eu\n"
# the bundle's own directory, for the LLM API options beside the scripts
BUNDLE_DIR = 'TRTSWEEP_BUNDLE="${TRTSWEEP_BUNDLE:-$(cd "$(dirname "$0")/.." && pwd)}"\n'


def _needs(needs: dict[str, str]) -> str:
    return "".join(f': "${{{var}:?set it to {text}}}"\n' for var, text in needs.items())


def _launch(point: dict[str, Any], s: Serving, image: str, name: str) -> dict[str, str]:
    container = docker_run(ContainerSpec(image=image, name=name), None, s.volumes, s.inner)
    bundle = BUNDLE_DIR if s.kind == "trtllm-serve" else ""
    return {
        "launch/native.sh": f"{HEAD}{_needs(s.native_needs)}{bundle}exec {_shell(s.native)}\n",
        "launch/container.sh": f"{HEAD}{_needs(s.container_needs)}{bundle}exec {_shell(container)}\n",
    }


def _systemd(point: dict[str, Any], s: Serving, name: str) -> str:
    exec_start = " ".join(re.sub(r"/@(TRTSWEEP_[A-Z_]+)@", r"${\1}", a) for a in s.native)
    variables = [*s.native_needs, *(["TRTSWEEP_BUNDLE"] if s.kind == "trtllm-serve" else [])]
    server = "Triton Inference Server" if s.kind == "triton" else "trtllm-serve"
    return f"""[Unit]
Description={server}: {name} (trtsweep handoff of point {point["id"]})
After=network-online.target
Wants=network-online.target

[Service]
Type=simple
# {"=..., ".join(variables)}=...; CUDA_VISIBLE_DEVICES=... if the host has more GPUs
EnvironmentFile=/etc/trtsweep/{name}.env
ExecStart={exec_start}
Restart=on-failure
RestartSec=10
TimeoutStartSec=900
TimeoutStopSec=60
LimitMEMLOCK=infinity
LimitSTACK=67108864

[Install]
WantedBy=multi-user.target
"""


class _Dumper(yaml.SafeDumper):
    """Plain YAML for people: a repeated mapping (the labels) is written out each time, no anchors."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def _k8s(
    point: dict[str, Any], s: Serving, image: str, name: str, store_gib: int, options: str | None
) -> dict[str, str]:
    labels = {"app.kubernetes.io/name": name, "app.kubernetes.io/part-of": "trtsweep"}
    gpus = int(point.get("world_size") or 1) if point.get("gpus") or point.get("backend") == "tensorrtllm" else 0
    scrape = {
        "prometheus.io/scrape": "true",
        "prometheus.io/port": str(PORTS["metrics"]),
        "prometheus.io/path": "/metrics",
    }

    def probe(path: str, period: int, failures: int) -> dict[str, Any]:
        return {"httpGet": {"path": path, "port": "http"}, "periodSeconds": period, "failureThreshold": failures}

    mounts: list[dict[str, Any]] = [
        {"name": "model-store", "mountPath": STORE, "readOnly": True},
        {"name": "dshm", "mountPath": "/dev/shm"},
    ]
    volumes: list[dict[str, Any]] = [
        {"name": "model-store", "persistentVolumeClaim": {"claimName": f"{name}-models", "readOnly": True}},
        {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "2Gi"}},
    ]
    docs: dict[str, dict[str, Any]] = {}
    if options is not None:  # trtllm-serve's LLM API options, from a ConfigMap
        mounts.append({"name": "llm-api-options", "mountPath": CONFIG_DIR, "readOnly": True})
        volumes.append({"name": "llm-api-options", "configMap": {"name": f"{name}-llm-api-options"}})
        docs["configmap"] = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": f"{name}-llm-api-options", "labels": labels},
            "data": {OPTIONS_FILE: options},
        }
    container: dict[str, Any] = {
        "name": s.kind,
        "image": image,
        "command": s.inner[:1],
        "args": s.inner[1:],
        "ports": [{"name": port, "containerPort": number, "protocol": "TCP"} for port, number in s.ports.items()],
        # loading takes minutes: the startup probe gives it 15, then readiness and liveness take over
        "startupProbe": probe(s.ready, 10, 90),
        "readinessProbe": probe(s.ready, 10, 3),
        "livenessProbe": probe(s.live, 15, 4),
        "volumeMounts": mounts,
    }
    if gpus:
        container["resources"] = {"limits": {"nvidia.com/gpu": gpus}}
    pod_metadata: dict[str, Any] = {"labels": labels, **({"annotations": scrape} if s.scrape else {})}
    docs["pvc"] = {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": f"{name}-models", "labels": labels},
        "spec": {"accessModes": ["ReadOnlyMany"], "resources": {"requests": {"storage": f"{store_gib}Gi"}}},
    }
    docs["deployment"] = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "labels": labels},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": labels},
            "template": {"metadata": pod_metadata, "spec": {"containers": [container], "volumes": volumes}},
        },
    }
    docs["service"] = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "labels": labels, **({"annotations": scrape} if s.scrape else {})},
        "spec": {
            "selector": labels,
            "ports": [{"name": port, "port": number, "targetPort": port} for port, number in s.ports.items()],
        },
    }
    return {f"k8s/{kind}.yaml": yaml.dump(doc, Dumper=_Dumper, sort_keys=False) for kind, doc in docs.items()}


def _smoke(point: dict[str, Any], base_dir: Path) -> str:
    data = Path(point["benchmark"]["input_data"])
    data = data if data.is_absolute() else base_dir / data
    try:
        lines = [line for line in data.read_text(encoding="utf-8").splitlines() if line.strip()]
    except OSError as exc:
        raise TrtsweepError(f"{data}: the point's prompts cannot be read for the smoke test ({exc.strerror})") from exc
    return "\n".join(lines[:SMOKE_REQUESTS]) + "\n"


def served_model(point: dict[str, Any]) -> str:
    """The model llm-perf asks for: the engine flow's ensemble, the llmapi model, or trtllm-serve's model id (the
    last component of the checkpoint directory it serves: `model` in the container and the pod)."""
    if point.get("server", "triton") == "trtllm-serve":
        return _sentinel("TRTSWEEP_MODEL_NAME")
    return "tensorrt_llm" if point.get("flow", "engine") == "pytorch" else "ensemble"


def smoke_command(point: dict[str, Any], url: str = _sentinel("TRTSWEEP_HOST")) -> list[str]:
    """llm-perf against the deployed server: the point's protocol, request inputs and options, a few prompts."""
    bench = point["benchmark"]
    openai = point.get("server", "triton") == "trtllm-serve"
    protocol = "openai" if openai else bench.get("protocol", "grpc")
    port = PORTS["grpc"] if protocol == "grpc" else PORTS["http"]
    argv = ["llm-perf", "-u", f"{url}:{port}", "-i", protocol, "-m", served_model(point)]
    if openai:
        argv += ["--endpoint", "completions"]  # the prompt as the benchmark sent it (chat template by llm-perf)
    argv += ["--input-data", "smoke/prompts.jsonl", "--concurrency", "1", "--num-requests", str(SMOKE_REQUESTS),
             "--warmup-requests", "0"]  # fmt: skip
    if bench.get("max_tokens"):
        argv += ["--max-tokens", str(bench["max_tokens"])]
    if bench.get("chat_template"):
        tokenizer = "TRTSWEEP_MODEL_DIR" if point.get("flow", "engine") == "pytorch" else "TRTSWEEP_TOKENIZER_DIR"
        argv += ["--chat-template", "--tokenizer-path", _sentinel(tokenizer)]  # the pytorch flow's checkpoint has it
    if bench.get("extra_inputs"):
        argv += ["--extra-inputs-json", json.dumps(bench["extra_inputs"], sort_keys=True)]
    if not point.get("streaming", True):
        argv.append("--no-streaming")
    return argv


def _readme_artifacts(manifest: dict[str, Any]) -> str:
    variables = "\n".join(f"- `{k}`: on the benchmark host it was `{v}`" for k, v in manifest["variables"].items())
    p = manifest["point"]
    if p.get("flow", "engine") == "engine":
        return f"""- Engine / weights: `build/` holds the exact commands that made them (`*.json`, `build.sh`) and their
  logs; `bundle.json` lists the engine's files with sha256 when the controller could see them. Copy the engine (or
  rebuild with `build/build.sh` on the same TensorRT-LLM version) and the tokenizer (the HF model directory) to the
  serving host.
- The model repository (`model_repository/`) is the one that was benchmarked, with host paths as variables:
{variables}

      python3 render_repository.py model_repository /srv/triton_repo \\
        TRTSWEEP_ENGINE_DIR=/srv/engine TRTSWEEP_TOKENIZER_DIR=/srv/tokenizer TRTSWEEP_MODEL_REPOSITORY=/srv/triton_repo
"""
    made = ("`build/` holds the ModelOpt command that quantized it (`checkpoint.json`, `build.sh`) and its log; "
            if manifest["build_records"] else "it is the Hugging Face checkpoint as downloaded; ")  # fmt: skip
    text = f"""- The checkpoint (PyTorch flow, no engine): {made}`bundle.json` lists its files with sha256 when the
  controller could see them. Copy it to the serving host (`TRTSWEEP_MODEL_DIR`); it is also the tokenizer.
- `llm_api_options.yml`: the LLM API options the point was served with (batch size, KV cache, CUDA graphs, ...),
  TensorRT-LLM {p.get("llm_api_release")}'s names.
"""
    if p.get("server", "triton") == "trtllm-serve":
        return text + f"- Host paths on the benchmark host:\n{variables}\n"
    return (
        text
        + f"""- The model repository (`model_repository/`, Triton's llmapi model: `tensorrt_llm/1/model.yaml` holds the
  same options) is the one that was benchmarked, with host paths as variables:
{variables}

      python3 render_repository.py model_repository /srv/triton_repo \\
        TRTSWEEP_MODEL_DIR=/srv/model TRTSWEEP_MODEL_REPOSITORY=/srv/triton_repo
"""
    )


def _readme_run(manifest: dict[str, Any], s: Serving) -> str:
    name, ports = manifest["name"], ", ".join(f"{k} {v}" for k, v in s.ports.items())
    ansible = """- Ansible (native runtime, deploys, waits until ready and runs the smoke test; idempotent):
  `ansible-playbook playbooks/handoff.yml -i <serving hosts> -e handoff_bundle=<this directory>`
"""
    if s.kind == "trtllm-serve":
        return (
            ansible
            + f"""- Native: `TRTSWEEP_MODEL_DIR=/srv/model sh launch/native.sh` (the options file is read from this
  directory)
- systemd: `systemd/{name}.service` (put `TRTSWEEP_MODEL_DIR=...` and `TRTSWEEP_BUNDLE=<this directory>` in
  `/etc/trtsweep/{name}.env`), then `systemctl enable --now {name}`
- Container: a model store with `model/` (the checkpoint): `TRTSWEEP_MODEL_STORE=/srv/store sh launch/container.sh`
  (image `{manifest["image"]}`; the options file is mounted at `{CONFIG_DIR}/{OPTIONS_FILE}`)
- Kubernetes: the same store layout on the `{name}-models` volume, then `kubectl apply -f k8s/` (the options come
  from the ConfigMap `{name}-llm-api-options`; ports {ports}; {manifest["gpus"]} GPU(s)).
"""
        )
    store = "`model/`" if manifest["point"].get("flow") == "pytorch" else "`engine/` and `tokenizer/`"
    rendered = (f"`{STORE}/model`" if manifest["point"].get("flow") == "pytorch"
                else f"`{STORE}/engine`, `{STORE}/tokenizer`")  # fmt: skip
    return (
        ansible
        + f"""- Native: `TRTSWEEP_MODEL_REPOSITORY=/srv/triton_repo sh launch/native.sh`
- systemd: `systemd/{name}.service` (put `TRTSWEEP_MODEL_REPOSITORY=...` in `/etc/trtsweep/{name}.env`), then
  `systemctl enable --now {name}`
- Container: a model store with `triton_repo/` (rendered for {rendered}) and {store}:
  `TRTSWEEP_MODEL_STORE=/srv/store sh launch/container.sh` (image `{manifest["image"]}`)
- Kubernetes: the same store layout on the `{name}-models` volume, then `kubectl apply -f k8s/`
  (ports {ports}; {manifest["gpus"]} GPU(s)).
"""
    )


def _readme_watch(s: Serving) -> str:
    if s.kind == "trtllm-serve":
        return f"""## 4. What to watch (trtllm-serve on :{s.ports["http"]})
- `/health` failing after start: the model failed to load, or the executor died; see the server log.
- `/metrics` (JSON): the runtime's iteration statistics (GPU memory, in-flight batching: active and queued
  requests, KV-cache blocks). Queued requests growing means the load is above what was measured (compare with the
  table above); free KV-cache blocks near 0 means requests are being held back. They exist because
  `llm_api_options.yml` sets `enable_iter_perf_stats`; a GET takes what it returns off a queue of the last
  `iter_stats_max_iterations` (1000 by default), so give them one reader that polls before that many pile up.
- HTTP 5xx / 400 answers to `/v1/completions`: failing requests; the server log says why.
"""
    return f"""## 4. What to watch (Triton metrics on :{PORTS["metrics"]}/metrics)
- `nv_inference_request_failure` rising: requests failing; the server log says why.
- `nv_inference_queue_duration_us` / `nv_inference_request_success` growing: requests wait in the queue, the
  load is above what was measured (compare with the table above: latency climbs past the best level's TTFT p99).
- `nv_trt_llm_kv_cache_block_metrics` (TensorRT-LLM backend): free KV-cache blocks near 0 means requests
  are being held back; `nv_gpu_memory_used_bytes`, `nv_gpu_utilization`.
- Readiness (`/v2/health/ready`) failing after start: the model failed to load; see the server log.
"""


def _readme(manifest: dict[str, Any], s: Serving) -> str:
    p, headline = manifest["point"], manifest["evidence"]
    smoke = _shell(manifest["smoke_command"]).replace("\n", "\n    ")
    levels = "\n".join(
        f"| {lv['concurrency']} | {lv['succeeded']}/{lv['requests']} | {_num(lv['output_token_throughput'])} | "
        f"{_num(lv['ttft_p99_ms'])} | {_num(lv['e2e_p99_ms'])} |"
        for lv in headline
    )
    flow = p.get("flow", "engine")
    served_by = "Triton" if s.kind == "triton" else "trtllm-serve"
    smoke_env = "TRTSWEEP_HOST=<server> " + (
        "TRTSWEEP_MODEL_DIR=<checkpoint dir>" if flow == "pytorch" else "TRTSWEEP_TOKENIZER_DIR=<tokenizer dir>"
    )
    if s.kind == "trtllm-serve":
        smoke_env += (
            " TRTSWEEP_MODEL_NAME=<the served model id: model in the container, else the checkpoint's directory name>"
        )
    return f"""# Handoff: {manifest["name"]}

Point `{p["id"]}` of sweep `{p["sweep"]}`; chosen {manifest["chosen"]}. Model `{p["model"]["repo_id"]}` at revision
`{manifest["model_revision"]}`, backend `{p["backend"]}`, {flow} flow served by {served_by}, precision
`{p["precision"]}`, TP {p["tp"]} x PP {p["pp"]}, max batch size {p["max_batch_size"]}, streaming
{str(p["streaming"]).lower()}. TensorRT-LLM `{manifest["versions"]["tensorrt_llm"]}`, trtsweep
`{manifest["versions"]["trtsweep"]}`. Everything below was generated by `trtsweep handoff` from the sweep's results;
`bundle.json` has it as data.

## What it measured (evidence/, measured on {manifest["measured_on"]})

| concurrency | ok/requests | output tok/s | TTFT p99 ms | E2E p99 ms |
|---|---|---|---|---|
{levels}

## 1. The artifacts
{_readme_artifacts(manifest)}
## 2. Run it (pick one)
{_readme_run(manifest, s)}
## 3. Smoke test
Every request must succeed (exit status 0 and `{SMOKE_REQUESTS}/{SMOKE_REQUESTS} ok`):

    {smoke_env} \\
    {smoke}

{_readme_watch(s)}"""


def _num(value: Any) -> str:
    return "-" if value is None else f"{value:.1f}" if isinstance(value, float) else str(value)


def _files(directory: str) -> list[dict[str, Any]]:
    """The engine's (or checkpoint's) files with their sizes and sha256, when the controller can see them."""
    root = Path(directory) if directory else None
    if root is None or not root.is_dir():
        return []
    return [
        {"path": str(p.relative_to(root)), "bytes": p.stat().st_size, "sha256": file_sha256(p)}
        for p in sorted(root.rglob("*"))
        if p.is_file()
    ]


def _name(point: dict[str, Any], point_id: str) -> str:
    return re.sub(r"[^a-z0-9-]+", "-", f"trtsweep-{point['sweep']}-{point_id}".lower()).strip("-")[:63].rstrip("-")


def write_bundle(
    results_dir: Path, point_id: str, out: Path, image: str | None = None, base_dir: Path | None = None
) -> dict[str, Any]:
    """Write the bundle of one point (`best` for the best one) into `out`; return its manifest."""
    chosen = "by hand (--point)"
    if point_id == "best":
        point_id, chosen = best_point(results_dir)
    point_dir = results_dir / point_id
    status = _json(point_dir / "status.json")
    if status.get("status") != "ok":
        raise TrtsweepError(
            f"point {point_id}: status {status.get('status')!r}, not ok; only a measured point can be handed off"
        )
    point, repo = _json(point_dir / "point.json"), _json(point_dir / "repository.json")
    pytorch = point.get("flow", "engine") == "pytorch"
    options_file = point_dir / OPTIONS_FILE
    if pytorch and not options_file.is_file():
        raise TrtsweepError(f"{options_file}: missing (a pytorch-flow point's LLM API options; rerun the point)")
    summary = _json(point_dir / "llm_perf.summary.json")
    name = _name(point, point_id)
    image = image or (point.get("trtllm") or {}).get("container_image")
    if not image:
        raise TrtsweepError(
            f"point {point_id} names no container image (trtllm.container_image): give --image for "
            "the container and Kubernetes files"
        )
    s = serving(point)
    files, host_paths = _repository(point_dir, repo, triton=s.kind == "triton")
    from trtsweep.perf.export import headline

    records = [n for n in BUILD_RECORDS if (point_dir / f"{n}.json").is_file()]
    artifact_dir = host_paths.get("TRTSWEEP_MODEL_DIR" if pytorch else "TRTSWEEP_ENGINE_DIR", "")
    artifact_files = _files(artifact_dir)
    artifact_bytes = repo.get("engine_size_bytes") or sum(f["bytes"] for f in artifact_files)
    manifest = {
        "name": name,
        "chosen": chosen,
        "point": point,
        "server": s.kind,
        "model_revision": repo.get("model_revision") or point["model"].get("revision"),
        "versions": {
            "tensorrt_llm": (point.get("trtllm") or {}).get("version") or "none (hf backend)",
            "trtsweep": __version__,
            "measured_with": status.get("trtsweep"),
        },
        "measured_on": f"{status.get('host')} GPUs {status.get('gpus') or '-'}, run {status.get('run_id')}",
        "settings_hash": status.get("settings_hash"),
        "image": image,
        "gpus": int(point.get("world_size") or 1),
        "ports": s.ports,
        "variables": host_paths,
        "repository_params": repo["params"],
        "checkpoint" if pytorch else "engine": {
            "dir_on_benchmark_host": artifact_dir,
            "size_bytes": artifact_bytes or None,
            "files": artifact_files,
        },
        "build_records": records,
        "evidence": [headline(lv, lv.get("summary", {})) for lv in summary.get("levels", [])],
        "smoke_command": smoke_command(point),
    }
    out.mkdir(parents=True, exist_ok=True)
    options = options_file.read_text(encoding="utf-8") if pytorch else None
    written: dict[str, str] = {f"model_repository/{rel}": text for rel, text in files.items()}
    if files:
        written["render_repository.py"] = RENDER_SCRIPT
    if options is not None:
        written[OPTIONS_FILE] = options
    written.update(_launch(point, s, image, name))
    written[f"systemd/{name}.service"] = _systemd(point, s, name)
    store_gib = max(10, 2 * -(-int(artifact_bytes or 0) // (1 << 30)))
    written.update(_k8s(point, s, image, name, store_gib, options if s.kind == "trtllm-serve" else None))
    written["smoke/prompts.jsonl"] = _smoke(point, base_dir or Path.cwd())
    build = [" ".join(shlex.quote(a) for a in _json(point_dir / f"{n}.json").get("command", [])) for n in records]
    written["build/build.sh"] = (
        "#!/bin/sh\n# the commands that made this point's artifacts, in order\nset -eux\n"
        + "".join(f"{line}\n" for line in build if line)
    )
    written["bundle.json"] = json.dumps(manifest, indent=2, ensure_ascii=False) + "\n"
    written["README.md"] = _readme(manifest, s)
    for rel, text in written.items():
        atomic_write_text(out / rel, text)
    for rel in [*(f"{n}.{ext}" for n in records for ext in ("json", "log")), *EVIDENCE]:
        src = point_dir / rel
        if src.is_file():
            dest = out / ("build" if rel.split(".")[0] in BUILD_RECORDS else "evidence") / rel
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(src, dest)
    for script in ("launch/native.sh", "launch/container.sh", "build/build.sh", "render_repository.py"):
        if (out / script).is_file():
            (out / script).chmod(0o755)
    return manifest
