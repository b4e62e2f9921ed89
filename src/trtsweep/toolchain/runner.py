"""Running the build tools where their runtime runs them (trtsweep.runtime): natively (given python / trtllm-build
paths), in the TRT-LLM container with the docker CLI (``docker run --rm`` of an image, or ``docker exec`` into a
running container), or in the image as a Slurm step through pyxis.

The tool's output goes to a log file (headed by the command line), never to the caller's stdout. The tool
runs in its own process group (a timeout kills the whole tree) and dies with its caller: SIGTERM, SIGINT or
SIGHUP to the caller stops the step - the group is killed and what its runtime left (a ``docker run`` container: a
killed docker CLI leaves its container running; a pyxis step) is ended by name - and then the signal goes on to the
handler the caller had in place, if it has one of its own (a lane's: it ends and starts no further point); without
one the step fails naming the signal. The kernel kills the tool if the caller is killed outright (PR_SET_PDEATHSIG).
What a killed earlier run of the same artifact left is ended before the step starts again (the caller holds the
artifact's lock, so no live run owns it).
Secrets (HF_TOKEN) travel by environment only: into the child's environment natively, as ``-e HF_TOKEN``
(the name, docker reads the value from its own environment) for a container; their values are refused
in an argv and scrubbed from the log.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import signal
import subprocess
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trtsweep.common.procs import bound_child
from trtsweep.errors import TrtsweepError
from trtsweep.runtime import Launch, end, of
from trtsweep.runtime import Runtime as Where

SECRET_ENV = ("HF_TOKEN",)
MASK = "***"
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
POLL_S = 0.2  # how soon a stop signal or the timeout stops the tool


def default_timeout_s(model_dir: str | None) -> float:
    """A tool step's bound where none is set (quantize_timeout, trtllm_build_timeout): 1 h plus 2 min per GB of the
    model's files (a 70B model in 16 bits, about 140 GB: 5.7 h), so that a hung quantize or build ends and a
    week-long sweep goes on."""
    files = [f for f in Path(model_dir).rglob("*") if f.is_file()] if model_dir else []
    return 3600.0 + 120.0 * sum(f.stat().st_size for f in files) / 1e9


@dataclass(frozen=True)
class Runtime:
    """Where the tools run. ``trtllm_dir``: the TensorRT-LLM checkout holding ``examples/`` as the tools see
    it (inside the container for ``container``). ``container``: a running container to ``docker exec``
    into (its paths must match the host's); else ``image`` is run with ``docker run --rm``, the paths it
    needs mounted at the same place. ``env``: environment variable names passed into the container. ``pyxis``: the
    image run as a step of the lane's Slurm job through pyxis (runtime/pyxis.py), on the lane's GPUs, its whole
    environment exported."""

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

    @classmethod
    def from_params(cls, params: Mapping[str, Any], **tools: str) -> Runtime:
        """The Runtime of a tool step's parameters (runtime, container_image, container_name, docker, gpus, mounts,
        env, timeout: the trtsweep_quantize / _modelopt / _trtllm_build options); `tools` are python /
        trtllm_dir / trtllm_build."""
        return cls(
            kind=params["runtime"], image=params.get("container_image"), container=params.get("container_name"),
            docker=params.get("docker") or "docker", gpus=params.get("gpus") or "all",
            mounts=tuple(params.get("mounts") or ()), env=tuple(params.get("env") or SECRET_ENV),
            timeout_s=params.get("timeout"), **tools,
        )  # fmt: skip

    def script(self, relative: str) -> str:
        """An example script's path from the TensorRT-LLM checkout."""
        if not self.trtllm_dir:
            raise TrtsweepError(f"trtllm_dir: the TensorRT-LLM checkout (holding {relative}) is not set")
        return str(Path(self.trtllm_dir) / relative)

    def where(self) -> Where:
        """The runtime the tools run in (trtsweep.runtime)."""
        return of(self.kind, image=self.image, docker_cli=self.docker, gpus=self.gpus,
                          exec_into=self.container)  # fmt: skip

    def wrap(self, inner: Sequence[str], paths: Iterable[str], name: str) -> list[str]:
        """``inner`` as this runtime runs it, named ``name``; ``paths`` (and the runtime's mounts) are mounted in an
        image."""
        mounted = tuple(dict.fromkeys(p for p in [*paths, *self.mounts] if p))
        return self.where().command(Launch(list(inner), name, mounted, env=self.env))


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


