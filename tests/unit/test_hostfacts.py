"""Host facts: GPUs from nvidia-smi (the recording double) or the inventory, busy GPUs, preflight lines."""

from __future__ import annotations

from pathlib import Path

import pytest

from trtsweep.errors import TrtsweepError
from trtsweep.fleet import hostfacts

DOUBLE = Path(__file__).resolve().parents[1] / "doubles" / "nvidia-smi"


def test_gpus_from_nvidia_smi_with_busy_ones(monkeypatch):
    monkeypatch.setenv("FAKE_GPU_COUNT", "2")
    monkeypatch.setenv("FAKE_GPU_USED_MB", "0,30000")
    gpus, why = hostfacts.discover_gpus(str(DOUBLE))
    assert why is None
    assert gpus == [
        {"index": 0, "name": "NVIDIA H100 80GB HBM3", "memory_mb": 81559, "used_mb": 0},
        {"index": 1, "name": "NVIDIA H100 80GB HBM3", "memory_mb": 81559, "used_mb": 30000},
    ]
    assert hostfacts.busy(gpus, 1024) == [1]


def test_a_host_without_nvidia_smi_has_no_gpus():
    gpus, why = hostfacts.discover_gpus("/nonexistent/nvidia-smi")
    assert gpus == [] and "not found" in why


def test_malformed_nvidia_smi_output_names_the_line():
    with pytest.raises(TrtsweepError, match="nvidia-smi line 2: expected 4 fields"):
        hostfacts.parse_nvidia_smi("0, H100, 81559, 0\n1, H100\n")


def test_declared_gpus_count_or_list():
    assert len(hostfacts.declared_gpus(2)) == 2
    assert hostfacts.declared_gpus([{"name": "NVIDIA L4", "memory_mb": 23034}])[0]["memory_mb"] == 23034
    for bad in (True, -1, "two", [{"memory_mb": 1}]):
        with pytest.raises(TrtsweepError, match="trtsweep_gpus"):
            hostfacts.declared_gpus(bad)


def test_preflight_gives_one_line_per_problem(tmp_path):
    problems, found = hostfacts.preflight(tmp_path / "cache", min_free_gb=5000, runtime="native",
                                          tritonserver="/nonexistent/tritonserver", trtllm_version_wanted="0.11.0",
                                          trtllm_python="/nonexistent/python")  # fmt: skip
    assert len(problems) == 3
    assert problems[0] == "runtime native: /nonexistent/tritonserver not found on PATH"
    assert problems[1].startswith("disk: ") and "need 5000 GiB (trtsweep_min_free_gb)" in problems[1]
    assert problems[2].startswith("tensorrt_llm: not importable by /nonexistent/python")
    assert found["free_bytes"] > 0
    assert all("\n" not in p for p in problems)


def test_preflight_checks_the_trtllm_version_of_the_install(tmp_path):
    fake = tmp_path / "python"
    fake.write_text("#!/bin/sh\necho 0.12.0\n")
    fake.chmod(0o755)
    problems, found = hostfacts.preflight(tmp_path, 0, "local", trtllm_version_wanted="0.11.0",
                                          trtllm_python=str(fake))  # fmt: skip
    assert problems == ["tensorrt_llm 0.12.0 on this host; the sweep's points declare 0.11.0"]
    assert found["trtllm_version"] == "0.12.0"


def test_preflight_refuses_podman_as_the_container_cli_in_one_line(tmp_path):
    podman = tmp_path / "docker"  # podman-docker's shim answers as podman does
    podman.write_text("#!/bin/sh\necho 'podman version 4.3.1'\n")
    podman.chmod(0o755)
    problems, _ = hostfacts.preflight(tmp_path, 0, "container", docker=str(podman), container_image="img:1")
    assert problems == [
        f"runtime container: {podman} is podman version 4.3.1; trtsweep runs NVIDIA's images with "
        "docker (podman ignores --gpus: it takes GPUs through CDI, --device nvidia.com/gpu=N)"
    ]
    docker = tmp_path / "real-docker"
    docker.write_text("#!/bin/sh\necho 'Docker version 20.10.24+dfsg1, build 297e128'\n")
    docker.chmod(0o755)
    assert hostfacts.preflight(tmp_path, 0, "container", docker=str(docker), container_image="img:1")[0] == []


