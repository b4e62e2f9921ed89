"""Every module's DOCUMENTATION / EXAMPLES / RETURN is valid for ansible-doc, and documents every option."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
MODULES = sorted((ROOT / "library").glob("*.py"))


def _doc(path: Path, name: str) -> str:
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Assign) and node.targets[0].id == name:  # type: ignore[attr-defined]
            return node.value.value  # type: ignore[attr-defined]
    raise AssertionError(f"{path.name} has no {name}")


@pytest.mark.parametrize("path", MODULES, ids=lambda p: p.stem)
def test_module_documentation(path):
    doc = yaml.safe_load(_doc(path, "DOCUMENTATION"))
    assert doc["module"] == path.stem and doc["short_description"] and doc.get("description")
    assert all(isinstance(line, str) for line in doc["description"])
    for name, option in doc.get("options", {}).items():
        assert option.get("description"), f"option {name} has no description"
    yaml.safe_load(_doc(path, "EXAMPLES"))
    for name, value in (yaml.safe_load(_doc(path, "RETURN")) or {}).items():
        assert value.get("description"), f"return value {name} has no description"
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    proc = subprocess.run([str(Path(sys.executable).parent / "ansible-doc"), "-M", str(ROOT / "library"), path.stem],
                          capture_output=True, text=True, cwd=ROOT, env=env, check=False)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
