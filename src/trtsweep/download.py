"""Getting model weights onto a host: Hugging Face hub (or a mirror endpoint), a pre-seeded offline cache, a
local mirror directory, or ModelScope.

`resolve()` returns where the snapshot is and whether anything was fetched. The hub token is passed
through to the hub client only; it never appears in a result, a log line or an error message.
"""

from __future__ import annotations

import fnmatch
import os
import shutil
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trtsweep.errors import TrtsweepError

GIB = 1 << 30


@dataclass(frozen=True)
class Snapshot:
    path: str
    revision: str | None
    changed: bool
    source: str


def selected(name: str, allow: Iterable[str] | None, ignore: Iterable[str] | None) -> bool:
    """huggingface_hub's allow/ignore pattern semantics for one repo file name."""
    if allow and not any(fnmatch.fnmatch(name, p) for p in allow):
        return False
    return not (ignore and any(fnmatch.fnmatch(name, p) for p in ignore))


def check_free_space(target: Path, needed_bytes: int, margin: float = 1.1) -> None:
    """Fail, with the numbers, when `target`'s file system has less than needed x margin free."""
    probe = target
    while not probe.exists():
        probe = probe.parent
    free = shutil.disk_usage(probe).free
    if free < needed_bytes * margin:
        raise TrtsweepError(
            f"not enough disk space in {probe}: the download needs {needed_bytes / GIB:.1f} GiB "
            f"(+{(margin - 1) * 100:.0f}% margin), {free / GIB:.1f} GiB free"
        )


def _hub(
    repo_id: str, revision: str | None, cache_dir: str | None, offline: bool, endpoint: str | None,
    allow: list[str] | None, ignore: list[str] | None, token: str | None, check_mode: bool,
) -> Snapshot:  # fmt: skip
    from huggingface_hub import HfApi, snapshot_download
    from huggingface_hub.errors import HfHubHTTPError, LocalEntryNotFoundError

    kwargs: dict[str, Any] = {
        "repo_id": repo_id, "revision": revision, "cache_dir": cache_dir, "allow_patterns": allow,
        "ignore_patterns": ignore, "token": token or os.environ.get("HF_TOKEN") or False, "endpoint": endpoint,
    }  # fmt: skip
    try:
        path = snapshot_download(local_files_only=True, **kwargs)
        return Snapshot(path, Path(path).name, False, "hub-cache")
    except LocalEntryNotFoundError:
        if offline:
            raise TrtsweepError(
                f"{repo_id} (revision {revision or 'main'}) is not in the hub cache {cache_dir or '(default)'} "
                "and offline is set"
            ) from None
    try:
        info = HfApi(endpoint=endpoint, token=kwargs["token"]).model_info(repo_id, revision=revision,
                                                                           files_metadata=True)  # fmt: skip
        needed = sum(s.size or 0 for s in info.siblings or [] if selected(s.rfilename, allow, ignore))
        check_free_space(Path(cache_dir or Path.home() / ".cache" / "huggingface" / "hub"), needed)
        if check_mode:
            return Snapshot("", info.sha, True, "hub")
        path = snapshot_download(**kwargs)
    except HfHubHTTPError as exc:
        raise TrtsweepError(f"download of {repo_id} failed: {str(exc).splitlines()[0]}") from None
    except OSError as exc:
        raise TrtsweepError(f"download of {repo_id} failed: {exc.strerror or exc}") from None
    return Snapshot(path, Path(path).name, True, "hub")


def _mirror(repo_id: str, mirror_dir: str) -> Snapshot:
    path = Path(mirror_dir) / repo_id
    if not (path / "config.json").is_file():
        raise TrtsweepError(f"{repo_id} is not in the local mirror: {path}/config.json does not exist")
    return Snapshot(str(path), None, False, "mirror")


def _modelscope(repo_id: str, revision: str | None, cache_dir: str | None, check_mode: bool) -> Snapshot:
    try:
        from modelscope import snapshot_download  # type: ignore[import-not-found]
    except ImportError as exc:
        raise TrtsweepError("source modelscope needs the modelscope package on the host") from exc
    if check_mode:
        return Snapshot("", revision, True, "modelscope")
    path = snapshot_download(repo_id, revision=revision or "master", cache_dir=cache_dir)
    return Snapshot(str(path), revision, True, "modelscope")


def resolve(repo_id: str, *, revision: str | None = None, cache_dir: str | None = None, offline: bool = False,
            endpoint: str | None = None, allow: list[str] | None = None, ignore: list[str] | None = None,
            token: str | None = None, mirror_dir: str | None = None, source: str = "huggingface",
            check_mode: bool = False) -> Snapshot:  # fmt: skip
    """Where the model is (after fetching it if needed and allowed)."""
    if "/" not in repo_id:
        raise TrtsweepError(f"repo_id must be owner/name, got {repo_id!r}")
    if mirror_dir:
        return _mirror(repo_id, mirror_dir)
    if source == "modelscope":
        return _modelscope(repo_id, revision, cache_dir, check_mode)
    if source != "huggingface":
        raise TrtsweepError(f"source must be huggingface or modelscope, got {source!r}")
    return _hub(repo_id, revision, cache_dir, offline, endpoint, allow, ignore, token, check_mode)
