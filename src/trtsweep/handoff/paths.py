"""Host paths in the bundle: the served repository with its host paths as ${TRTSWEEP_*} variables, the model
store's layout in the container and the pod, and the sentinels that stand for a variable in a command line."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from trtsweep.errors import TrtsweepError

# repository parameter -> the variable that replaces its host path (model: the checkpoint of the pytorch flow)
VARIABLES = {
    "engine_dir": "TRTSWEEP_ENGINE_DIR", "tokenizer_dir": "TRTSWEEP_TOKENIZER_DIR", "model": "TRTSWEEP_MODEL_DIR",
}  # fmt: skip
REPOSITORY_VARIABLE = "TRTSWEEP_MODEL_REPOSITORY"
DRAFT_VARIABLE = "TRTSWEEP_DRAFT_DIR"  # a speculative point's draft model (its directory in the LLM API options)
STORE = "/models"  # the model store inside the container and the Kubernetes pod
STORE_LAYOUT = {
    REPOSITORY_VARIABLE: f"{STORE}/triton_repo",
    "TRTSWEEP_ENGINE_DIR": f"{STORE}/engine",
    "TRTSWEEP_TOKENIZER_DIR": f"{STORE}/tokenizer",
    "TRTSWEEP_MODEL_DIR": f"{STORE}/model",
    DRAFT_VARIABLE: f"{STORE}/draft",
}
_SENTINEL = re.compile(r"/@(TRTSWEEP_[A-Z_]+)@")


def sentinel(variable: str) -> str:
    """What stands for `variable` in a command line until `expand` makes it a reference (a path, as shlex sees it)."""
    return f"/@{variable}@"


def expand(text: str, quoted: bool = False) -> str:
    """`text` with its sentinels as references: ${VARIABLE} (systemd), or "${VARIABLE}" for a shell."""
    return _SENTINEL.sub(r'"${\1}"' if quoted else r"${\1}", text)


def templated(text: str, paths: dict[str, str]) -> str:
    """`text` with every host path of `paths` (variable -> path) replaced by ${variable}, longest path first."""
    for variable, path in sorted(paths.items(), key=lambda item: -len(item[1])):
        text = text.replace(path, "${" + variable + "}")
    return text


def repository(point_dir: Path, repo: dict[str, Any], triton: bool,
               draft_dir: str | None = None) -> tuple[dict[str, str], dict[str, str]]:  # fmt: skip
    """(relative path -> templated text of the served Triton repository, variable -> the host path it replaced);
    `draft_dir`: a speculative point's draft model directory on the benchmark host (DRAFT_VARIABLE)."""
    params = repo.get("params") or {}
    paths = {
        var: str(params[key]) for key, var in VARIABLES.items() if isinstance(params.get(key), str) and params[key]
    }
    if draft_dir:
        paths[DRAFT_VARIABLE] = draft_dir
    if paths.get("TRTSWEEP_TOKENIZER_DIR") == paths.get("TRTSWEEP_ENGINE_DIR"):  # hf backend: one model directory
        paths.pop("TRTSWEEP_TOKENIZER_DIR", None)
    if not triton:  # trtllm-serve: no repository, the checkpoint only
        return {}, paths
    served = point_dir / "triton_repo"
    if not served.is_dir():
        raise TrtsweepError(f"{served}: missing (the point's results have no model repository; rerun the point)")
    paths[REPOSITORY_VARIABLE] = repo["repository"]
    files = {}
    for path in sorted(p for p in served.rglob("*") if p.is_file() and "__pycache__" not in p.parts):
        files[str(path.relative_to(served))] = templated(path.read_text(encoding="utf-8"), paths)
    return files, paths
