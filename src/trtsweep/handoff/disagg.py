"""A disaggregated point's bundle: its context and generation `trtllm-serve` workers and the `trtllm-serve
disaggregated` proxy in front of them, as trtsweep.toolchain.llmapi.disagg makes them for the point's release.

    disagg/<worker>.yml            every worker's --extra_llm_api_options (context0, ..., generation0, ...)
    disagg/proxy.yml               the proxy's config: its urls are the workers' (127.0.0.1:<port> on one host)
    launch/<worker>.sh, launch/proxy.sh     each on the host: a worker on its own GPUs (CUDA_VISIBLE_DEVICES)
    systemd/<name>-<worker>.service, systemd/<name>.service   the workers, and the proxy that needs them (started
                                   after them; stopping or restarting the proxy's unit does the same to them)
    k8s/                           a ConfigMap (every worker's options, the proxy's config), per role a Deployment of
                                   one pod with a container per instance (its port, its tp x pp GPUs) and a Service
                                   naming each instance's port, the proxy's Deployment and Service

The proxy listens on PROXY_PORT (the bundle's http port, where the smoke test goes); the workers on WORKER_PORTS
upwards, one each. A point with a draft model: the workers' options hold ${TRTSWEEP_DRAFT_DIR}, rendered into
rendered/disagg/ before each starts (the single server's way, trtsweep.handoff.server); Kubernetes' have the model
store's draft/.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from trtsweep.handoff.paths import DRAFT_VARIABLE, STORE_LAYOUT, sentinel
from trtsweep.handoff.server import CONFIG_DIR, OPENAI_PORTS, render_argv
from trtsweep.serve.openai_server import HF_SERVER
from trtsweep.toolchain.llmapi import disagg

PROXY_PORT = OPENAI_PORTS["http"]
WORKER_PORTS = PROXY_PORT + 1  # the first worker's; the others count up from it
HF_PROXY = ("-m", "trtsweep.serve.disagg_proxy")  # the hf backend's stand-in for `trtllm-serve disaggregated`
PROXY_CONFIG = "proxy.yml"


@dataclass(frozen=True)
class Server:
    """One process of the point on the host or in its pod: a worker or the proxy."""

    name: str  # context0, generation1, proxy
    role: str  # context, generation, proxy
    title: str
    port: int
    gpus: tuple[int, ...]
    gpus_per_instance: int
    options_file: str | None  # disagg/<name>.yml (the proxy: its config)
    native: list[str]  # on the host, sentinels for the bundle, the model and the draft
    inner: list[str]  # in the pod
    prepare: list[str] | None  # run before it on the host (its options rendered)


def _hf(argv: list[str], backend: str, module: tuple[str, ...]) -> list[str]:
    """The hf backend's stand-in (the CPU test bed's) for a trtllm-serve command."""
    return ["python3", *module, *argv[1:]] if backend == "hf" else argv


def _options_text(options: dict[str, Any]) -> str:
    return yaml.safe_dump(options, sort_keys=True, default_flow_style=False)


def shape_of(point: dict[str, Any]) -> disagg.Shape:
    return disagg.Shape.from_point(point["disaggregated"])


def servers(point: dict[str, Any], native_options: dict[str, Any], store_options: dict[str, Any], draft: bool,
            services: dict[str, str]) -> tuple[list[Server], dict[str, str], dict[str, str]]:  # fmt: skip
    """(the workers and the proxy, the bundle's files for them, the Kubernetes ConfigMap's data: every worker's
    options and the proxy's config, its urls `services[role]:<port>`) from the point's aggregated LLM API options:
    `native_options` as the host runs them (${TRTSWEEP_DRAFT_DIR} for a draft), `store_options` as the pod does."""
    release, backend = str(point["llm_api_release"]), point["backend"]
    shape = shape_of(point)
    gpus = list(range(shape.gpus())) if backend == "tensorrtllm" else []
    ports = [WORKER_PORTS + i for i in range(shape.instances())]
    on_host = disagg.workers(shape, release, native_options, gpus, "127.0.0.1", ports)
    in_pod = disagg.workers(shape, release, store_options, [], "0.0.0.0", ports)
    bundle, model = sentinel("TRTSWEEP_BUNDLE"), sentinel("TRTSWEEP_MODEL_DIR")
    files: dict[str, str] = {}
    data: dict[str, str] = {}
    out: list[Server] = []
    for worker, pod in zip(on_host, in_pod, strict=True):
        rel = f"disagg/{worker.name}.yml"
        files[rel] = _options_text(worker.options)
        data[f"{worker.name}.yml"] = _options_text(pod.options)
        options = f"{bundle}/rendered/{rel}" if draft else f"{bundle}/{rel}"
        prepare = render_argv(f"{bundle}/{rel}", options, {DRAFT_VARIABLE: sentinel(DRAFT_VARIABLE)}) if draft else None
        native = _hf(worker.argv(release, model, options), backend, HF_SERVER)
        inner = _hf(pod.argv(release, STORE_LAYOUT["TRTSWEEP_MODEL_DIR"], f"{CONFIG_DIR}/{worker.name}.yml"), backend,
                    HF_SERVER)  # fmt: skip
        title = f"trtllm-serve {worker.role} worker {worker.index}"
        out.append(Server(worker.name, worker.role, title, worker.port, worker.gpus, worker.tp * worker.pp, rel,
                          native, inner, prepare))  # fmt: skip
    proxy_native = disagg.proxy_config(shape, on_host, "0.0.0.0", PROXY_PORT)
    files[f"disagg/{PROXY_CONFIG}"] = yaml.safe_dump(proxy_native, sort_keys=False)
    proxy_pod = disagg.proxy_config(shape, in_pod, "0.0.0.0", PROXY_PORT)
    for role, section in disagg.SECTIONS.items():  # each instance behind its role's Service, on its own port
        proxy_pod[section]["urls"] = [f"{services[role]}:{w.port}" for w in in_pod if w.role == role]
    disagg.parse_proxy_config(proxy_pod)  # as the proxy reads it
    data[PROXY_CONFIG] = yaml.safe_dump(proxy_pod, sort_keys=False)
    native = _hf(disagg.proxy_argv(release, Path(f"{bundle}/disagg/{PROXY_CONFIG}")), backend, HF_PROXY)
    inner = _hf(disagg.proxy_argv(release, Path(f"{CONFIG_DIR}/{PROXY_CONFIG}")), backend, HF_PROXY)
    out.append(Server("proxy", "proxy", "trtllm-serve disaggregated proxy", PROXY_PORT, (), 0, f"disagg/{PROXY_CONFIG}",
                      native, inner, None))  # fmt: skip
    return out, files, data


def manifest(point: dict[str, Any], processes: list[Server]) -> dict[str, Any]:
    """bundle.json's `disaggregated`: the shape, and each worker's and the proxy's port, GPUs, files and command."""
    shape = shape_of(point)
    return {
        "shape": point["disaggregated"],
        "label": shape.label(),
        "gpus": shape.gpus(),
        "servers": [{"name": p.name, "port": p.port, "gpus": list(p.gpus), "options" if p.name != "proxy" else "config":
                     p.options_file, "launch": f"launch/{p.name}.sh", "command": p.native} for p in processes],
    }  # fmt: skip
