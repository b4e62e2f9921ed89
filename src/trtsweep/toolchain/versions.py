"""What each TensorRT-LLM release's build tools accept, one table per tool and release.

Three tools make an engine: ``convert_checkpoint.py`` (one per model family, under the examples directory),
``examples/quantization/quantize.py`` (ModelOpt/AMMO post-training quantization) and ``trtllm-build``
(``tensorrt_llm/commands/build.py`` plus the plugin flags of ``tensorrt_llm/plugin/plugin.py``). Every command
trtsweep generates, and every ``extra_flags`` entry a user passes, is checked against the table of the
configured release before anything runs, so a flag the release does not know fails as one line instead of
as an argparse error half-way through a sweep. The commands themselves are derived from the tables (a
release with ``--max_seq_len`` gets it, one with ``--kv_cache_type`` gets that, a tool without
``--calib_dataset`` cannot take the user's calibration prompts).

The facts live in ``flags/<major>.<minor>.json``, one file per release, written down from the TensorRT-LLM
sources: per tool its accepted option strings (``false``: a switch; ``true``: takes one value; a list: one
of these values; ``{"nargs": ..., "choices": ...}``: argparse's ``nargs``, ``"+"`` one or more values, ``"?"`` an
optional value, N exactly N values, each one of ``choices`` unless that is null), the ``source`` it was read from
(repository@commit path), whether that source is ``pinned`` to the release (the tag commit, or the
release's own rendered argparse documentation) or only the closest copy that could be dated, and the
``evidence``. A tool whose file for a release could not be found names the release it is taken from
(``same_as``) and says why. Versions are compared by (major, minor): patch releases, ``.postN`` and ``rcN``
share their minor's table. Where a release must be the same one (a host's installed or declared TensorRT-LLM, an
image tag, the settings hash), versions are compared as PEP 440 versions (`same_release`): `1.2`, `1.2.0` and
`v1.2.0` are one release, while `1.2.0rc8` and `1.2.0.post1` are others (a release candidate's tools are not the
release's), though all of them look up the 1.2 table. The engine flow exists from 0.8 (first release where the
models build through ``trtllm-build``) to 1.2 (the last line that ships ``trtllm-build``; the TensorRT backend is
removed after 1.3.0rc20).
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from typing import Any

from packaging.utils import canonicalize_version

from trtsweep.errors import TrtsweepError

Version = tuple[int, int]
FIRST: Version = (0, 8)
LAST: Version = (1, 2)
RELEASES: tuple[Version, ...] = (*((0, minor) for minor in range(8, 22)), (1, 0), (1, 1), (1, 2))
FAMILIES = ("llama", "qwen")
TOOLS = ("trtllm-build", "convert_checkpoint.py", "quantize.py")


@dataclass(frozen=True)
class Flag:
    """One command-line option. ``takes_value``: it is followed by an argument (else it is a switch);
    ``choices``: the only arguments accepted (None: any); ``nargs``: argparse's nargs of the option, None for
    exactly one argument, ``"+"`` one or more, ``"?"`` zero or one, an int exactly that many."""

    takes_value: bool = True
    choices: tuple[str, ...] | None = None
    nargs: str | int | None = None

    @property
    def many(self) -> bool:
        """It takes one or more arguments."""
        return self.nargs == "+"


@dataclass(frozen=True)
class Table:
    """The flags one tool accepts in one release, and where that was read."""

    release: Version
    flags: Mapping[str, Flag]
    source: str
    pinned: bool


def _flag(spec: Any) -> Flag:
    if spec is False:
        return Flag(takes_value=False)
    if spec is True:
        return Flag()
    if isinstance(spec, list):
        return Flag(True, tuple(spec))
    choices = spec.get("choices")
    nargs = spec.get("nargs")
    if nargs not in (None, "+", "?") and not (isinstance(nargs, int) and not isinstance(nargs, bool) and nargs > 0):
        raise TrtsweepError(f"flag table: nargs {nargs!r} is not one of None, '+', '?' or a positive integer")
    return Flag(True, tuple(choices) if choices else None, nargs)


def _name(version: Version) -> str:
    return f"{version[0]}.{version[1]}"


@functools.cache
def _release(version: Version) -> dict[str, Any]:
    text = resources.files("trtsweep.toolchain").joinpath("flags", f"{_name(version)}.json").read_text("utf-8")
    return dict(json.loads(text)["tools"])


@functools.cache
def table(version: Version, tool: str) -> Table | None:
    """The table of ``tool`` (``trtllm-build``, ``convert_checkpoint.py:<family>``, ``quantize.py``) in the
    release, or None when the release has no such tool."""
    entry = _release(version).get(tool)
    if entry is None:
        return None
    if "same_as" in entry:
        other = table(parse(entry["same_as"]), tool)
        if other is None:
            raise TrtsweepError(f"flags/{_name(version)}.json: {tool} refers to {entry['same_as']}, which has none")
        return Table(version, other.flags, f"as in {entry['same_as']}: {entry['evidence']}", False)
    flags = {name: _flag(spec) for name, spec in entry["flags"].items()}
    return Table(version, flags, entry["source"] + ("" if entry["pinned"] else " (closest dated copy)"),
                 entry["pinned"])  # fmt: skip


VERSION_RE = re.compile(r"^v?(\d+)\.(\d+)(?:\.\d+)?(?:(?:\.post|rc|\.dev|a|b)\d*)*$")


def parse(version: str) -> Version:
    """'0.11.0', '0.17.0.post1', '1.2.0rc7' -> (major, minor); TrtsweepError outside the engine flow's range."""
    match = VERSION_RE.match(str(version).strip())
    if not match:
        raise TrtsweepError(f"trtllm_version {version!r}: expected a TensorRT-LLM release such as 0.11.0 or 1.2.0rc7")
    parsed = (int(match.group(1)), int(match.group(2)))
    if not FIRST <= parsed <= LAST:
        raise TrtsweepError(
            f"trtllm_version {version}: the engine flow (convert_checkpoint.py + trtllm-build) is supported for "
            f"{FIRST[0]}.{FIRST[1]} .. {LAST[0]}.{LAST[1]}"
        )
    return parsed


