"""molecule scenarios (delegated driver, this machine): converge, idempotence, verify, cleanup. `build`: the quantize
and trtllm_build roles on the tool doubles; `serving`: hf_download, triton_repo, triton_serve and llm_perf in turn
(a real Triton server), verified with the checks of each of the three."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT, free_ports
from trtsweep.serve import server
from trtsweep.serve.spec import ServerState


@pytest.mark.e2e
@pytest.mark.parametrize("scenario", ["build", "serving"])
def test_molecule_scenario(scenario, tmp_path):
    http, grpc, metrics = free_ports(3)
    env = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        "TRTSWEEP_MOLECULE_WORK_DIR": str(tmp_path),
        "MOLECULE_TRITON_HTTP_PORT": str(http),
        "MOLECULE_TRITON_GRPC_PORT": str(grpc),
        "MOLECULE_TRITON_METRICS_PORT": str(metrics),
        "NO_COLOR": "1",
    }
    try:
        proc = subprocess.run([str(Path(sys.executable).parent / "molecule"), "test", "-s", scenario], cwd=ROOT,
                              env=env, capture_output=True, text=True, timeout=900, check=False)  # fmt: skip
        assert proc.returncode == 0, (proc.stdout + proc.stderr)[-5000:]
        assert "idempotence: Executed: Successful" in proc.stdout + proc.stderr
    finally:
        for state_file in tmp_path.rglob("triton_server.json"):  # a failed run must not leave a server
            server.stop(ServerState.load(state_file))
