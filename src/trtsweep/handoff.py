"""`trtsweep handoff`: one measured point of a sweep as a bundle that operations can deploy.

Reads `results/<sweep>/<point>/` (status.json, point.json, repository.json, triton_repo/, the build records and the
benchmark's summary) and writes `<out>/`:

    README.md                   for operations: what it is, how to deploy it four ways, the smoke test, what to watch
    bundle.json                 the manifest: point, settings, model and revision, versions, engine, ports, variables
    model_repository/           the repository exactly as it was served, host paths turned into ${TRTSWEEP_*} variables
    render_repository.py        fills those variables in (Python 3 standard library only)
    build/                      how the engine was built: the recorded commands (*.json), their logs, build.sh
    launch/native.sh            tritonserver (mpirun for TP x PP > 1) on the host
    launch/container.sh         the same in the NGC TensorRT-LLM Triton container, the model store mounted at /models
    systemd/trtsweep-<name>.service
    k8s/                        PersistentVolumeClaim, Deployment (GPUs, startup/readiness/liveness probes on Triton's
                                health endpoints, Prometheus scrape annotations), Service
    smoke/prompts.jsonl         a few of the sweep's own prompts, for `llm-perf` against the deployed server
    evidence/                   the point's benchmark results and status (the numbers the choice was made on)

`playbooks/handoff.yml` deploys a bundle to serving hosts (native runtime) and runs its smoke test.
"""

from __future__ import annotations

import hashlib
import json
import re
import shlex
import shutil
from pathlib import Path
from typing import Any

import yaml

from trtsweep import __version__, results_table, verdict
from trtsweep.errors import TrtsweepError
from trtsweep.fileio import atomic_write_text
from trtsweep.serve.server import ContainerSpec, ServerSpec, docker_run, launch_argv

# repository parameter -> the variable that replaces its host path
VARIABLES = {"engine_dir": "TRTSWEEP_ENGINE_DIR", "tokenizer_dir": "TRTSWEEP_TOKENIZER_DIR"}
REPOSITORY_VARIABLE = "TRTSWEEP_MODEL_REPOSITORY"
STORE = "/models"  # the model store inside the container and the Kubernetes pod
STORE_LAYOUT = {
    REPOSITORY_VARIABLE: f"{STORE}/triton_repo",
    "TRTSWEEP_ENGINE_DIR": f"{STORE}/engine",
    "TRTSWEEP_TOKENIZER_DIR": f"{STORE}/tokenizer",
}
PORTS = {"http": 8000, "grpc": 8001, "metrics": 8002}
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
    """(the point the report names best: highest output tok/s per GPU meeting the sweep's SLOs, kept in slo.json;
    the report's sentence saying so). Only points that finished ok count."""
    slo_file = results_dir / "slo.json"
    slo = verdict.check(_json(slo_file)) if slo_file.is_file() else {}
    ok = {p.parent.name for p in results_dir.glob("*/status.json") if _json(p).get("status") == "ok"}
    rows = [r for r in results_table.collect(results_dir, slo) if r["point"] in ok]
    judged = verdict.judge(rows, slo)
    if judged["best"] is None:
        reason = "no point finished ok" if not rows else "no point meets every SLO (see report.html)"
        raise TrtsweepError(f"{results_dir}: {reason}; nothing to hand off (give --point to choose one)")
    return judged["best"]["point"], verdict.summary_lines(judged)[0]


def _templated(text: str, paths: dict[str, str]) -> str:
    """`text` with every host path of `paths` (variable -> path) replaced by ${variable}, longest path first."""
    for variable, path in sorted(paths.items(), key=lambda item: -len(item[1])):
        text = text.replace(path, "${" + variable + "}")
    return text


def _repository(point_dir: Path, repo: dict[str, Any]) -> tuple[dict[str, str], dict[str, str]]:
    """(relative path -> templated text, variable -> the host path it replaced)."""
    served = point_dir / "triton_repo"
    if not served.is_dir():
        raise TrtsweepError(f"{served}: missing (the point's results have no model repository; rerun the point)")
    paths = {var: str(repo["params"][key]) for key, var in VARIABLES.items() if repo["params"].get(key)}
    if paths.get("TRTSWEEP_TOKENIZER_DIR") == paths.get("TRTSWEEP_ENGINE_DIR"):  # hf backend: one model directory
        del paths["TRTSWEEP_TOKENIZER_DIR"]
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


def _server_argv(world_size: int, repository: str, ports: dict[str, int]) -> list[str]:
    spec = ServerSpec(
        model_repository=Path(repository),
        log_file=Path("/dev/null"),
        runtime="native",
        http_port=ports["http"],
        grpc_port=ports["grpc"],
        metrics_port=ports["metrics"],
        bind_address="0.0.0.0",
        world_size=world_size,
    )
    return launch_argv(spec, "tritonserver")