class _Stopped(Exception):
    """The tool is to be stopped before its end: a stop signal came, or its time is up."""


@contextlib.contextmanager
def _signals_noted() -> Iterator[list[int]]:
    """While the tool runs, SIGTERM/SIGINT/SIGHUP to this process are noted (main thread only), not acted on where
    they land; when the step ends, each goes on to the handler that was in place before, when it is the caller's own
    (a Python function)."""
    noted: list[int] = []
    try:
        previous = {sig: signal.signal(sig, lambda signum, _frame: noted.append(signum)) for sig in STOP_SIGNALS}
    except ValueError:  # not the main thread: leave signal handling alone
        yield noted
        return
    try:
        yield noted
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)
        for signum in dict.fromkeys(noted):
            handler = previous[signal.Signals(signum)]
            if callable(handler):
                handler(signum, None)


def _wait(proc: subprocess.Popen[bytes], timeout_s: float | None, noted: list[int]) -> int:
    """The tool's exit status; _Stopped when a stop signal is noted or `timeout_s` passes first."""
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    while True:
        with contextlib.suppress(subprocess.TimeoutExpired):
            return proc.wait(timeout=POLL_S)
        if noted:
            raise _Stopped(f"stopped by {signal.Signals(noted[0]).name}")
        if deadline is not None and time.monotonic() > deadline:
            raise _Stopped(f"timed out after {timeout_s:g} s")


def _end_left(tools: Runtime, name: str | None) -> None:
    """What the tool's runtime left under ``name`` ended (its ``docker run`` container, its pyxis step; a ``docker
    exec`` runs in a container not ours)."""
    if name:
        end(tools.where().held(name))


def run(
    argv: Sequence[str], log_file: Path, *, tool: str, runtime: Runtime, extra_env: Mapping[str, str] | None = None,
    name: str | None = None, keep_fds: Sequence[int] = (),
) -> float:  # fmt: skip
    """Run ``argv`` with its output in ``log_file``; returns the seconds it took. A failure, a timeout, a signal
    or a secret in ``argv`` is a TrtsweepError naming the tool, its last log line and the log, unless the caller's
    own handler of the signal, called once the tool is stopped, raises first. ``keep_fds`` are inherited by the
    tool (the artifact lock)."""
    env = {**os.environ, **(extra_env or {})}
    secrets = _secrets(env)
    if any(secret in arg for secret in secrets for arg in argv):
        raise TrtsweepError(f"{tool}: a command line holds the value of {'/'.join(SECRET_ENV)}; pass it by environment")
    log_file.parent.mkdir(parents=True, exist_ok=True)
    _end_left(runtime, name)  # left by a killed earlier run of this step
    start = time.monotonic()
    with log_file.open("w", encoding="utf-8") as log, _signals_noted() as noted:
        log.write(f"# {shlex.join(argv)}\n")
        log.flush()
        try:
            proc = subprocess.Popen(list(argv), stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                    env=env, pass_fds=tuple(keep_fds), **bound_child())  # fmt: skip
        except OSError as exc:
            raise TrtsweepError(f"{tool}: cannot start {argv[0]} ({exc.strerror})") from None
        try:
            rc = _wait(proc, runtime.timeout_s, noted)
        except _Stopped as exc:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            _end_left(runtime, name)
            _scrub(log_file, secrets)
            raise TrtsweepError(f"{tool} {exc}; log: {log_file}") from None
    _scrub(log_file, secrets)
    if rc != 0:
        raise TrtsweepError(f"{tool} failed (exit status {rc}): {_last_line(log_file)}; log: {log_file}")
    return round(time.monotonic() - start, 3)
