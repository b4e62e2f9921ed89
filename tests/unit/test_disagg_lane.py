"""A disaggregated point's members as its lane starts them (lane/disagg.py): each worker on its GPUs and worker port
with its own options file, log and link directory, its command the release's (the hf stand-in's on the hf backend),
the proxy on the lane's http port reading the config written beside the point."""

from __future__ import annotations

import sys

import pytest
import yaml

from trtsweep.errors import TrtsweepError
from trtsweep.lane import disagg as lane_disagg

SHAPE = {"name": "c1x1-g2x1", "context": {"tp": 1, "pp": 1, "instances": 1},
         "generation": {"tp": 1, "pp": 1, "instances": 2}, "transceiver": {"backend": "DEFAULT"}}  # fmt: skip
PORTS = {"http": 8000, "grpc": 8001, "metrics": 8002, "worker0": 8003, "worker1": 8004, "worker2": 8005}


def _point(**over):
    return {"id": "p_disagg-c1x1-g2x1", "disaggregated": SHAPE, "llm_api_release": "1.1", "gpus": [2, 3, 4],
            "ports": PORTS, "backend": "tensorrtllm", **over}  # fmt: skip


def _base(tmp_path, backend="tensorrtllm", runtime="native"):
    return {"model_repository": str(tmp_path / "repo"), "runtime": runtime, "tritonserver": "tritonserver",
            "world_size": 1, "engine_dir": None, "mpirun": "mpirun", "container_image": "nvcr.io/trt:1.1.0",
            "container_name": None, "docker": "docker", "gpus": "all", "visible_devices": "2,3,4",
            "mounts": [], "http_port": 8000, "grpc_port": 8001, "metrics_port": 8002, "bind_address": "127.0.0.1",
            "log_file": str(tmp_path / "triton_server.log"), "log_verbose": 0, "cache_dir": str(tmp_path),
            "lease_file": str(tmp_path / "lease"), "lease_ttl": 20,
            "openai": {"backend": backend, "release": "1.1", "model": str(tmp_path / "model"),
                       "options_file": str(tmp_path / "llm_api_options.yml"), "served_dir": str(tmp_path / "served"),
                       "tp": 1, "pp": 1, "ep": None, "executable": "/opt/trt/bin/trtllm-serve"}}  # fmt: skip


def _dirs(tmp_path):
    dirs = [tmp_path / name for name in ("point", "run", "results")]
    for d in dirs:
        d.mkdir()
    return dirs


def test_each_worker_starts_on_its_gpus_and_port_with_its_own_files(tmp_path):
    plan = lane_disagg.layout(_point(), {"max_batch_size": 4, "max_seq_len": 64}, "127.0.0.1")
    point_dir, run_dir, results = _dirs(tmp_path)
    workers, proxy = lane_disagg.starts(plan, _base(tmp_path), point_dir, run_dir, results)
    assert [(w.name, w.role, w.gpus, w.spec.http_port, w.spec.visible_devices) for w in workers] == [
        ("context0", "context", [2], 8003, "2"), ("generation0", "generation", [3], 8004, "3"),
        ("generation1", "generation", [4], 8005, "4")]  # fmt: skip
    for w in workers:
        options = yaml.safe_load((point_dir / f"llm_api_options_{w.name}.yml").read_text())
        assert options == yaml.safe_load((results / f"llm_api_options_{w.name}.yml").read_text())
        assert options["cache_transceiver_config"] == {"backend": "DEFAULT"} and "max_batch_size" not in options
        assert w.spec.log_file == results / f"{w.name}.log"
        assert w.spec.openai.served_dir == run_dir / "served" / w.name
        assert w.spec.openai.flags[-2:] == ["--max_seq_len", "64"]  # 1.1: a flag, not the options file's
    assert yaml.safe_load((point_dir / "disagg_proxy.yml").read_text())["generation_servers"]["urls"] == [
        "127.0.0.1:8004", "127.0.0.1:8005"]  # fmt: skip
    assert proxy.argv == ["/opt/trt/bin/trtllm-serve", "disaggregated", "-c", str(point_dir / "disagg_proxy.yml")]
    assert (proxy.spec.http_port, proxy.spec.log_file) == (8000, results / "proxy.log")
    assert lane_disagg.metrics_port(_point()) == 8004


def test_the_hf_backend_runs_the_stand_ins_from_the_same_files(tmp_path):
    plan = lane_disagg.layout(_point(gpus=[]), {}, "127.0.0.1")
    workers, proxy = lane_disagg.starts(plan, _base(tmp_path, backend="hf"), *_dirs(tmp_path))
    assert proxy.argv[:3] == [sys.executable, "-m", "trtsweep.serve.disagg_proxy"]
    assert proxy.argv[3:5] == ["disaggregated", "-c"]
    assert all(w.spec.visible_devices is None for w in workers)


def test_the_container_runtime_runs_the_proxy_in_the_release_image(tmp_path):
    plan = lane_disagg.layout(_point(), {}, "127.0.0.1")
    point_dir, run_dir, results = _dirs(tmp_path)
    _, proxy = lane_disagg.starts(plan, _base(tmp_path, runtime="container"), point_dir, run_dir, results)
    assert proxy.argv[:3] == ["docker", "run", "--rm"]
    assert proxy.argv[-4:] == ["/opt/trt/bin/trtllm-serve", "disaggregated", "-c", str(point_dir / "disagg_proxy.yml")]


def test_a_lane_without_enough_worker_ports_is_refused():
    with pytest.raises(TrtsweepError, match="3 workers, its lane has 2 worker ports"):
        lane_disagg.layout(_point(ports={"http": 1, "grpc": 2, "metrics": 3, "worker0": 4, "worker1": 5}), {}, "h")
