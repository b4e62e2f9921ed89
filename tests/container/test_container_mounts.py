"""The container runtime mounts what its symlinks need: a hub-cache snapshot's files link into `blobs/`.

Each `docker run` argv the runtime builds (a build tool's, the server's) runs on the test's dockerd with the test
image, its inner command replaced by a reader of every file the tool or server would open: a link that resolves
outside every mount fails the read inside the container, as it would fail the tool.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.container.dockerd import Dockerd
from trtsweep.serve.command import build_command
from trtsweep.serve.spec import ContainerSpec, ServerSpec
from trtsweep.toolchain.runner import Runtime
from trtsweep.triton import repository

pytestmark = pytest.mark.container
# reads every file below each path argument (links followed) inside the container; names those it cannot read
READER = ["python3", "-c", (
    "import pathlib, sys\n"
    "bad = []\n"
    "for root in map(pathlib.Path, sys.argv[1:]):\n"
    "    for path in [root, *root.rglob('*')]:\n"
    "        try:\n"
    "            path.read_bytes() if not path.is_dir() else None\n"
    "        except OSError as exc:\n"
    "            bad.append(f'{path}: {exc.strerror}')\n"
    "print('\\n'.join(bad), file=sys.stderr)\n"
    "sys.exit(1 if bad else 0)\n"
)]  # fmt: skip


@pytest.fixture(autouse=True)
def docker_host(dockerd: Dockerd, monkeypatch: pytest.MonkeyPatch) -> None:
    """The runtime's own docker calls (its limits probe) reach the test's dockerd."""
    for name, value in dockerd.env({}).items():
        monkeypatch.setenv(name, value)


def hub_snapshot(root: Path) -> Path:
    """A real hub-cache layout: snapshots/<rev>/<file> -> ../../blobs/<hash>."""
    model = root / "hub" / "models--org--tiny"
    (model / "blobs").mkdir(parents=True)
    snapshot = model / "snapshots" / "0123abcd"
    snapshot.mkdir(parents=True)
    for name, blob in [("config.json", "aa11"), ("tokenizer.json", "bb22"), ("tokenizer_config.json", "cc33")]:
        (model / "blobs" / blob).write_text("{}", encoding="utf-8")
        os.symlink(f"../../blobs/{blob}", snapshot / name)
    return snapshot


def served_repository(tmp_path: Path, snapshot: Path) -> Path:
    repo = tmp_path / "repo"
    repository.write(repository.render({"engine_dir": str(snapshot), "tokenizer_dir": str(snapshot)}), repo)
    return repo


def reading(argv: list[str], image: str, *paths: Path) -> list[str]:
    """`argv` (a `docker run` of `image`) with its inner command replaced by READER of `paths`."""
    return [*argv[: argv.index(image) + 1], *READER, *map(str, paths)]


def server_argv(dockerd: Dockerd, image: str, repo: Path, tmp_path: Path, mounts: list[str]) -> list[str]:
    container = ContainerSpec(image=image, name=f"trtsweep-mounts-{tmp_path.name}", docker=str(dockerd.client),
                              mounts=mounts, gpus="all")  # fmt: skip
    spec = ServerSpec(model_repository=repo, log_file=tmp_path / "log", runtime="container", container=container)
    return build_command(spec)[0]


def test_the_server_container_reads_the_hub_cache_blobs_behind_the_snapshot(tmp_path, dockerd, container_image):
    snapshot = hub_snapshot(tmp_path)
    repo = served_repository(tmp_path, snapshot)
    # as the sweep calls it: only the snapshot named as a further mount
    argv = server_argv(dockerd, container_image.name, repo, tmp_path, [str(snapshot)])
    blobs = str(snapshot.parent.parent / "blobs")
    assert argv[argv.index(f"{blobs}:{blobs}:ro") - 1] == "-v"  # read-only: the cache is only read
    done = dockerd.docker(*reading(argv, container_image.name, repo, snapshot)[1:], check=False)
    assert done.returncode == 0, done.stderr


def test_the_tokenizer_in_config_pbtxt_is_mounted_even_when_the_caller_forgot_it(tmp_path, dockerd, container_image):
    snapshot = hub_snapshot(tmp_path)
    repo = served_repository(tmp_path, snapshot)
    argv = server_argv(dockerd, container_image.name, repo, tmp_path, [])
    done = dockerd.docker(*reading(argv, container_image.name, repo, snapshot)[1:], check=False)
    assert done.returncode == 0, done.stderr


def test_a_snapshot_mounted_without_its_blobs_cannot_be_read(tmp_path, dockerd, container_image):
    """The check can fail: what the runtime mounted before (the snapshot alone) leaves the links dangling."""
    snapshot = hub_snapshot(tmp_path)
    argv = ["run", "--rm", "-v", f"{snapshot}:{snapshot}:ro", container_image.name, *READER, str(snapshot)]
    done = dockerd.docker(*argv, check=False)
    assert done.returncode == 1
    assert f"{snapshot}/tokenizer.json: No such file or directory" in done.stderr


def test_a_build_tool_in_the_container_reads_the_snapshot_through_its_links(tmp_path, dockerd, container_image):
    snapshot = hub_snapshot(tmp_path)
    out = tmp_path / "ckpt"
    out.mkdir()
    runtime = Runtime(kind="container", image=container_image.name, docker=str(dockerd.client), gpus="all")
    inner = ["python3", "/app/examples/convert_checkpoint.py", "--model_dir", str(snapshot), "--output_dir", str(out)]
    argv = runtime.wrap(inner, [str(snapshot), str(out)], f"trtsweep-convert-{tmp_path.name}")
    done = dockerd.docker(*reading(argv, container_image.name, snapshot, out)[1:], check=False)
    assert done.returncode == 0, done.stderr
