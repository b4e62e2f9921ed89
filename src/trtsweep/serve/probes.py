"""Probes of the host before and while a server starts: GPUs, an engine's world size, busy ports, what answers
on a port (Triton's HTTP/gRPC metadata)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from trtsweep.errors import TrtsweepError
from trtsweep.serve.spec import ServerSpec, probe_host


def gpu_count(visible: str | None = None) -> int | None:
    """GPUs the server may use: `visible` (its visible_devices) if given, else CUDA_VISIBLE_DEVICES if set, else
    `nvidia-smi -L`; None when unknown."""
    visible = visible if visible is not None else os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        return len([d for d in visible.split(",") if d.strip() and d.strip() != "-1"])
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return sum(1 for line in out.stdout.splitlines() if line.startswith("GPU ")) if out.returncode == 0 else None


def engine_world_size(engine_dir: Path) -> int | None:
    """tp x pp of a trtllm-build engine, read from its config.json (None when there is none)."""
    try:
        config = json.loads((engine_dir / "config.json").read_text())
    except (OSError, json.JSONDecodeError):
        return None
    mapping = config.get("pretrained_config", {}).get("mapping", {})
    if "world_size" in mapping:
        return int(mapping["world_size"])
    if mapping:
        return int(mapping.get("tp_size", 1)) * int(mapping.get("pp_size", 1))
    return None


def check_world_size(spec: ServerSpec, engine_dir: Path | None) -> None:
    """The ranks to launch must equal the engine's tp x pp and fit on this host's GPUs."""
    if engine_dir is not None:
        engine = engine_world_size(engine_dir)
        if engine is not None and engine != spec.world_size:
            raise TrtsweepError(
                f"world_size {spec.world_size} does not match the engine's tp x pp = {engine} "
                f"({engine_dir}/config.json)"
            )
    if spec.world_size > 1 or spec.runtime != "local":
        gpus = gpu_count(spec.visible_devices)
        if gpus is not None and gpus < spec.world_size:
            where = f"visible_devices {spec.visible_devices!r} has" if spec.visible_devices else "this host has"
            raise TrtsweepError(f"world_size {spec.world_size} needs {spec.world_size} GPUs; {where} {gpus}")


def busy_ports(address: str, ports: dict[str, int]) -> dict[str, int]:
    """Ports (by role) that cannot be bound on `address` right now."""
    busy = {}
    for role, port in ports.items():
        family = socket.AF_INET6 if ":" in address else socket.AF_INET
        with socket.socket(family, socket.SOCK_STREAM) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                sock.bind((address, port))
            except OSError:
                busy[role] = port
    return busy


def health_ready(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as resp:
            return resp.status == 200
    except (urllib.error.URLError, OSError):
        return False


def accepting(address: str, port: int) -> bool:
    try:
        with socket.create_connection((probe_host(address), port), timeout=2):
            return True
    except OSError:
        return False


@dataclass(frozen=True)
class Answer:
    """Who answered server metadata on one port: a Triton server id, or None for a server without one."""

    protocol: str
    port: int
    server_id: str | None

    def describe(self) -> str:
        return f"id {self.server_id!r}" if self.server_id is not None else "no Triton server id"


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def http_answer(host: str, port: int, timeout_s: float = 2.0) -> Answer | None:
    """Who answers `GET /v2` (server metadata) on host:port; None when nothing answers."""
    url = f"http://{_url_host(host)}:{port}/v2"
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as resp:
            body = resp.read(1 << 16)
    except urllib.error.HTTPError:  # something answered, but not with Triton server metadata
        return Answer("http", port, None)
    except (urllib.error.URLError, OSError):
        return None
    try:
        name = json.loads(body).get("name")
    except (ValueError, AttributeError):
        name = None
    return Answer("http", port, name if isinstance(name, str) else None)


def grpc_answer(host: str, port: int, timeout_s: float = 2.0) -> Answer | None:
    """Who answers gRPC ServerMetadata on host:port; None when nothing answers."""
    import grpc
    from tritonclient.grpc import service_pb2, service_pb2_grpc

    with grpc.insecure_channel(f"{_url_host(host)}:{port}") as channel:
        stub = service_pb2_grpc.GRPCInferenceServiceStub(channel)
        try:
            reply = stub.ServerMetadata(service_pb2.ServerMetadataRequest(), timeout=timeout_s)
        except grpc.RpcError as exc:
            code = exc.code() if isinstance(exc, grpc.Call) else None
            if code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
                return None
            return Answer("grpc", port, None)
    return Answer("grpc", port, reply.name)
