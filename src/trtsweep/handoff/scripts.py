"""The bundle's shell scripts (templates/launch.sh.j2, templates/build.sh.j2): the server on the host and in its
container image, and the commands that made the point's artifacts. Every argument is quoted (shlex.quote)."""

from __future__ import annotations

from trtsweep.handoff.render import render
from trtsweep.handoff.server import Serving
from trtsweep.runtime.docker import LIMITS, run_argv


def launch_scripts(s: Serving, image: str, name: str, limits: dict[str, int] | None = None) -> dict[str, str]:
    """launch/native.sh and launch/container.sh (the model store mounted at paths.STORE; the --ulimit values the
    point's container ran with where its record has them, else NVIDIA's)."""
    container = run_argv(image, name, s.inner, limits=LIMITS if limits is None else limits, volumes=s.volumes,
                         server=True)  # fmt: skip
    bundle_dir = s.kind == "trtllm-serve"  # its LLM API options are read from the bundle
    before = [list(s.native_prepare)] if s.native_prepare else []
    return {
        "launch/native.sh": launch_script(s.native_needs, bundle_dir, s.native, before=before),
        "launch/container.sh": launch_script(s.container_needs, bundle_dir, container),
    }


def launch_script(needs: dict[str, str], bundle_dir: bool, command: list[str],
                  environment: dict[str, str] | None = None, before: list[list[str]] | None = None) -> str:  # fmt: skip
    """A launch script: it checks the variables it `needs` (name -> what to set it to), sets TRTSWEEP_BUNDLE
    (`bundle_dir`) and `environment`, runs the commands `before` it, then execs `command`."""
    return render("launch.sh.j2", needs=needs, bundle_dir=bundle_dir, environment=environment or {},
                  before=before or [], command=command)  # fmt: skip


def sbatch_script(s: Serving, image: str, name: str, gpus: int) -> str:
    """slurm/<name>.sbatch: one node, one task, the point's GPUs as GRES, the server in `image` through pyxis
    (`srun --container-image --container-mounts`, the docker volumes' host:container pairs)."""
    mounts = [value for flag, value in zip(s.volumes[::2], s.volumes[1::2], strict=True) if flag == "-v"]
    command = ["srun", f"--container-image={image}", "--no-container-entrypoint"]
    if mounts:
        command.append("--container-mounts=" + ",".join(mounts))
    return render("sbatch.sh.j2", name=name, gpus=gpus, needs=s.container_needs, bundle_dir=s.kind == "trtllm-serve",
                  command=[*command, *s.inner])  # fmt: skip


def build_script(commands: list[list[str]]) -> str:
    """build/build.sh: the recorded commands, in order (a record without one is left out)."""
    return render("build.sh.j2", commands=commands)
