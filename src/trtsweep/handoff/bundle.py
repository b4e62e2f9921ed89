"""`trtsweep handoff`: one measured point of a sweep as a bundle that operations can deploy.

Reads `results/<sweep>/<point>/` (status.json, point.json, repository.json, triton_repo/, llm_api_options.yml, the
build records and the benchmark's summary) and writes `<out>/`:

    README.md                   for operations: what it is, how to deploy it four ways, the smoke test, what to watch
    bundle.json                 the manifest: point, settings, model and revision, versions, artifacts, ports, variables
    model_repository/           Triton: the repository exactly as it was served, host paths turned into ${TRTSWEEP_*}
                                variables (engine flow: inflight_batcher_llm; pytorch flow: the llmapi model.yaml)
    render_repository.py        fills those variables in (Python 3 standard library only)
    llm_api_options.yml         pytorch flow: the LLM API options the point was served with (its speculative_config
                                too; bundle.json's `speculative` names the variant and its draft model, whose
                                directory is ${TRTSWEEP_DRAFT_DIR} here, filled in on the host before the server
                                starts; llm_api_options.store.yml has the model store's draft/ for the container)
    disagg/                     a disaggregated point: every worker's options and the proxy's config
                                (trtsweep.handoff.disagg: its launch scripts, systemd units and Kubernetes objects)
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

import yaml

from trtsweep import __version__
from trtsweep.common import fileio
from trtsweep.common.fileio import atomic_write_text, file_sha256
from trtsweep.errors import TrtsweepError
from trtsweep.handoff import disagg
from trtsweep.handoff.kubernetes import ROLE_SUFFIX, disagg_manifests, manifests, object_name
from trtsweep.handoff.paths import DRAFT_VARIABLE, STORE_LAYOUT, repository, templated
from trtsweep.handoff.readme import readme
from trtsweep.handoff.render import shipped
from trtsweep.handoff.scripts import build_script, launch_script, launch_scripts, sbatch_script
from trtsweep.handoff.select import choose, read_json
from trtsweep.handoff.server import OPTIONS_FILE, RENDER, STORE_OPTIONS, Serving, gpu_count, serving
from trtsweep.handoff.smoke import prompts, smoke_command, sweep_base
from trtsweep.handoff.units import service, unit
from trtsweep.perf.export import headline
from trtsweep.sweep.paths import sweep_path
from trtsweep.toolchain.llmapi.options import draft_field

BUILD_RECORDS = ("checkpoint", "trtllm_build", "quantize")
EVIDENCE = ("llm_perf.summary.json", "llm_perf.csv", "status.json", "point.json", "repository.json")
EXECUTABLE = ("launch/*.sh", "build/build.sh", RENDER)


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


def _draft_dir(point: dict[str, Any], options: str | None) -> str | None:
    """A speculative point's draft model directory on the benchmark host: its LLM API options' draft field (the
    release's: speculative_model_dir, speculative_model from 1.2); None without a draft."""
    if not point.get("draft_model") or options is None:
        return None
    config = (yaml.safe_load(options) or {}).get("speculative_config") or {}
    value = config.get(draft_field(str(point["llm_api_release"]), config.get("decoding_type", "")))
    return value if isinstance(value, str) and value else None


def _in_store(options: str) -> str:
    """The bundle's options with the draft model at the model store's draft/ (the container's and pod's)."""
    return options.replace("${" + DRAFT_VARIABLE + "}", STORE_LAYOUT[DRAFT_VARIABLE])


def _disagg_files(point: dict[str, Any], s: Serving, name: str, image: str, artifact_bytes: int, options: str,
                  draft: bool) -> tuple[dict[str, str], dict[str, Any]]:  # fmt: skip
    """A disaggregated point's files (workers' and proxy's: options and config, launch scripts, systemd units,
    Kubernetes objects) and bundle.json's `disaggregated`; `options`: the point's options as the bundle has them."""
    native = yaml.safe_load(options)
    store = yaml.safe_load(_in_store(options))
    services = {role: object_name(name, suffix) for role, suffix in ROLE_SUFFIX.items()}
    processes, files, config = disagg.servers(point, native, store, draft, services)
    workers = [p for p in processes if p.role != "proxy"]
    needs = s.native_needs
    for p in processes:
        environment = {"CUDA_DEVICE_ORDER": "PCI_BUS_ID", "CUDA_VISIBLE_DEVICES": ",".join(map(str, p.gpus))}
        environment = environment if p.gpus else {}
        before = [p.prepare] if p.prepare else []
        files[f"launch/{p.name}.sh"] = launch_script(needs if p.role != "proxy" else {}, True, p.native,
                                                     environment, before)  # fmt: skip
        unit_name = name if p.role == "proxy" else f"{name}-{p.name}"
        others = [f"{name}-{w.name}.service" for w in workers] if p.role == "proxy" else []
        files[f"systemd/{unit_name}.service"] = service(
            p.title, unit_name, point["id"], [*needs, "TRTSWEEP_BUNDLE"], p.native, environment=environment,
            before=before, after=others, requires=others, part_of=None if p.role == "proxy" else f"{name}.service",
            env=name,
        )  # fmt: skip
    files.update(disagg_manifests(point, processes, image, name, artifact_bytes, config))
    return files, disagg.manifest(point, processes)


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
    options = options_file.read_text(encoding="utf-8") if pytorch else None
    draft_dir = _draft_dir(point, options)
    s = serving(point, draft=draft_dir is not None)
    files, host_paths = repository(point_dir, repo, triton=s.kind == "triton", draft_dir=draft_dir)
    if options is not None and draft_dir is not None:
        options = templated(options, {DRAFT_VARIABLE: draft_dir})
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
        "gpus": disagg.shape_of(point).gpus() if point.get("disaggregated") else int(point.get("world_size") or 1),
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
        if draft_dir is not None:  # its files, as the checkpoint's; deployed at ${TRTSWEEP_DRAFT_DIR} / draft/
            manifest["speculative"]["draft"] = {"variable": DRAFT_VARIABLE, "dir_on_benchmark_host": draft_dir,
                                                "in_model_store": STORE_LAYOUT[DRAFT_VARIABLE],
                                                "files": _files(draft_dir)}  # fmt: skip
    out.mkdir(parents=True, exist_ok=True)
    written: dict[str, str] = {f"model_repository/{rel}": text for rel, text in files.items()}
    if files or draft_dir is not None:
        written[RENDER] = shipped("render_repository.py.txt")
    store_options = None
    if options is not None:
        written[OPTIONS_FILE] = options
        store_options = _in_store(options)
        if draft_dir is not None and s.kind == "trtllm-serve":
            written[STORE_OPTIONS] = store_options
    if point.get("disaggregated"):
        made, manifest["disaggregated"] = _disagg_files(point, s, name, image, int(artifact_bytes or 0),
                                                        str(options), draft_dir is not None)  # fmt: skip
        written.update(made)
    else:
        # the limits its container got on the benchmark host (None: it ran natively, or through pyxis: Slurm's limits)
        ran = fileio.read_json(point_dir / "container.json")
        if ran and "limits" in ran:
            manifest["container_limits"] = {"limits": ran.get("limits"), "notes": ran.get("notes") or []}
        written.update(launch_scripts(s, image, name, ran.get("limits") if ran else None))
        written[f"systemd/{name}.service"] = unit(point, s, name)
        written[f"slurm/{name}.sbatch"] = sbatch_script(s, image, name, gpu_count(point))
        k8s_options = store_options if s.kind == "trtllm-serve" else None
        written.update(manifests(point, s, image, name, int(artifact_bytes or 0), k8s_options))
    base = base_dir or sweep_base(results_dir)
    written["smoke/prompts.jsonl"] = prompts(point, base)
    # the sweep's prompts on this controller: a point calibrated on them is calibrated on them again when deployed
    manifest["input_data"] = str(sweep_path(point["benchmark"]["input_data"], base).resolve())
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
    for pattern in EXECUTABLE:
        for script in out.glob(pattern):
            script.chmod(0o755)
    return manifest
