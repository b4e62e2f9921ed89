"""A sweep file is data: loaded with yaml.safe_load, never rendered as a template.

Sweep files travel between teams; `{{ lookup('pipe', ...) }}` in one must not run a command on whoever
plans it. `ansible-playbook sweep.yml -e @sweeps/x.yml` reads the values untemplated (the action plugin
action_plugins/trtsweep_sweep.py) and `trtsweep plan` reads them with `load`; both refuse a string that
holds Jinja markup, naming the field, unless templating was asked for (`-e trtsweep_sweep_templates=true`).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from trtsweep.errors import TrtsweepError

JINJA_MARKS = ("{{", "{%", "{#")
OPT_IN = "trtsweep_sweep_templates=true"


def _strings(value: Any, where: str) -> list[tuple[str, str]]:
    """(field path, string) of every string (keys included) in `value`."""
    if isinstance(value, str):
        return [(where, value)]
    if isinstance(value, dict):
        found = []
        for key, item in value.items():
            path = f"{where}.{key}" if where else str(key)
            found += [*_strings(key, path), *_strings(item, path)]
        return found
    if isinstance(value, list):
        return [s for i, item in enumerate(value) for s in _strings(item, f"{where}[{i}]")]
    return []


def refuse_templates(sweep: Any, source: str) -> None:
    """One line naming the first field that holds Jinja markup, if any."""
    for where, text in _strings(sweep, ""):
        if any(mark in text for mark in JINJA_MARKS):
            raise TrtsweepError(
                f"{source}: field {where or '(top)'} holds a Jinja template ({text[:60]!r}): sweep files are data and"
                f" are never rendered; to render them on purpose run the playbook with -e {OPT_IN} (see docs/trust.md)"
            )


def load(path: Path) -> Any:
    """The sweep (`trtsweep_sweep:` of the file, or the whole file) as data."""
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise TrtsweepError(f"{path}: cannot read sweep: {exc}") from exc
    sweep = data.get("trtsweep_sweep", data) if isinstance(data, dict) else data
    refuse_templates(sweep, str(path))
    return sweep


FIELD = re.compile(r"sweep field '([^']+)'")
STEP = re.compile(r"([^.\[\]]+)|\[(\d+)\]")


def line_of(path: Path, field: str) -> int | None:
    """The 1-based line of `field` ("benchmark.concurrency[0]") in the sweep file, or of the deepest part of it
    the file has (a misspelled key's mapping); None when the file cannot be read as YAML."""
    try:
        node = yaml.compose(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return None
    if isinstance(node, yaml.MappingNode):
        node = next((v for k, v in node.value if k.value == "trtsweep_sweep"), node)
    line = node.start_mark.line if node is not None else None
    for key, index in STEP.findall(field):
        if isinstance(node, yaml.MappingNode) and key:
            found = next(((k, v) for k, v in node.value if k.value == key), None)
            if found is None:
                break
            line, node = found[0].start_mark.line, found[1]
        elif isinstance(node, yaml.SequenceNode) and index and int(index) < len(node.value):
            node = node.value[int(index)]
            line = node.start_mark.line
        else:
            break
    return None if line is None else line + 1


def located(path: Path, error: TrtsweepError) -> TrtsweepError:
    """`error` prefixed with the sweep file and the line of the field it names ("sweeps/x.yml:12: sweep field ...")."""
    match = FIELD.search(str(error))
    line = line_of(path, match.group(1)) if match else None
    return TrtsweepError(f"{path}:{line}: {error}" if line else f"{path}: {error}")