def canonical(version: str) -> str:
    """One spelling per release (PEP 440, trailing zeros dropped): '1.2', '1.2.0', 'v1.2.0' -> '1.2';
    '1.2.0rc8' -> '1.2rc8'. A string that is no PEP 440 version is returned stripped."""
    return canonicalize_version(version.strip())


def same_release(a: str, b: str) -> bool:
    """Whether two TensorRT-LLM versions name the same release ('1.2' == '1.2.0' == 'v1.2.0' != '1.2.0rc8')."""
    return canonical(a) == canonical(b)


def _get(version: Version, tool: str, what: str) -> Table:
    found = table(version, tool)
    if found is None:
        raise TrtsweepError(f"{what} does not exist in TensorRT-LLM {_name(version)}")
    return found


def build_table(version: Version) -> Table:
    return _get(version, "trtllm-build", "trtllm-build")


def convert_table(version: Version, family: str) -> Table:
    if family not in FAMILIES:
        raise TrtsweepError(f"model family {family!r}: expected one of {FAMILIES}")
    return _get(version, f"convert_checkpoint.py:{family}", f"examples/{family}/convert_checkpoint.py")


def quantize_table(version: Version) -> Table:
    return _get(version, "quantize.py", "examples/quantization/quantize.py")


def convert_script(version: Version, family: str) -> str:
    """The family's convert_checkpoint.py relative to the TensorRT-LLM checkout: ``examples/<family>/``
    up to 0.19, ``examples/models/core/<family>/`` from 0.20 (0.20 release notes, README paths)."""
    convert_table(version, family)
    base = "examples/models/core" if version >= (0, 20) else "examples"
    return f"{base}/{family}/convert_checkpoint.py"


def quantize_script(version: Version) -> str:
    """quantize.py relative to the TensorRT-LLM checkout (the same path in every release)."""
    quantize_table(version)
    return "examples/quantization/quantize.py"
