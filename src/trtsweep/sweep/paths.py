"""Where a sweep's relative paths start (prompts, conversations, trace, search.model_dirs): at the sweep file's own
directory, as in any config file, the same for `trtsweep plan FILE`, `ansible-playbook sweep.yml -e @FILE`
(action_plugins/trtsweep_sweep.py finds FILE among the extra vars) and `trtsweep handoff` (the run's plan.json keeps
the directory); `-e trtsweep_sweep_dir=DIR` names another. A sweep given inline (group_vars, an inventory, `-e`
JSON) has no file: its paths start at the checkout (`default_base_dir`)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml


def default_base_dir() -> Path:
    """Where relative paths start in a sweep given inline (no sweep file: group_vars, an inventory, `-e` JSON): the
    checkout holding sweep.yml (the playbook directory) when trtsweep runs from one, else the current directory.
    A sweep file's relative paths start at its own directory (`trtsweep plan FILE`, `-e @FILE`)."""
    root = Path(__file__).resolve().parents[3]
    return root if (root / "sweep.yml").is_file() else Path.cwd()


def sweep_path(value: str, base_dir: Path) -> Path:
    """A path of the sweep (prompts, conversations, trace): relative ones start at `base_dir`, the sweep file's
    directory."""
    path = Path(value).expanduser()
    return path if path.is_absolute() else base_dir / path


def sweep_file(extra_vars: Sequence[str], var: str, cwd: Path) -> Path | None:
    """The file of `-e @FILE` that gives `var` (the last `-e` that gives it wins, as in Ansible), or None where the
    last one is inline (`-e '{...}'`, `-e var=...`) or none gives it. `extra_vars`: ansible-playbook's `-e` values
    as typed (ansible.context.CLIARGS["extra_vars"]); a relative FILE starts at `cwd`."""
    found: Path | None = None
    for value in extra_vars:
        if value.startswith("@"):
            path = Path(value[1:]).expanduser()
            path = path if path.is_absolute() else cwd / path
            if var in _mapping(path.read_text(encoding="utf-8") if path.is_file() else ""):
                found = path.resolve()
        elif var in _mapping(value) or any(word.startswith(f"{var}=") for word in value.split()):
            found = None
    return found


def _mapping(text: str) -> dict[str, object]:
    try:
        value = yaml.safe_load(text)
    except yaml.YAMLError:
        return {}
    return value if isinstance(value, dict) else {}


def model_dirs(sweep: dict[str, Any], base_dir: Path) -> dict[str, str] | None:
    """The sweep's `search.model_dirs` (model name -> its checkpoint on the controller), relative ones from
    `base_dir`."""
    given = (sweep.get("search") or {}).get("model_dirs")
    return {name: str(sweep_path(path, base_dir)) for name, path in given.items()} if given else None
