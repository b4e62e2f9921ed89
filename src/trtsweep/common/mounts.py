"""What a container must have mounted to read the host paths it is given.

A Hugging Face hub-cache snapshot (`models--org--name/snapshots/<rev>/`) holds symlinks into the cache's
`blobs/`; an engine or tokenizer directory may be a link, or hold links, to elsewhere. Mounting only the
named directory at the same path leaves every such link dangling inside the container. `container_volumes` adds,
read-only, each directory a link under the named paths resolves into, until every link resolves inside
a mount; `repository_paths` names the absolute paths a Triton model repository's `config.pbtxt` files
point the server at (tokenizer, engine), which must be mounted as well.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from pathlib import Path

# `string_value: "/abs/path"` in a config.pbtxt parameter
_PBTXT_PATH = re.compile(r'string_value:\s*"(/[^"]*)"')


def inside(path: str, mounts: Iterable[str]) -> bool:
    """Whether `path` (absolute, normalised) is one of `mounts` or below one."""
    return any(path == m or path.startswith(m.rstrip("/") + "/") for m in mounts)


def _link_targets(root: str) -> list[str]:
    """The resolved targets of `root` itself (if a link) and of every link below it."""
    found = [os.path.realpath(root)] if os.path.islink(root) else []
    for directory, dirs, files in os.walk(root):
        found += [os.path.realpath(os.path.join(directory, n)) for n in [*dirs, *files]]
    return [t for t in found if os.path.exists(t)]


def closure(paths: Iterable[str | Path]) -> tuple[list[str], list[str]]:
    """(`paths` as given, without repeats; the extra directories their links need), in a stable order.

    A link to a file adds the file's directory (a hub-cache `blobs/`), a link to a directory adds that
    directory; an added directory is searched for links in turn.
    """
    given = list(dict.fromkeys(os.path.abspath(str(p)) for p in paths if str(p)))
    extra: list[str] = []
    todo = [p for p in given if os.path.exists(p)]
    while todo:
        for target in _link_targets(todo.pop(0)):
            if inside(target, [*given, *extra]):
                continue
            directory = target if os.path.isdir(target) else os.path.dirname(target)
            extra.append(directory)
            todo.append(directory)
    return given, extra


def container_volumes(paths: Iterable[str | Path]) -> list[str]:
    """`docker run` arguments mounting `paths` at the same place, plus read-only what their links need."""
    given, extra = closure(paths)
    return [
        *(arg for p in given for arg in ("-v", f"{p}:{p}")),
        *(arg for p in extra for arg in ("-v", f"{p}:{p}:ro")),
    ]


def repository_paths(model_repository: Path) -> list[str]:
    """Absolute paths in the string parameters of the repository's config.pbtxt files that exist here."""
    found: list[str] = []
    for config in sorted(Path(model_repository).glob("*/config.pbtxt")):
        for path in _PBTXT_PATH.findall(config.read_text(encoding="utf-8", errors="replace")):
            if os.path.exists(path):
                found.append(path)
    return list(dict.fromkeys(found))
