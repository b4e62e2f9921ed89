"""Is it our server? The repository it serves (hashed), the id it answers with, and what differs between a running
server and the one asked for (adoption)."""

from __future__ import annotations

import hashlib
from pathlib import Path

from trtsweep.serve import openai_server
from trtsweep.serve.command import build_command, strip_server_id
from trtsweep.serve.probes import Answer, grpc_answer, http_answer
from trtsweep.serve.spec import ServerSpec, ServerState


def repository_hash(repository: Path) -> str:
    """sha256 over every file under the model repository (relative path and bytes), in path order.

    `__pycache__` directories are left out: the python backend writes them into the repository when it
    imports a model.py, and they say nothing about what is served.
    """
    digest = hashlib.sha256()
    files = sorted(
        (path.relative_to(repository).as_posix(), path)
        for path in repository.rglob("*")
        if path.is_file() and "__pycache__" not in path.relative_to(repository).parts
    )
    for relative, path in files:
        name = relative.encode()
        digest.update(len(name).to_bytes(8, "little") + name)
        digest.update(path.stat().st_size.to_bytes(8, "little"))
        with open(path, "rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()


def _foreign(answer: Answer | None, state: ServerState) -> bool:
    return answer is not None and answer.server_id != state.server_id


def served_hash(spec: ServerSpec) -> str:
    """What a start serves: the model repository's files (Triton), the checkpoint and options (openai)."""
    return repository_hash(spec.model_repository) if spec.openai is None else openai_server.content_hash(spec.openai)


def check_identity(state: ServerState) -> tuple[bool, Answer | None]:
    """(True, None) when both the HTTP and gRPC ports answer with our id; (False, answer) when another server
    answers one of them; (False, None) while they do not answer (yet)."""
    if state.kind == "openai":
        answered, model = openai_server.model_id(state.host, state.ports["http"])
        answer = Answer("http", state.ports["http"], model) if answered else None
        expected = state.model_id or state.server_id
        return (True, None) if model == expected else (False, answer if model is not None else None)
    http = http_answer(state.host, state.ports["http"])
    if http is None or _foreign(http, state):
        return False, http
    grpc_port = state.ports.get("grpc")
    if grpc_port is None:
        return True, None
    answer = grpc_answer(state.host, grpc_port)
    if _foreign(answer, state):
        return False, answer
    return answer is not None, None


def identity_problem(state: ServerState) -> str | None:
    """Why the server answering on this state's ports is not the one it describes (None: it is)."""
    if not state.server_id:
        return "its state file records no server id"
    ours, answer = check_identity(state)
    if ours:
        return None
    if answer is None:
        return f"it does not answer server metadata on {state.host} (http port {state.ports['http']})"
    return f"{answer.protocol} port {answer.port} answers with {answer.describe()}, not {state.server_id!r}"


def adoption_differences(old: ServerState, spec: ServerSpec) -> list[str]:
    """Why the running server `old` cannot stand in for a start of `spec` (empty: it can be adopted).

    Adopted only when its command line (less the per-start --id), the model repository's contents and the
    GPUs it was given are the same, and it still answers with its own id.
    """
    differences = []
    argv, _ = build_command(spec)
    was, now = strip_server_id(old.argv), strip_server_id(argv)
    if spec.openai is not None:  # its per-start part is the served model link
        served = str(openai_server.served_path(spec.openai, old.server_id))
        was = [str(spec.openai.model) if a == served else a for a in was]
    if was != now:
        gone, added = [a for a in was if a not in now], [a for a in now if a not in was]
        differences.append(f"command line (was {gone}, now {added})" if gone or added else "command line order")
    if old.repository_hash != served_hash(spec):
        differences.append(f"model repository contents ({spec.model_repository})")
    if old.visible_devices != spec.visible_devices:
        differences.append(f"visible_devices (was {old.visible_devices!r}, now {spec.visible_devices!r})")
    problem = identity_problem(old)
    if problem:
        differences.append(f"server identity: {problem}")
    return differences
