"""The container runtime mounts what its symlinks need: a hub-cache snapshot's files link into `blobs/`.

The `docker` stand-in (tests/doubles/docker) parses the real `docker run` argv and checks, hop by hop
through every symlink, that each path the server or tool will open resolves inside a mount.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from trtsweep.common.mounts import closure
from trtsweep.serve.command import build_command
from trtsweep.serve.spec import ContainerSpec, ServerSpec
from trtsweep.toolchain.runner import Runtime
from trtsweep.triton import repository

DOCKER = str(Path(__file__).resolve().parent.parent / "doubles" / "docker")


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


def docker(argv: list[str], log: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "DOCKER_STANDIN_LOG": str(log)}
    return subprocess.run(argv, env=env, capture_output=True, text=True, check=False)


def served_repository(tmp_path: Path, snapshot: Path) -> Path:
    repo = tmp_path / "repo"
    repository.write(repository.render({"engine_dir": str(snapshot), "tokenizer_dir": str(snapshot)}), repo)
    return repo


def test_the_server_container_sees_the_hub_cache_blobs_behind_the_snapshot(tmp_path):
    snapshot = hub_snapshot(tmp_path)
    repo = served_repository(tmp_path, snapshot)
    # as the sweep calls it: only the snapshot named as a further mount
    container = ContainerSpec(image="img", name="n", docker=DOCKER, mounts=[str(snapshot)])
    spec = ServerSpec(model_repository=repo, log_file=tmp_path / "log", runtime="container", container=container)
    argv, _ = build_command(spec)
    done = docker(argv, tmp_path / "docker.log")
    assert done.returncode == 0, done.stderr
    blobs = str(snapshot.parent.parent / "blobs")
    assert argv[argv.index(f"{blobs}:{blobs}:ro") - 1] == "-v"  # read-only: the cache is only read


def test_the_tokenizer_in_config_pbtxt_is_mounted_even_when_the_caller_forgot_it(tmp_path):
    snapshot = hub_snapshot(tmp_path)
    repo = served_repository(tmp_path, snapshot)
    spec = ServerSpec(model_repository=repo, log_file=tmp_path / "log", runtime="container",
                      container=ContainerSpec(image="img", name="n", docker=DOCKER))  # fmt: skip
    done = docker(build_command(spec)[0], tmp_path / "docker.log")
    assert done.returncode == 0, done.stderr


def test_the_stand_in_refuses_a_snapshot_mounted_without_its_blobs(tmp_path):
    """The check can fail: what the runtime mounted before (the snapshot alone) leaves the links dangling."""
    snapshot = hub_snapshot(tmp_path)
    repo = served_repository(tmp_path, snapshot)
    argv = [DOCKER, "run", "--rm", "-v", f"{repo}:{repo}", "-v", f"{snapshot}:{snapshot}", "img", "tritonserver",
            f"--model-repository={repo}"]  # fmt: skip
    done = docker(argv, tmp_path / "docker.log")
    assert done.returncode == 125
    assert f"{snapshot}/tokenizer.json is not visible in img" in done.stderr
    assert "blobs/bb22 is outside every mount" in done.stderr


def test_a_build_tool_in_the_container_reads_the_snapshot_through_its_links(tmp_path):
    snapshot = hub_snapshot(tmp_path)
    out = tmp_path / "ckpt"
    out.mkdir()
    runtime = Runtime(kind="container", image="img", docker=DOCKER)
    inner = ["python3", "/app/examples/convert_checkpoint.py", "--model_dir", str(snapshot), "--output_dir", str(out)]
    done = docker(runtime.wrap(inner, [str(snapshot), str(out)], "convert")[0:], tmp_path / "docker.log")
    assert done.returncode == 0, done.stderr


def test_closure_follows_links_in_added_directories_and_adds_nothing_twice(tmp_path):
    far, farther = tmp_path / "far", tmp_path / "farther"
    far.mkdir()
    farther.mkdir()
    (farther / "weights").write_text("w", encoding="utf-8")
    os.symlink(farther / "weights", far / "weights")
    root = tmp_path / "root"
    root.mkdir()
    os.symlink(far, root / "engine")
    os.symlink(far / "weights", root / "again")
    given, extra = closure([root, root])
    assert given == [str(root)]
    assert extra == [str(far), str(farther)]
