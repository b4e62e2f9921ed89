"""Running the build tools: natively (given python / trtllm-build paths) or in the TRT-LLM container with
the docker CLI (``docker run --rm`` of an image, or ``docker exec`` into a running container).

The tool's output goes to a log file (headed by the command line), never to the caller's stdout.
Secrets (HF_TOKEN) travel by environment only: into the child's environment natively, as ``-e HF_TOKEN``
(the name, docker reads the value from its own environment) for a container; their values are refused
in an argv and scrubbed from the log.
"""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from trtsweep.errors import TrtsweepError

KINDS = ("native", "container")
SECRET_ENV = ("HF_TOKEN",)
MASK = "***"


@dataclass(frozen=True)
class Runtime:
    """Where the tools run. ``trtllm_dir``: the TensorRT-LLM checkout holding ``examples/`` as the tools see
    it (inside the container for ``container``). ``container``: a running container to ``docker exec``
    into (its paths must match the host's); else ``image`` is run with ``docker run --rm``, the paths it
    needs mounted at the same place. ``env``: environment variable names passed into the container."""

    kind: str = "native"
    python: str = "python3"
    trtllm_build: str = "trtllm-build"
    trtllm_dir: str = ""
    docker: str = "docker"
    image: str | None = None
    container: str | None = None
    gpus: str = "all"
    mounts: tuple[str, ...] = ()
    env: tuple[str, ...] = SECRET_ENV
    timeout_s: float | None = None

    def script(self, relative: str) -> str:
        """An example script's path from the TensorRT-LLM checkout."""
        if not self.trtllm_dir:
            raise TrtsweepError(f"trtllm_dir: the TensorRT-LLM checkout (holding {relative}) is not set")
        return str(Path(self.trtllm_dir) / relative)

    def wrap(self, inner: Sequence[str], paths: Iterable[str], name: str) -> list[str]:
        """``inner`` as this runtime runs it; ``paths`` are mounted for ``docker run``, named ``name``."""
        if self.kind not in KINDS:
            raise TrtsweepError(f"runtime {self.kind!r}: expected one of {KINDS}")
        if self.kind == "native":
            return list(inner)
        env = [arg for var in self.env for arg in ("-e", var)]
        if self.container:
            return [self.docker, "exec", *env, self.container, *inner]
        if not self.image:
            raise TrtsweepError("runtime container: set container_image (docker run) or container_name (docker exec)")
        mounts = dict.fromkeys(str(p) for p in [*paths, *self.mounts] if p)
        volumes = [arg for path in mounts for arg in ("-v", f"{path}:{path}")]
        return [
            self.docker, "run", "--rm", "--name", name, "--gpus", self.gpus, "--ipc=host", "--ulimit", "memlock=-1",
            "--ulimit", "stack=67108864", *volumes, *env, self.image, *inner,
        ]  # fmt: skip


def _secrets(env: Mapping[str, str]) -> list[str]:
    return [env[name] for name in SECRET_ENV if env.get(name)]


def _scrub(log_file: Path, secrets: Sequence[str]) -> None:
    if not secrets:
        return
    text = log_file.read_text(encoding="utf-8", errors="replace")
    clean = text
    for secret in secrets:
        clean = clean.replace(secret, MASK)
    if clean != text:
        log_file.write_text(clean, encoding="utf-8")


def _last_line(log_file: Path) -> str:
    lines = [ln.strip() for ln in log_file.read_text(encoding="utf-8", errors="replace").splitlines() if ln.strip()]
    return lines[-1] if lines else "(no output)"


def run(
    argv: Sequence[str], log_file: Path, *, tool: str, runtime: Runtime, extra_env: Mapping[str, str] | None = None,
    name: str | None = None,
) -> float:  # fmt: skip
    """Run ``argv`` with its output in ``log_file``; returns the seconds it took. A failure, a timeout or a
    secret in ``argv`` is a TrtsweepError naming the tool, its last log line and the log."""
    env = {**os.environ, **(extra_env or {})}
    secrets = _secrets(env)
    if any(secret in arg for secret in secrets for arg in argv):
        raise TrtsweepError(f"{tool}: a command line holds the value of {'/'.join(SECRET_ENV)}; pass it by environment")
    log_file.parent.mkdir(parents=True, exist_ok=True)
    start = time.monotonic()
    with log_file.open("w", encoding="utf-8") as log:
        log.write(f"# {shlex.join(argv)}\n")
        log.flush()
        try:
            proc = subprocess.Popen(list(argv), stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                    env=env, start_new_session=True)  # fmt: skip
        except OSError as exc:
            raise TrtsweepError(f"{tool}: cannot start {argv[0]} ({exc.strerror})") from None
        try:
            rc = proc.wait(timeout=runtime.timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            if runtime.kind == "container" and not runtime.container and name:
                subprocess.run([runtime.docker, "rm", "-f", name], capture_output=True, timeout=60, check=False)
            _scrub(log_file, secrets)
            raise TrtsweepError(f"{tool} timed out after {runtime.timeout_s:g} s; log: {log_file}") from None
    _scrub(log_file, secrets)
    if rc != 0:
        raise TrtsweepError(f"{tool} failed (exit status {rc}): {_last_line(log_file)}; log: {log_file}")
    return round(time.monotonic() - start, 3)
