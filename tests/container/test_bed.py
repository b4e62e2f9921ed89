"""The container test bed itself: a real tritonserver in a real container, and the host facts the product's
`docker run` must meet (--gpus through NVIDIA's hook, the memlock hard limit)."""

from __future__ import annotations

import json
import resource
import shutil
import subprocess
import sys
import tempfile
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.beds import alive, require
from tests.conftest import ROOT, free_ports, wait_for
from tests.container.dockerd import Dockerd, stale_beds, start, stop_bed, unavailable_reason
from tests.container.image import PYTHON_PACKAGES, VENV, Image

pytestmark = pytest.mark.container

RLIMIT_ERROR = "error setting rlimit type 8: operation not permitted"  # type 8: RLIMIT_MEMLOCK
ECHO_CONFIG = """\
backend: "python"
max_batch_size: 0
input [ { name: "IN" data_type: TYPE_FP32 dims: [ 3 ] } ]
output [
  { name: "OUT" data_type: TYPE_FP32 dims: [ 3 ] },
  { name: "PREFIX" data_type: TYPE_STRING dims: [ 1 ] }
]
instance_group [ { kind: KIND_CPU count: 1 } ]
"""
ECHO_MODEL = """\
import sys

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "IN").as_numpy()
            prefix = np.array([sys.prefix.encode()], dtype=np.object_)
            outputs = [pb_utils.Tensor("OUT", (x * 2).astype(np.float32)), pb_utils.Tensor("PREFIX", prefix)]
            responses.append(pb_utils.InferenceResponse(output_tensors=outputs))
        return responses
"""


def _get(port: int, path: str, body: dict | None = None) -> tuple[int, bytes]:
    """(status, body) of a GET (or a JSON POST when `body` is given) to the server on loopback; (0, b"") if none."""
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=data)
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()
    except OSError:
        return 0, b""


@contextmanager
def triton_in_container(
    dockerd: Dockerd, image: Image, name: str, repo: Path, log: Path, extra: tuple[str, ...] = ()
) -> Iterator[tuple[int, subprocess.Popen[bytes]]]:
    """`docker run --rm --init` of tritonserver on `repo` (host network and IPC, loopback ports); yields (HTTP port,
    the docker CLI) once ready; stops the container at the end and checks it is gone."""
    http, grpc, metrics = free_ports(3)
    argv = dockerd.argv(
        "run", "--rm", "--init", "--name", name, "--network", "host", "--ipc", "host", "-v", f"{repo}:{repo}:ro",
        image.name, "tritonserver", f"--model-repository={repo}", f"--http-port={http}", f"--grpc-port={grpc}",
        f"--metrics-port={metrics}", "--http-address=127.0.0.1", "--grpc-address=127.0.0.1",
        "--metrics-address=127.0.0.1", f"--backend-config=python,shm-region-prefix-name={name}_",
        "--exit-timeout-secs=5", *extra,
    )  # fmt: skip
    with open(log, "wb") as out:
        cli = subprocess.Popen(argv, env=dockerd.env(), stdout=out, stderr=subprocess.STDOUT)
    try:
        wait_for(lambda: cli.poll() is not None or _get(http, "/v2/health/ready")[0] == 200, 120)
        assert cli.poll() is None, f"docker run exited {cli.returncode}:\n{log.read_text()}"
        yield http, cli
        dockerd.docker("stop", "--time", "10", name)
        assert cli.wait(timeout=30) == 0, log.read_text()
        assert name not in dockerd.container_names()
    finally:
        if cli.poll() is None:
            cli.kill()
            cli.wait()


def test_tritonserver_in_container_answers_ready(
    dockerd: Dockerd, container_image: Image, container_name: str, tmp_path: Path
) -> None:
    """The real tritonserver of the image, on an empty model repository, answers /v2/health/ready with 200; its
    container's first process is docker's init, and the container is gone once stopped (--rm)."""
    repo = tmp_path / "models"
    repo.mkdir()
    with triton_in_container(dockerd, container_image, container_name, repo, tmp_path / "run.log") as (http, _):
        assert _get(http, "/v2/health/ready")[0] == 200
        pid = dockerd.docker("inspect", "-f", "{{.State.Pid}}", container_name).stdout.strip()
        init = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        assert Path(init[0].decode()).name == "docker-init", init
        assert b"tritonserver" in init


def test_python_backend_runs_in_the_image_venv(
    dockerd: Dockerd, container_image: Image, container_name: str, tmp_path: Path
) -> None:
    """A python-backend model loads and answers in the container: the 3.11 stub, libpython and the venv's numpy are
    laid out where tritonserver looks (its sys.prefix is the image's venv)."""
    model = tmp_path / "models" / "echo"
    (model / "1").mkdir(parents=True)
    (model / "config.pbtxt").write_text(ECHO_CONFIG)
    (model / "1" / "model.py").write_text(ECHO_MODEL)
    with triton_in_container(dockerd, container_image, container_name, model.parent, tmp_path / "run.log") as (
        http,
        _,
    ):
        body = {"inputs": [{"name": "IN", "shape": [3], "datatype": "FP32", "data": [1, 2, 3]}]}
        status, answer = _get(http, "/v2/models/echo/infer", body)
        assert status == 200, answer
        outputs = {o["name"]: o["data"] for o in json.loads(answer)["outputs"]}
        assert outputs == {"OUT": [2.0, 4.0, 6.0], "PREFIX": [VENV]}