def _launch(point: dict[str, Any], image: str, name: str) -> dict[str, str]:
    world = int(point.get("world_size") or 1)
    native = _server_argv(world, _sentinel(REPOSITORY_VARIABLE), PORTS)
    inner = _server_argv(world, STORE_LAYOUT[REPOSITORY_VARIABLE], PORTS)
    container = docker_run(
        ContainerSpec(image=image, name=name), None, ["-v", f"{_sentinel('TRTSWEEP_MODEL_STORE')}:{STORE}:ro"], inner
    )
    head = "#!/bin/sh\n# generated by trtsweep handoff; see ../README.md\nset -eu\n"
    need = ': "${TRTSWEEP_MODEL_REPOSITORY:?set it to the rendered model repository}"\n'
    store = ': "${TRTSWEEP_MODEL_STORE:?set it to the model store (triton_repo/, engine/, tokenizer/)}"\n'
    return {
        "launch/native.sh": f"{head}{need}exec {_shell(native)}\n",
        "launch/container.sh": f"{head}{store}exec {_shell(container)}\n",
    }


def _systemd(point: dict[str, Any], name: str) -> str:
    argv = _server_argv(int(point.get("world_size") or 1), _sentinel(REPOSITORY_VARIABLE), PORTS)
    exec_start = " ".join(re.sub(r"/@(TRTSWEEP_[A-Z_]+)@", r"${\1}", a) for a in argv)
    return f"""[Unit]
Description=Triton Inference Server: {name} (trtsweep handoff of point {point["id"]})
After=network-online.target
Wants=network-online.target

[Service]
Type=simple
# TRTSWEEP_MODEL_REPOSITORY=... (the rendered repository); CUDA_VISIBLE_DEVICES=... if the host has more GPUs
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


def _k8s(point: dict[str, Any], image: str, name: str, store_gib: int) -> dict[str, str]:
    labels = {"app.kubernetes.io/name": name, "app.kubernetes.io/part-of": "trtsweep"}
    gpus = int(point.get("world_size") or 1) if point.get("gpus") or point.get("backend") == "tensorrtllm" else 0
    argv = _server_argv(int(point.get("world_size") or 1), STORE_LAYOUT[REPOSITORY_VARIABLE], PORTS)
    scrape = {
        "prometheus.io/scrape": "true",
        "prometheus.io/port": str(PORTS["metrics"]),
        "prometheus.io/path": "/metrics",
    }

    def probe(path: str, period: int, failures: int) -> dict[str, Any]:
        return {"httpGet": {"path": path, "port": "http"}, "periodSeconds": period, "failureThreshold": failures}

    container: dict[str, Any] = {
        "name": "triton",
        "image": image,
        "command": argv[:1],
        "args": argv[1:],
        "ports": [{"name": port, "containerPort": number, "protocol": "TCP"} for port, number in PORTS.items()],
        # engine loading takes minutes: the startup probe gives it 15, then readiness and liveness take over
        "startupProbe": probe("/v2/health/ready", 10, 90),
        "readinessProbe": probe("/v2/health/ready", 10, 3),
        "livenessProbe": probe("/v2/health/live", 15, 4),
        "volumeMounts": [
            {"name": "model-store", "mountPath": STORE, "readOnly": True},
            {"name": "dshm", "mountPath": "/dev/shm"},
        ],
    }
    if gpus:
        container["resources"] = {"limits": {"nvidia.com/gpu": gpus}}
    pvc = {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": f"{name}-models", "labels": labels},
        "spec": {"accessModes": ["ReadOnlyMany"], "resources": {"requests": {"storage": f"{store_gib}Gi"}}},
    }
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "labels": labels},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels, "annotations": scrape},
                "spec": {
                    "containers": [container],
                    "volumes": [
                        {
                            "name": "model-store",
                            "persistentVolumeClaim": {"claimName": f"{name}-models", "readOnly": True},
                        },
                        {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "2Gi"}},
                    ],
                },
            },
        },
    }
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "labels": labels, "annotations": scrape},
        "spec": {
            "selector": labels,
            "ports": [{"name": port, "port": number, "targetPort": port} for port, number in PORTS.items()],
        },
    }
    return {
        f"k8s/{kind}.yaml": yaml.dump(doc, Dumper=_Dumper, sort_keys=False)
        for kind, doc in (("pvc", pvc), ("deployment", deployment), ("service", service))
    }


def _smoke(point: dict[str, Any], base_dir: Path) -> str:
    data = Path(point["benchmark"]["input_data"])
    data = data if data.is_absolute() else base_dir / data
    try:
        lines = [line for line in data.read_text(encoding="utf-8").splitlines() if line.strip()]
    except OSError as exc:
        raise TrtsweepError(f"{data}: the point's prompts cannot be read for the smoke test ({exc.strerror})") from exc
    return "\n".join(lines[:SMOKE_REQUESTS]) + "\n"


def smoke_command(point: dict[str, Any], url: str = _sentinel("TRTSWEEP_HOST")) -> list[str]:
    """llm-perf against the deployed server: the point's protocol and options, a few of its prompts."""
    bench = point["benchmark"]
    port = PORTS["grpc"] if bench.get("protocol", "grpc") == "grpc" else PORTS["http"]
    argv = [
        "llm-perf",
        "-u",
        f"{url}:{port}",
        "-i",
        bench.get("protocol", "grpc"),
        "-m",
        "ensemble",
        "--input-data",
        "smoke/prompts.jsonl",
        "--concurrency",
        "1",
        "--num-requests",
        str(SMOKE_REQUESTS),
        "--warmup-requests",
        "0",
    ]
    if bench.get("max_tokens"):
        argv += ["--max-tokens", str(bench["max_tokens"])]
    if bench.get("chat_template"):
        argv += ["--chat-template", "--tokenizer-path", _sentinel("TRTSWEEP_TOKENIZER_DIR")]
    if not point.get("streaming", True):
        argv.append("--no-streaming")
    return argv


