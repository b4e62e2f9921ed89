"""The package's layers: every stage package says in its `__init__` docstring what it may import ("May import:
..."), and its modules import nothing else of trtsweep; no two modules import each other, directly or round a
cycle. Imports inside functions count: a lazy import is still a dependency."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import trtsweep

ROOT = Path(trtsweep.__file__).parent
# modules at the root that stages may use without declaring them, and the modules that may use every stage
BASE = {"trtsweep", "trtsweep.errors"}
TOP = {"trtsweep.cli"}


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
    """Every module of the package (the Triton python models under triton/templates are files it renders, not
    modules it imports)."""
    return {module_name(p): p for p in ROOT.rglob("*.py") if "templates" not in p.relative_to(ROOT).parts}


def imports(name: str, path: Path, known: set[str]) -> set[str]:
    """The trtsweep modules `name` imports (a `from pkg import sub` counts as the submodule when it is one)."""
    found: set[str] = set()
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.split(".")[0] == "trtsweep")
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join([*base, *([node.module] if node.module else [])])
            else:
                target = node.module or ""
            if target.split(".")[0] != "trtsweep":
                continue
            subs = {f"{target}.{a.name}" for a in node.names} & known
            found.update(subs or {target})
    return {m for m in found if m != name}


def declared(package: str) -> set[str] | None:
    """The packages `package`'s docstring says it may import, or None if it declares nothing."""
    init = ROOT.parent / package.replace(".", "/") / "__init__.py"
    doc = ast.get_docstring(ast.parse(init.read_text())) or "" if init.is_file() else ""
    for paragraph in doc.split("\n\n"):
        if paragraph.startswith("May import:"):
            text = " ".join(paragraph.removeprefix("May import:").split()).rstrip(".")
            return {item.strip().split(" ")[0] for item in text.split(",")}
    return None


def owner(name: str) -> str | None:
    """The nearest package above `name` that declares its imports (a subpackage may declare its own)."""
    parts = name.split(".")
    for end in range(len(parts), 1, -1):
        candidate = ".".join(parts[:end])
        if (ROOT.parent / candidate.replace(".", "/") / "__init__.py").is_file() and declared(candidate) is not None:
            return candidate
    return None


def stage(name: str) -> str:
    return ".".join(name.split(".")[:2])


def graph() -> dict[str, set[str]]:
    found = modules()
    return {name: imports(name, path, set(found)) for name, path in found.items()}


def test_every_stage_declares_what_it_may_import():
    stages = sorted({stage(m) for m in modules() if m.count(".") >= 2})
    assert stages, "no stage packages found"
    undeclared = [s for s in stages if declared(s) is None]
    assert not undeclared, f"packages without a 'May import:' paragraph in their __init__ docstring: {undeclared}"


def test_no_module_imports_a_layer_its_package_does_not_declare():
    wrong = []
    for name, deps in graph().items():
        if name in TOP or name in BASE:
            continue
        home = owner(name)
        assert home is not None, f"{name} is at the package root: put it in a stage package"
        allowed = declared(home) or set()
        for dep in sorted(deps):
            if dep in BASE or stage(dep) == stage(name) or any(dep == a or dep.startswith(a + ".") for a in allowed):
                continue
            wrong.append(f"{name} imports {dep} ({home} may import: {', '.join(sorted(allowed))})")
    assert not wrong, "imports outside the declared layers:\n" + "\n".join(wrong)


def test_there_is_no_import_cycle():
    edges = graph()
    cycles: list[list[str]] = []
    state: dict[str, int] = {}  # 1 on the path, 2 done
    path: list[str] = []

    def visit(node: str) -> None:
        state[node] = 1
        path.append(node)
        for dep in sorted(edges.get(node, ())):
            if dep == "trtsweep" or dep not in edges:
                continue
            if state.get(dep) == 1:
                cycles.append([*path[path.index(dep) :], dep])
            elif dep not in state:
                visit(dep)
        path.pop()
        state[node] = 2

    for node in sorted(edges):
        if node not in state:
            visit(node)
    assert not cycles, "import cycles:\n" + "\n".join(" -> ".join(c) for c in cycles)


def test_importing_the_package_hooks_no_import_and_module_paths_are_where_the_modules_are():
    """The CLI and llm-perf are the interfaces, not module paths: importing trtsweep adds no finder to the import
    system, a path from before the package was grouped by stage (trtsweep.planning) is not a module, and a stage
    package forwards no name of another module."""
    code = (
        "import importlib.util, sys\n"
        "finders = list(sys.meta_path)\n"
        "import trtsweep, trtsweep.fleet, trtsweep.handoff, trtsweep.report\n"
        "assert sys.meta_path == finders, sys.meta_path\n"
        "assert importlib.util.find_spec('trtsweep.planning') is None\n"
        "assert not any(hasattr(p, '__getattr__') for p in (trtsweep.fleet, trtsweep.handoff, trtsweep.report))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
