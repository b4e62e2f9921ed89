"""`trtsweep handoff`: one measured point of a sweep as a bundle that operations can deploy.

Reads `results/<sweep>/<point>/` (status.json, point.json, repository.json, triton_repo/, llm_api_options.yml, the
build records and the benchmark's summary) and writes `<out>/`:

    README.md                   for operations: what it is, how to deploy it four ways, the smoke test, what to watch
    bundle.json                 the manifest: point, settings, model and revision, versions, artifacts, ports, variables
    model_repository/           Triton: the repository exactly as it was served, host paths turned into ${TRTSWEEP_*}
                                variables (engine flow: inflight_batcher_llm; pytorch flow: the llmapi model.yaml)
    render_repository.py        fills those variables in (Python 3 standard library only)
    llm_api_options.yml         pytorch flow: the LLM API options the point was served with (its speculative_config
                                too; bundle.json's `speculative` names the variant and its draft model)
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

import hashlib
import json
import re
import shutil
from pathlib import Path
from typing import Any

from trtsweep import __version__
from trtsweep.common.fileio import atomic_write_text, file_sha256
from trtsweep.errors import TrtsweepError
from trtsweep.handoff.kubernetes import manifests
from trtsweep.handoff.paths import repository
from trtsweep.handoff.readme import readme
from trtsweep.handoff.render import shipped
from trtsweep.handoff.scripts import build_script, launch_scripts
from trtsweep.handoff.select import choose, read_json
from trtsweep.handoff.server import OPTIONS_FILE, serving
from trtsweep.handoff.smoke import prompts, smoke_command
from trtsweep.handoff.units import unit
from trtsweep.perf.export import headline

BUILD_RECORDS = ("checkpoint", "trtllm_build", "quantize")
EVIDENCE = ("llm_perf.summary.json", "llm_perf.csv", "status.json", "point.json", "repository.json")
EXECUTABLE = ("launch/native.sh", "launch/container.sh", "build/build.sh", "render_repository.py")


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
    """The deployment's name (handoff folder, systemd unit, Kubernetes objects: at most 63 of [a-z0-9-]). A name cut
    to fit ends with a hash of the whole, so points whose ids differ only past the cut get names of their own."""
    whole = f"trtsweep-{point['sweep']}-{point_id}"
    name = re.sub(r"[^a-z0-9-]+", "-", whole.lower()).strip("-")
    if len(name) <= 63:
        return name
    return f"{name[:54].rstrip('-')}-{hashlib.sha256(whole.encode()).hexdigest()[:8]}"


def write_bundle(
    results_dir: Path, point_id: str, out: Path, image: str | None = None, base_dir: Path | None = None
) -> dict[str, Any]:
    """Write the bundle of one point (`best` for the best one) into `out`; return its manifest."""
    chosen = choose(results_dir, point_id)
    point, point_dir, status, repo = chosen.point, chosen.dir, chosen.status, chosen.repo
    pytorch = point.get("flow", "engine") == "pytorch"
    options_file = point_dir / OPTIONS_FILE
    if pytorch and not options_file.is_file():
        raise TrtsweepError(f"{options_file}: missing (a pytorch-flow point's LLM API options; rerun the point)")
    summary = read_json(point_dir / "llm_perf.summary.json")
    name = _name(point, chosen.id)
    image = image or (point.get("trtllm") or {}).get("container_image")
    if not image:
        raise TrtsweepError(
            f"point {chosen.id} names no container image (trtllm.container_image): give --image for "
            "the container and Kubernetes files"
        )
    s = serving(point)
    files, host_paths = repository(point_dir, repo, triton=s.kind == "triton")
    records = [n for n in BUILD_RECORDS if (point_dir / f"{n}.json").is_file()]
    artifact_dir = host_paths.get("TRTSWEEP_MODEL_DIR" if pytorch else "TRTSWEEP_ENGINE_DIR", "")
    artifact_files = _files(artifact_dir)
    artifact_bytes = repo.get("engine_size_bytes") or sum(f["bytes"] for f in artifact_files)
    manifest = {
        "name": name,
        "chosen": chosen.how,
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
    if point.get("speculative") not in (None, "none"):  # the variant measured, its config and its draft model
        config = (point.get("llm_api") or {}).get("speculative_config") or {}
        manifest["speculative"] = {"variant": point["speculative"], "speculative_config": config,
                                   "draft_model": point.get("draft_model")}  # fmt: skip
    out.mkdir(parents=True, exist_ok=True)
    options = options_file.read_text(encoding="utf-8") if pytorch else None
    written: dict[str, str] = {f"model_repository/{rel}": text for rel, text in files.items()}
    if files:
        written["render_repository.py"] = shipped("render_repository.py.txt")
    if options is not None:
        written[OPTIONS_FILE] = options
    written.update(launch_scripts(s, image, name))
    written[f"systemd/{name}.service"] = unit(point, s, name)
    k8s_options = options if s.kind == "trtllm-serve" else None
    written.update(manifests(point, s, image, name, int(artifact_bytes or 0), k8s_options))
    written["smoke/prompts.jsonl"] = prompts(point, base_dir or Path.cwd())
    written["build/build.sh"] = build_script([read_json(point_dir / f"{n}.json").get("command", []) for n in records])
    written["bundle.json"] = json.dumps(manifest, indent=2, ensure_ascii=False) + "\n"
    written["README.md"] = readme(manifest, s)
    for rel, text in written.items():
        atomic_write_text(out / rel, text)
    for rel in [*(f"{n}.{ext}" for n in records for ext in ("json", "log")), *EVIDENCE]:
        src = point_dir / rel
        if src.is_file():
            dest = out / ("build" if rel.split(".")[0] in BUILD_RECORDS else "evidence") / rel
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(src, dest)
    for script in EXECUTABLE:
        if (out / script).is_file():
            (out / script).chmod(0o755)
    return manifest
