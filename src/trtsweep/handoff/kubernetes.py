"""The bundle's Kubernetes manifests (k8s/): PersistentVolumeClaim, Deployment (GPUs, startup/readiness/liveness
probes on the server's health endpoints; Triton's Prometheus scrape annotations), Service, and for trtllm-serve a
ConfigMap with the LLM API options.

They are data, dumped as YAML (no text template): the dumper quotes every value, and the structure is what
kubernetes-validate checks in the tests."""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, Any

import yaml

from trtsweep.handoff.paths import STORE
from trtsweep.handoff.server import CONFIG_DIR, OPTIONS_FILE, PORTS, Serving, gpu_count

if TYPE_CHECKING:
    from trtsweep.handoff.disagg import Server

ROLE_SUFFIX = {"context": "ctx", "generation": "gen"}  # a disaggregated point's role Deployments and Services


class _Dumper(yaml.SafeDumper):
    """Plain YAML for people: a repeated mapping (the labels) is written out each time, no anchors."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def _probe(path: str, period: int, failures: int, port: str = "http") -> dict[str, Any]:
    return {"httpGet": {"path": path, "port": port}, "periodSeconds": period, "failureThreshold": failures}


def object_name(name: str, suffix: str) -> str:
    """`<name>-<suffix>` within the 63 characters of a Service name (cut, with a hash of the whole, when longer)."""
    whole = f"{name}-{suffix}"
    if len(whole) <= 63:
        return whole
    return f"{name[: 63 - len(suffix) - 10].rstrip('-')}-{hashlib.sha256(whole.encode()).hexdigest()[:8]}-{suffix}"


def _store(name: str, labels: dict[str, str], artifact_bytes: int) -> dict[str, Any]:
    """The model store's PersistentVolumeClaim: twice the artifacts (engine or checkpoint), at least 10 GiB."""
    store_gib = max(10, 2 * -(-artifact_bytes // (1 << 30)))
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": f"{name}-models", "labels": labels},
        "spec": {"accessModes": ["ReadOnlyMany"], "resources": {"requests": {"storage": f"{store_gib}Gi"}}},
    }


def _volumes(name: str, config_map: str | None) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(a container's mounts, the pod's volumes): the model store, shared memory, a ConfigMap at CONFIG_DIR."""
    mounts: list[dict[str, Any]] = [
        {"name": "model-store", "mountPath": STORE, "readOnly": True},
        {"name": "dshm", "mountPath": "/dev/shm"},
    ]
    volumes: list[dict[str, Any]] = [
        {"name": "model-store", "persistentVolumeClaim": {"claimName": f"{name}-models", "readOnly": True}},
        {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "2Gi"}},
    ]
    if config_map is not None:
        mounts.append({"name": "config", "mountPath": CONFIG_DIR, "readOnly": True})
        volumes.append({"name": "config", "configMap": {"name": config_map}})
    return mounts, volumes


def _deployment(name: str, labels: dict[str, str], containers: list[dict[str, Any]], volumes: list[dict[str, Any]],
                pod_metadata: dict[str, Any] | None = None) -> dict[str, Any]:  # fmt: skip
    """One replica of a pod of `containers` (its metadata: `labels`, unless `pod_metadata` is given)."""
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "labels": labels},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": pod_metadata or {"labels": labels},
                "spec": {"containers": containers, "volumes": volumes},
            },
        },
    }


def _service(name: str, labels: dict[str, str], ports: dict[str, int]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "labels": labels},
        "spec": {
            "selector": labels,
            "ports": [{"name": port, "port": number, "targetPort": port} for port, number in ports.items()],
        },
    }


def _container(name: str, image: str, argv: list[str], ports: dict[str, int], mounts: list[dict[str, Any]],
               gpus: int) -> dict[str, Any]:  # fmt: skip
    """A trtllm-serve container (a worker or the proxy): probes on /health of its first port."""
    first = next(iter(ports))
    container: dict[str, Any] = {
        "name": name,
        "image": image,
        "command": argv[:1],
        "args": argv[1:],
        "ports": [{"name": port, "containerPort": number, "protocol": "TCP"} for port, number in ports.items()],
        # loading takes minutes: the startup probe gives it 15, then readiness and liveness take over
        "startupProbe": _probe("/health", 10, 90, first),
        "readinessProbe": _probe("/health", 10, 3, first),
        "livenessProbe": _probe("/health", 15, 4, first),
        "volumeMounts": mounts,
    }
    if gpus:
        container["resources"] = {"limits": {"nvidia.com/gpu": gpus}}
    return container


def disagg_manifests(point: dict[str, Any], processes: list[Server], image: str, name: str, artifact_bytes: int,
                     config: dict[str, str]) -> dict[str, str]:  # fmt: skip
    """A disaggregated point's k8s/<kind>.yaml -> its text: the model store, a ConfigMap (`config`: every worker's
    options, the proxy's config), per role a Deployment of one pod with a container per instance (its own port
    and tp x pp GPUs) and a Service naming each instance's port (the proxy's urls), the proxy's Deployment and
    Service (the bundle's http port)."""
    labels = {"app.kubernetes.io/name": name, "app.kubernetes.io/part-of": "trtsweep"}
    gpus = bool(point.get("gpus")) or point.get("backend") == "tensorrtllm"
    docs: dict[str, dict[str, Any]] = {
        "pvc": _store(name, labels, artifact_bytes),
        "configmap": {"apiVersion": "v1", "kind": "ConfigMap",
                      "metadata": {"name": f"{name}-disagg", "labels": labels}, "data": config},
    }  # fmt: skip
    mounts, volumes = _volumes(name, f"{name}-disagg")
    for role in ("context", "generation", "proxy"):
        mine = [p for p in processes if p.role == role]
        role_labels = {**labels, "app.kubernetes.io/component": role}
        object_ = name if role == "proxy" else object_name(name, ROLE_SUFFIX[role])
        ports = {("http" if role == "proxy" else p.name): p.port for p in mine}
        containers = [
            _container(p.name, image, p.inner, {("http" if role == "proxy" else p.name): p.port}, mounts,
                       p.gpus_per_instance if gpus else 0)
            for p in mine
        ]  # fmt: skip
        docs[f"{role}-deployment"] = _deployment(object_, role_labels, containers, volumes)
        docs[f"{role}-service"] = _service(object_, role_labels, ports)
    return {f"k8s/{kind}.yaml": yaml.dump(doc, Dumper=_Dumper, sort_keys=False) for kind, doc in docs.items()}


def manifests(
    point: dict[str, Any], s: Serving, image: str, name: str, artifact_bytes: int, options: str | None
) -> dict[str, str]:
    """k8s/<kind>.yaml -> its text; `options`: trtllm-serve's LLM API options (a ConfigMap), None for Triton. The
    volume claim asks for twice the artifacts (engine or checkpoint), at least 10 GiB."""
    labels = {"app.kubernetes.io/name": name, "app.kubernetes.io/part-of": "trtsweep"}
    gpus = gpu_count(point)
    scrape = {
        "prometheus.io/scrape": "true",
        "prometheus.io/port": str(PORTS["metrics"]),
        "prometheus.io/path": "/metrics",
    }
    mounts, volumes = _volumes(name, None)
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
        "startupProbe": _probe(s.ready, 10, 90),
        "readinessProbe": _probe(s.ready, 10, 3),
        "livenessProbe": _probe(s.live, 15, 4),
        "volumeMounts": mounts,
    }
    if gpus:
        container["resources"] = {"limits": {"nvidia.com/gpu": gpus}}
    pod_metadata: dict[str, Any] = {"labels": labels, **({"annotations": scrape} if s.scrape else {})}
    docs["pvc"] = _store(name, labels, artifact_bytes)
    docs["deployment"] = _deployment(name, labels, [container], volumes, pod_metadata)
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