def _digest(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _readme(manifest: dict[str, Any]) -> str:
    p, headline = manifest["point"], manifest["evidence"]
    smoke = _shell(manifest["smoke_command"]).replace("\n", "\n    ")
    levels = "\n".join(
        f"| {lv['concurrency']} | {lv['succeeded']}/{lv['requests']} | {_num(lv['output_token_throughput'])} | "
        f"{_num(lv['ttft_p99_ms'])} | {_num(lv['e2e_p99_ms'])} |"
        for lv in headline
    )
    variables = "\n".join(f"- `{k}`: on the benchmark host it was `{v}`" for k, v in manifest["variables"].items())
    return f"""# Handoff: {manifest["name"]}

Point `{p["id"]}` of sweep `{p["sweep"]}`; chosen {manifest["chosen"]}. Model `{p["model"]["repo_id"]}` at revision
`{manifest["model_revision"]}`, backend `{p["backend"]}`, precision `{p["precision"]}`, TP {p["tp"]} x PP {p["pp"]},
max batch size {p["max_batch_size"]}, streaming {str(p["streaming"]).lower()}. TensorRT-LLM
`{manifest["versions"]["tensorrt_llm"]}`, trtsweep `{manifest["versions"]["trtsweep"]}`. Everything below was
generated by `trtsweep handoff` from the sweep's results; `bundle.json` has it as data.

## What it measured (evidence/, measured on {manifest["measured_on"]})

| concurrency | ok/requests | output tok/s | TTFT p99 ms | E2E p99 ms |
|---|---|---|---|---|
{levels}

## 1. The artifacts
- Engine / weights: `build/` holds the exact commands that made them (`*.json`, `build.sh`) and their logs;
  `bundle.json` lists the engine's files with sha256 when the controller could see them. Copy the engine (or
  rebuild with `build/build.sh` on the same TensorRT-LLM version) and the tokenizer (the HF model directory) to the
  serving host.
- The model repository (`model_repository/`) is the one that was benchmarked, with host paths as variables:
{variables}

      python3 render_repository.py model_repository /srv/triton_repo \\
        TRTSWEEP_ENGINE_DIR=/srv/engine TRTSWEEP_TOKENIZER_DIR=/srv/tokenizer TRTSWEEP_MODEL_REPOSITORY=/srv/triton_repo

## 2. Run it (pick one)
- Ansible (native runtime, deploys, waits until ready and runs the smoke test; idempotent):
  `ansible-playbook playbooks/handoff.yml -i <serving hosts> -e handoff_bundle=<this directory>`
- Native: `TRTSWEEP_MODEL_REPOSITORY=/srv/triton_repo sh launch/native.sh`
- systemd: `systemd/{manifest["name"]}.service` (put `TRTSWEEP_MODEL_REPOSITORY=...` in
  `/etc/trtsweep/{manifest["name"]}.env`), then `systemctl enable --now {manifest["name"]}`
- Container: a model store with `triton_repo/` (rendered for `{STORE}/engine`, `{STORE}/tokenizer`),
  `engine/` and `tokenizer/`: `TRTSWEEP_MODEL_STORE=/srv/store sh launch/container.sh` (image `{manifest["image"]}`)
- Kubernetes: the same store layout on the `{manifest["name"]}-models` volume, then `kubectl apply -f k8s/`
  (ports http {PORTS["http"]}, grpc {PORTS["grpc"]}, metrics {PORTS["metrics"]}; {manifest["gpus"]} GPU(s)).

## 3. Smoke test
Every request must succeed (exit status 0 and `{SMOKE_REQUESTS}/{SMOKE_REQUESTS} ok`):

    TRTSWEEP_HOST=<server> TRTSWEEP_TOKENIZER_DIR=<tokenizer dir> {smoke}

## 4. What to watch (Triton metrics on :{PORTS["metrics"]}/metrics)
- `nv_inference_request_failure` rising: requests failing; the server log says why.
- `nv_inference_queue_duration_us` / `nv_inference_request_success` growing: requests wait in the queue, the
  load is above what was measured (compare with the table above: latency climbs past the best level's TTFT p99).
- `nv_trt_llm_kv_cache_block_metrics` (TensorRT-LLM backend): free KV-cache blocks near 0 means requests
  are being held back; `nv_gpu_memory_used_bytes`, `nv_gpu_utilization`.
- Readiness (`/v2/health/ready`) failing after start: the model failed to load; see the server log.
"""


def _num(value: Any) -> str:
    return "-" if value is None else f"{value:.1f}" if isinstance(value, float) else str(value)


def _engine_files(engine_dir: str) -> list[dict[str, Any]]:
    root = Path(engine_dir)
    if not root.is_dir():
        return []
    return [
        {"path": str(p.relative_to(root)), "bytes": p.stat().st_size, "sha256": _digest(p)}
        for p in sorted(root.rglob("*"))
        if p.is_file()
    ]


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
    if point.get("flow", "engine") != "engine":  # its bundle (model.yaml / trtllm-serve launch) is not written yet
        raise TrtsweepError(
            f"point {point_id}: a {point['flow']}-flow point ({point.get('server')}); the handoff bundle covers "
            "engine-flow points: hand off its LLM API options (llm_api_options.yml) and checkpoint by hand"
        )
    summary = _json(point_dir / "llm_perf.summary.json")
    name = re.sub(r"[^a-z0-9-]+", "-", f"trtsweep-{point['sweep']}-{point_id}".lower()).strip("-")[:63].rstrip("-")
    image = image or (point.get("trtllm") or {}).get("container_image")
    if not image:
        raise TrtsweepError(
            f"point {point_id} names no container image (trtllm.container_image): give --image for "
            "the container and Kubernetes files"
        )
    files, host_paths = _repository(point_dir, repo)
    from trtsweep.perf.export import headline

    evidence = [headline(lv, lv.get("summary", {})) for lv in summary.get("levels", [])]
    engine_dir = str(repo["params"].get("engine_dir") or "")
    engine_bytes = repo.get("engine_size_bytes")
    manifest = {
        "name": name,
        "chosen": chosen,
        "point": point,
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
        "ports": PORTS,
        "variables": host_paths,
        "repository_params": repo["params"],
        "engine": {"dir_on_benchmark_host": engine_dir, "size_bytes": engine_bytes, "files": _engine_files(engine_dir)},
        "evidence": evidence,
        "smoke_command": smoke_command(point),
    }
    out.mkdir(parents=True, exist_ok=True)
    written: dict[str, str] = {f"model_repository/{rel}": text for rel, text in files.items()}
    written.update(_launch(point, image, name))
    written[f"systemd/{name}.service"] = _systemd(point, name)
    store_gib = max(10, 2 * -(-int(engine_bytes or 0) // (1 << 30)))
    written.update(_k8s(point, image, name, store_gib))
    written["smoke/prompts.jsonl"] = _smoke(point, base_dir or Path.cwd())
    written["render_repository.py"] = RENDER_SCRIPT
    records = [n for n in BUILD_RECORDS if (point_dir / f"{n}.json").is_file()]
    build = [" ".join(shlex.quote(a) for a in _json(point_dir / f"{n}.json").get("command", [])) for n in records]
    written["build/build.sh"] = (
        "#!/bin/sh\n# the commands that made this point's artifacts, in order\nset -eux\n"
        + "".join(f"{line}\n" for line in build if line)
    )
    written["bundle.json"] = json.dumps(manifest, indent=2, ensure_ascii=False) + "\n"
    written["README.md"] = _readme(manifest)
    for rel, text in written.items():
        atomic_write_text(out / rel, text)
    for rel in [*(f"{n}.{ext}" for n in records for ext in ("json", "log")), *EVIDENCE]:
        src = point_dir / rel
        if src.is_file():
            dest = out / ("build" if rel.split(".")[0] in BUILD_RECORDS else "evidence") / rel
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(src, dest)
    for script in ("launch/native.sh", "launch/container.sh", "build/build.sh", "render_repository.py"):
        (out / script).chmod(0o755)
    return manifest
