"""`ansible-playbook sweep.yml` with the container runtime on the test's dockerd: the embedded sweep's points served
by the real tritonserver inside the test image, on GPUs the nvidia-smi double lists and the NVML double
(tests/doubles/nvml) reports from the processes docker gives them (NVIDIA_VISIBLE_DEVICES)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

from tests.conftest import ROOT
from tests.container.dockerd import Dockerd
from tests.integration.test_server_lifetime import SHORT, Run

DOUBLES = ROOT / "tests" / "doubles"
FLOAT32 = "smollm2-135m_float32_tp1pp1_bs4_isl1024osl128_stream"
INT8 = "smollm2-135m_int8_tp1pp1_bs4_isl1024osl128_stream"


def sweep_with(num_requests: int, max_tokens: int) -> dict[str, Any]:
    """The embedded sweep with `num_requests` answers of `max_tokens` at concurrency 1 and 2."""
    return {**SHORT, "benchmark": {**SHORT["benchmark"], "num_requests": num_requests, "max_tokens": max_tokens}}


def container_run(tmp_path: Path, dockerd: Dockerd, image: str, only: str = "*", sweep: dict[str, Any] | None = None,
                  gpus: int = 1, ports: list[int] | None = None,
                  extra: dict[str, Any] | None = None) -> Run:  # fmt: skip
    """A run of the sweep's points matching `only`, each server in a container of `image`, on `gpus` GPUs; `extra`:
    more variables."""
    # each server (a disaggregated point's: each worker) on a GPU of its own
    sweep = sweep or SHORT
    sweep = {**sweep, "placement": {**(sweep.get("placement") or {}), "gpus_per_point": 1}}
    if sweep.get("flow", "engine") == "engine":  # one torch thread in the served model, as make test gives its
        sweep["triton"] = {**(sweep.get("triton") or {}), "hf_torch_threads": 1}  # workers (OMP_NUM_THREADS stays out)
    extra = {"trtsweep_triton_runtime": "container", "trtsweep_triton_container_image": image,
             "triton_serve_container_docker": str(dockerd.client), "triton_serve_tritonserver": "tritonserver",
             "trtsweep_only": only, "trtsweep_sweep": sweep, **(extra or {})}  # fmt: skip
    env = {**dockerd.env(), "FAKE_GPU_COUNT": str(gpus), "FAKE_GPU_OWNER": str(tmp_path),
           "PATH": os.pathsep.join([str(Path(sys.executable).parent), str(DOUBLES), os.environ["PATH"]]),
           "PYTHONPATH": os.pathsep.join([str(DOUBLES / "nvml"), os.environ.get("PYTHONPATH", "")])}  # fmt: skip
    return Run(tmp_path, extra=extra, env=env, ports=ports)


def status(run: Run, point: str) -> dict[str, Any]:
    """The point's record as the controller keeps it."""
    return json.loads((run.results / point / "status.json").read_text())
