"""Another job on a point's GPU (another user's process, another controller's server): the lane's GPU check sees it
among the GPU's compute processes (NVML: here its double, tests/doubles/nvml, which reports the server-like processes
an environment gives the GPU) and the point fails at serve naming it, instead of being measured on a shared GPU and
recorded ok. The point's server is the sleep-bound stand-in started as `tritonserver` (so NVML counts it as a
server), on this machine (`ansible_connection: local`) with GPU 7 of eight (the nvidia-smi double; the others busy)."""

from __future__ import annotations

import contextlib
import csv
import os
import stat
import subprocess
import sys
import sysconfig
import time

import pytest
import yaml

from tests.conftest import ROOT, benchmark_under_way
from tests.integration.standin_run import STANDIN, playbook_argv, playbook_env, records, write_run

DOUBLES = ROOT / "tests" / "doubles"


def private() -> None:  # a preexec_fn: the run under umask 077
    os.umask(0o077)


def gpu_run(tmp_path):
    """(argv, env) of one stand-in point on GPU 0 of this machine's one (double) GPU, the GPU check on."""
    extravars = write_run(tmp_path, "foreign", 0.5, 20)
    values = yaml.safe_load(extravars.read_text())
    del values["trtsweep_gpus"]  # found by nvidia-smi (the double): the server GPU check is on
    named = tmp_path / "bin" / "tritonserver"  # the stand-in as NVML would see a Triton server
    named.parent.mkdir()
    named.symlink_to(sys.executable)  # the venv's python by another name (its packages through PYTHONPATH)
    wrapper = tmp_path / "tritonserver-on-gpu"
    site = sysconfig.get_paths()["purelib"]
    wrapper.write_text(f'#!/bin/sh\nPYTHONPATH="{site}" exec "{named}" "{STANDIN}" --standin-load-s 0.5 '
                       '--standin-first-token-ms 20 --standin-token-ms 60 "$@"\n')  # fmt: skip
    wrapper.chmod(0o755)
    values["triton_serve_tritonserver"] = str(wrapper)
    extravars.write_text(yaml.safe_dump(values))
    # eight GPUs, 0-6 busy (nvidia-smi's memory in use): the point gets GPU 7, which no other test uses
    env = {**playbook_env(), "FAKE_GPU_COUNT": "8", "FAKE_GPU_USED_MB": ",".join(["40000"] * 7),
           "FAKE_GPU_OWNER": str(tmp_path),
           "PATH": os.pathsep.join([str(DOUBLES), playbook_env()["PATH"]]),
           "PYTHONPATH": os.pathsep.join([str(DOUBLES / "nvml"), os.environ.get("PYTHONPATH", "")])}  # fmt: skip
    return playbook_argv(extravars), env


@pytest.mark.e2e
@pytest.mark.timeout(300)
@pytest.mark.fault(
    "another job's process on a point's GPU (a server someone else started there)",
    "the point fails at serve naming it; alone it is measured, and a job that takes its GPU mid-benchmark flags the "
    "level (gpu_shared: no verdict candidate); under umask 077 the user's data stays private",
)
def test_a_point_whose_gpu_another_job_uses_is_not_measured(tmp_path):
    argv, env = gpu_run(tmp_path)
    other = tmp_path / "elsewhere" / "tritonserver"
    other.parent.mkdir()
    other.symlink_to("/bin/sleep")
    squatter = subprocess.Popen([str(other), "300"], env={**os.environ, "CUDA_VISIBLE_DEVICES": "7",
                                                          "FAKE_GPU_OWNER": str(tmp_path)})  # fmt: skip
    try:
        done = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=240, preexec_fn=private)
    finally:
        squatter.kill()
        squatter.wait()
    assert done.returncode != 0, done.stdout[-3000:]
    (record,) = records(tmp_path, "foreign").values()
    assert record["status"] == "failed" and record["stage"] == "serve", record
    assert f"the point's GPUs are also in use: GPU 7 by pid {squatter.pid} (tritonserver)" in record["cause"], record
    # the GPU free again; another job takes it once the benchmark runs: the level is flagged, never silently ok
    alone = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                             preexec_fn=private)  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        while not benchmark_under_way(tmp_path / "work"):
            assert alone.poll() is None and time.monotonic() < deadline, "the benchmark never started"
            time.sleep(0.2)
        late = subprocess.Popen([str(other), "120"], env={**os.environ, "CUDA_VISIBLE_DEVICES": "7",
                                                          "FAKE_GPU_OWNER": str(tmp_path)})  # fmt: skip
        out, _ = alone.communicate(timeout=240)
    finally:
        with contextlib.suppress(NameError):
            late.kill()
            late.wait()
        alone.kill()
    assert alone.returncode == 0, out[-3000:]  # measured (its server seen on GPU 7)
    with (tmp_path / "results" / "foreign" / "results.csv").open() as handle:
        (row,) = csv.DictReader(handle)
    assert f"the point's GPUs are also in use: GPU 7 by pid {late.pid} (tritonserver)" in row["gpu_shared"], row
    report = (tmp_path / "results" / "foreign" / "report.md").read_text()
    assert "measured on shared GPUs: the point's GPUs are also in use" in report, report[-2000:]
    # both runs under a private umask (a site whose prompts and results are nobody else's): what they wrote of the
    # user's data (the host's copy of the prompts, the point's records, measurements and logs on the host and on the
    # controller, the report, the run's own files) takes it: nothing widened to 0644 by a copy or an explicit mode
    assert [r["status"] for r in records(tmp_path, "foreign").values()] == ["ok"]
    work = tmp_path / "work"
    data = [*work.rglob("prompts.jsonl"), *work.glob("foreign/*/runs/*/results/*"), *work.glob("foreign/.runs/*/*"),
            *(tmp_path / "results").rglob("*")]  # fmt: skip
    written = [path for path in data if path.is_file() and not path.is_symlink()]
    names = {path.name for path in written}
    assert {"prompts.jsonl", "status.json", "llm_perf.summary.json", "results.csv", "report.html"} <= names, names
    wide = [f"{path} {stat.S_IMODE(path.stat().st_mode):o}" for path in written if path.stat().st_mode & 0o077]
    assert not wide, wide
