"""The bundle's Kubernetes manifests (k8s/): PersistentVolumeClaim, Deployment (GPUs, startup/readiness/liveness
probes on the server's health endpoints; Triton's Prometheus scrape annotations), Service, and for trtllm-serve a
ConfigMap with the LLM API options.

They are data, dumped as YAML (no text template): the dumper quotes every value, and the structure is what
kubernetes-validate checks in the tests."""

from __future__ import annotations

from typing import Any

import yaml

from trtsweep.handoff.paths import STORE
from trtsweep.handoff.server import CONFIG_DIR, OPTIONS_FILE, PORTS, Serving


class _Dumper(yaml.SafeDumper):
    """Plain YAML for people: a repeated mapping (the labels) is written out each time, no anchors."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def _probe(path: str, period: int, failures: int) -> dict[str, Any]:
    return {"httpGet": {"path": path, "port": "http"}, "periodSeconds": period, "failureThreshold": failures}


def manifests(
    point: dict[str, Any], s: Serving, image: str, name: str, artifact_bytes: int, options: str | None
) -> dict[str, str]:
    """k8s/<kind>.yaml -> its text; `options`: trtllm-serve's LLM API options (a ConfigMap), None for Triton. The
    volume claim asks for twice the artifacts (engine or checkpoint), at least 10 GiB."""
    store_gib = max(10, 2 * -(-artifact_bytes // (1 << 30)))
    labels = {"app.kubernetes.io/name": name, "app.kubernetes.io/part-of": "trtsweep"}
    gpus = int(point.get("world_size") or 1) if point.get("gpus") or point.get("backend") == "tensorrtllm" else 0
    scrape = {
        "prometheus.io/scrape": "true",
        "prometheus.io/port": str(PORTS["metrics"]),
        "prometheus.io/path": "/metrics",
    }
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
        "startupProbe": _probe(s.ready, 10, 90),
        "readinessProbe": _probe(s.ready, 10, 3),
        "livenessProbe": _probe(s.live, 15, 4),
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