def test_preflight_of_the_pyxis_runtime_wants_srun_and_an_image_and_no_docker(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # no srun, no docker
    assert hostfacts.preflight(tmp_path, 0, "pyxis", container_image="img:1")[0] == [
        "runtime pyxis: srun not found on PATH (pyxis runs the image as a step of the run's Slurm job)"
    ]
    (tmp_path / "srun").write_text("#!/bin/sh\n")
    (tmp_path / "srun").chmod(0o755)
    assert hostfacts.preflight(tmp_path, 0, "pyxis", container_image="img:1")[0] == []
    assert hostfacts.preflight(tmp_path, 0, "pyxis")[0] == [
        "runtime pyxis: no image (trtsweep_triton_container_image) for the sweep's Triton points"
    ]


def test_preflight_checks_the_host_groups_declared_release_and_the_image_tags(tmp_path, monkeypatch):
    monkeypatch.setattr(hostfacts, "_runtime_problem", lambda *a: None)  # no docker here: the tags are the subject
    problems, _ = hostfacts.preflight(
        tmp_path, 0, "container", container_image="nvcr.io/nvidia/tritonserver:25.10-trtllm-python-py3",
        trtllm_version_wanted="1.2.0", trtllm_version_declared="1.1.0",
        trtllm_image="nvcr.io/nvidia/tensorrt-llm/release:1.1.0",
    )  # fmt: skip
    assert problems == [
        "this host declares TensorRT-LLM 1.1.0 (trtsweep_trtllm_version); the sweep's points need 1.2.0",
        "image nvcr.io/nvidia/tensorrt-llm/release:1.1.0 is TensorRT-LLM 1.1.0; the sweep's points need 1.2.0",
    ]
    same, _ = hostfacts.preflight(tmp_path, 0, "container", trtllm_version_wanted="1.2.0",
                                  trtllm_version_declared="1.2.0",
                                  trtllm_image="nvcr.io/nvidia/tensorrt-llm/release:1.2.0")  # fmt: skip
    assert same == []
    assert hostfacts.image_tag_version("registry:5000/trt/release:v1.2.0rc7") == "1.2.0rc7"
    assert hostfacts.image_tag_version("nvcr.io/nvidia/tritonserver:24.07-trtllm-python-py3") is None


def test_a_trtllm_serve_only_sweep_needs_no_triton_image_nor_binary(tmp_path):
    """A sweep whose every point trtllm-serve serves runs in containers of trtllm.container_image alone, and natively
    without tritonserver; it was refused for want of a Triton image ("no image (trtsweep_triton_container_image)")."""
    docker = tmp_path / "docker"
    docker.write_text("#!/bin/sh\necho 'Docker version 20.10.24+dfsg1, build 297e128'\n")
    docker.chmod(0o755)
    serve_only = {"servers": ["trtllm-serve"], "docker": str(docker)}
    image = "nvcr.io/nvidia/tensorrt-llm/release:1.2.0"
    assert hostfacts.preflight(tmp_path, 0, "container", trtllm_image=image, **serve_only)[0] == []
    assert hostfacts.preflight(tmp_path, 0, "container", **serve_only)[0] == [
        "runtime container: no image for the sweep's trtllm-serve points (trtllm.container_image, or "
        "trtsweep_triton_container_image)"]  # fmt: skip
    assert hostfacts.preflight(tmp_path, 0, "container", trtllm_image=image, docker=str(docker))[0] == [
        "runtime container: no image (trtsweep_triton_container_image) for the sweep's Triton points"]  # fmt: skip
    missing = str(tmp_path / "no-tritonserver")
    assert hostfacts.preflight(tmp_path, 0, "native", tritonserver=missing, servers=["trtllm-serve"])[0] == []
    assert hostfacts.preflight(tmp_path, 0, "native", tritonserver=missing)[0] == [
        f"runtime native: {missing} not found on PATH"]  # fmt: skip


def test_the_sweeps_servers_are_tritons_for_the_engine_flow_and_the_pytorch_flows_own():
    from trtsweep.sweep.servers import servers_of

    assert servers_of({}) == ["triton"]
    assert servers_of({"flow": "pytorch", "servers": ["trtllm-serve"]}) == ["trtllm-serve"]
    assert servers_of({"flow": "pytorch"}) == ["triton"]
    assert servers_of({"flow": ["engine", "pytorch"], "servers": ["trtllm-serve"]}) == ["triton", "trtllm-serve"]


def test_the_jobs_gpus_are_found_by_the_nodes_index_in_a_session_that_sees_all_or_only_the_jobs():
    def gpu(index: int, name: str) -> dict:
        return {"index": index, "name": name, "memory_mb": 81559, "used_mb": 0}

    node = [gpu(i, f"g{i}") for i in range(8)]  # a session that sees the node's eight GPUs
    assert hostfacts.job_gpus(node, [5, 4]) == [gpu(4, "g4"), gpu(5, "g5")]
    adopted = [gpu(0, "g4"), gpu(1, "g5")]  # pam_slurm_adopt into a job holding 4 and 5, devices constrained
    assert hostfacts.job_gpus(adopted, [4, 5]) == [gpu(4, "g4"), gpu(5, "g5")]
    assert hostfacts.job_gpus(adopted, [0, 1]) == adopted  # counted alike
    with pytest.raises(TrtsweepError, match=r"^nvidia-smi here lists GPU\(s\) \[0, 1\]; the Slurm job holds GPU\(s\) "
                                            r"\[4, 5, 6\] on this node"):  # fmt: skip
        hostfacts.job_gpus(adopted, [4, 5, 6])
