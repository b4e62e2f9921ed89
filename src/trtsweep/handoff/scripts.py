"""The bundle's shell scripts (templates/launch.sh.j2, templates/build.sh.j2): the server on the host and in its
container image, and the commands that made the point's artifacts. Every argument is quoted (shlex.quote)."""

from __future__ import annotations

from trtsweep.handoff.render import render
from trtsweep.handoff.server import Serving
from trtsweep.serve.command import docker_run
from trtsweep.serve.spec import ContainerSpec


def launch_scripts(s: Serving, image: str, name: str) -> dict[str, str]:
    """launch/native.sh and launch/container.sh (the model store mounted at paths.STORE)."""
    container = docker_run(ContainerSpec(image=image, name=name), None, s.volumes, s.inner)
    bundle_dir = s.kind == "trtllm-serve"  # its LLM API options are read from the bundle
    return {
        "launch/native.sh": render("launch.sh.j2", needs=s.native_needs, bundle_dir=bundle_dir, command=s.native),
        "launch/container.sh": render(
            "launch.sh.j2", needs=s.container_needs, bundle_dir=bundle_dir, command=container
        ),
    }


def build_script(commands: list[list[str]]) -> str:
    """build/build.sh: the recorded commands, in order (a record without one is left out)."""
    return render("build.sh.j2", commands=commands)