def test_image_has_the_host_versions_and_this_trtsweep(dockerd: Dockerd, container_image: Image) -> None:
    """The image's venv has the host venv's versions of what it was built from, tritonserver on PATH, and the trtsweep
    of the checkout (its build id)."""
    script = (
        "import importlib.metadata as m, json, shutil; from trtsweep.fleet.release import build_id; "
        f"print(json.dumps({{'versions': {{n: m.version(n) for n in {list(PYTHON_PACKAGES)!r}}}, "
        "'build': build_id(), 'tritonserver': shutil.which('tritonserver'), 'python': shutil.which('python3')}))"
    )
    ran = dockerd.docker("run", "--rm", container_image.name, "python3", "-c", script)
    seen = json.loads(ran.stdout)
    pins = {k.lower(): v for k, v in container_image.pins.items()}
    assert seen["versions"] == {n: pins[n.lower()] for n in PYTHON_PACKAGES}
    assert seen["build"] == container_image.trtsweep_build
    assert seen["tritonserver"] == "/opt/tritonserver/bin/tritonserver"
    assert seen["python"] == f"{VENV}/bin/python3"


def test_gpus_request_is_accepted_through_the_hook(
    dockerd: Dockerd, container_image: Image, container_name: str
) -> None:
    """`docker run --gpus '"device=0,1"'` runs (the stand-in NVIDIA hook is called at prestart) and the container
    sees NVIDIA_VISIBLE_DEVICES=0,1."""
    ran = dockerd.docker(
        "run", "--rm", "--name", container_name, "--gpus", '"device=0,1"', container_image.name,
        "printenv", "NVIDIA_VISIBLE_DEVICES", check=False,
    )  # fmt: skip
    assert (ran.returncode, ran.stdout.strip()) == (0, "0,1"), ran.stderr
    assert "prestart" in dockerd.hook_log.read_text()
    assert container_name not in dockerd.container_names()


def _can_raise_memlock() -> bool:
    """Whether a process of this host may raise its memlock hard limit (root with CAP_SYS_RESOURCE)."""
    probe = "import resource as r; r.setrlimit(r.RLIMIT_MEMLOCK, (r.RLIM_INFINITY, r.RLIM_INFINITY))"
    return subprocess.run([sys.executable, "-c", probe], capture_output=True, check=False).returncode == 0


def test_memlock_unlimited_fails_where_the_hard_limit_is_fixed(
    dockerd: Dockerd, container_image: Image, container_name: str
) -> None:
    """`--ulimit memlock=-1` fails with docker's rlimit error where the memlock hard limit cannot be raised (this
    host: 8 MiB), and leaves no container; `--ulimit memlock=<the hard limit>` runs with that limit."""
    hard = resource.getrlimit(resource.RLIMIT_MEMLOCK)[1]
    fixed = hard != resource.RLIM_INFINITY and not _can_raise_memlock()
    image = container_image.name
    unlimited = dockerd.docker(
        "run", "--rm", "--name", container_name, "--ulimit", "memlock=-1", image, "true", check=False
    )
    if fixed:
        assert unlimited.returncode == 125  # docker's own status for a container that could not start
        assert RLIMIT_ERROR in unlimited.stderr, unlimited.stderr
    else:
        assert unlimited.returncode == 0, unlimited.stderr
    assert container_name not in dockerd.container_names()
    limit = hard if hard != resource.RLIM_INFINITY else 64 << 20
    show = "import resource as r; print(*r.getrlimit(r.RLIMIT_MEMLOCK))"
    ran = dockerd.docker("run", "--rm", "--ulimit", f"memlock={limit}", image, "python3", "-c", show, check=False)
    assert (ran.returncode, ran.stdout.split()) == (0, [str(limit), str(limit)]), ran.stderr


def test_a_bed_whose_session_was_killed_is_stopped_by_the_next_start() -> None:
    """A dockerd outlives its killed session (it runs in a session of its own); the next start finds its bed by the
    owner it recorded, stops the daemon by its pid file and removes the bed."""
    require(unavailable_reason(), "container")
    beds = Path(tempfile.mkdtemp(prefix="tswbeds-", dir="/tmp"))  # short: the socket path must fit 108 bytes
    script = (
        "import sys, time; from pathlib import Path; from tests.container.dockerd import start; "
        "bed = start(Path(sys.argv[1])); print(bed.root, bed.process.pid, flush=True); time.sleep(600)"
    )
    owner = subprocess.Popen([sys.executable, "-c", script, str(beds)], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    try:
        assert owner.stdout is not None
        root, pid = owner.stdout.readline().split()
        owner.kill()
        owner.wait()
        assert alive(int(pid)) and stale_beds(beds) == [Path(root)]
        bed = start(beds)
        try:
            assert not alive(int(pid)) and not Path(root).exists()
        finally:
            bed.stop()
        assert list(beds.glob("bed-*")) == []
    finally:
        owner.kill()
        for left in stale_beds(beds):  # the owner is gone: any bed left is stale
            stop_bed(left)
        shutil.rmtree(beds, ignore_errors=True)
