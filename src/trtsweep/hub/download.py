"""Getting model weights onto a host: Hugging Face hub (or a mirror endpoint), a pre-seeded offline cache, a
local mirror directory, or ModelScope.

`resolve()` returns where the snapshot is and whether anything was fetched. The hub token is passed
through to the hub client only; it never appears in a result, a log line or an error message.

A revision that is not a commit (a branch or tag; none means `main`) is resolved to the commit it names on the hub
now (one `model_info` call), not to the one the cache saw last, so a moved branch is downloaded; offline, or when the
hub cannot be reached, the cache's ref decides (as huggingface_hub does). `current_commit()` only says which commit
that is, downloading nothing (the prepare play's check that lets resume rerun a point whose branch moved).
"""

from __future__ import annotations

import fnmatch
import os
import re
import shutil
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trtsweep.common.fileio import atomic_write_text
from trtsweep.errors import TrtsweepError

GIB = 1 << 30
COMMIT = re.compile(r"[0-9a-f]{40}")


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


def is_commit(revision: str | None) -> bool:
    """A full commit hash names one snapshot for good; a branch or tag (None: main) can move."""
    return revision is not None and COMMIT.fullmatch(revision) is not None


def ref_key(repo_id: str, revision: str | None) -> str:
    """How a model revision is named in the hosts' resolved commits: `owner/name@revision` (None: main)."""
    return f"{repo_id}@{revision or 'main'}"


def _token(token: str | None) -> str | bool:
    return token or os.environ.get("HF_TOKEN") or False


def _entry(cache_dir: str | None, repo_id: str) -> Path:
    """The repo's directory in the hub cache (huggingface_hub's layout: models--owner--name)."""
    from huggingface_hub.constants import HF_HUB_CACHE

    return Path(cache_dir or HF_HUB_CACHE) / ("models--" + repo_id.replace("/", "--"))


def _cached_commit(cache_dir: str | None, repo_id: str, revision: str | None) -> str | None:
    """The commit a revision names in the hub cache (its refs/ file), None when the cache has no such ref."""
    if is_commit(revision):
        return revision
    try:
        commit = (_entry(cache_dir, repo_id) / "refs" / (revision or "main")).read_text().strip()
    except OSError:
        return None
    return commit if is_commit(commit) else None


def _unreachable() -> tuple[type[BaseException], ...]:
    """What the hub client raises when the hub cannot be reached: offline mode, and the transport errors of httpx
    (huggingface_hub 1.x) or requests (before)."""
    from huggingface_hub.utils import OfflineModeIsEnabled

    errors: list[type[BaseException]] = [OfflineModeIsEnabled]
    try:
        import httpx

        errors.append(httpx.TransportError)
    except ImportError:
        pass
    try:
        import requests

        errors += [requests.ConnectionError, requests.Timeout]
    except ImportError:
        pass
    return tuple(errors)


def _hub_commit(repo_id: str, revision: str | None, endpoint: str | None, token: str | bool) -> str | None:
    """The commit a branch or tag names on the hub now; None when the hub cannot be reached."""
    from huggingface_hub import HfApi

    try:
        return HfApi(endpoint=endpoint, token=token).model_info(repo_id, revision=revision).sha
    except _unreachable():
        return None


def current_commit(
    repo_id: str, *, revision: str | None = None, cache_dir: str | None = None, offline: bool = False,
    endpoint: str | None = None, token: str | None = None,
) -> str | None:  # fmt: skip
    """The commit a revision names now, downloading nothing: a commit itself; else the hub's answer, or, offline or
    when the hub does not answer, the cache's ref; None when neither knows."""
    from huggingface_hub.errors import HfHubHTTPError

    if is_commit(revision):
        return revision
    if not offline:
        try:
            commit = _hub_commit(repo_id, revision, endpoint, _token(token))
        except HfHubHTTPError:
            commit = None  # private, gated, missing or a hub error: the download will say which
        if commit:
            return commit
    return _cached_commit(cache_dir, repo_id, revision)


def _point_ref(cache_dir: str | None, repo_id: str, revision: str | None, commit: str) -> None:
    """Make the cache's ref name the commit the hub named (as snapshot_download does), so an offline run later
    resolves the branch as this run did."""
    if _cached_commit(cache_dir, repo_id, revision) != commit:
        ref = _entry(cache_dir, repo_id) / "refs" / (revision or "main")
        ref.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(ref, commit)


def _hub(
    repo_id: str, revision: str | None, cache_dir: str | None, offline: bool, endpoint: str | None,
    allow: list[str] | None, ignore: list[str] | None, token: str | None, check_mode: bool,
) -> Snapshot:  # fmt: skip
    from huggingface_hub import HfApi, snapshot_download
    from huggingface_hub.errors import HfHubHTTPError, LocalEntryNotFoundError

    kwargs: dict[str, Any] = {
        "repo_id": repo_id, "revision": revision, "cache_dir": cache_dir, "allow_patterns": allow,
        "ignore_patterns": ignore, "token": _token(token), "endpoint": endpoint,
    }  # fmt: skip
    wanted = revision
    try:
        if not offline and not is_commit(revision):  # a branch or tag: the commit it names now (None: no answer)
            wanted = _hub_commit(repo_id, revision, endpoint, kwargs["token"]) or revision
        path = snapshot_download(local_files_only=True, **{**kwargs, "revision": wanted})
        if wanted != revision:
            _point_ref(cache_dir, repo_id, revision, wanted)
        return Snapshot(path, Path(path).name, False, "hub-cache")
    except HfHubHTTPError as exc:
        raise TrtsweepError(f"download of {repo_id} failed: {str(exc).splitlines()[0]}") from None
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
    except _unreachable() as exc:
        raise TrtsweepError(f"download of {repo_id} failed: the hub did not answer ({type(exc).__name__})") from None
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
