"""The bundle's text files from templates/: Jinja2 templates (*.j2) rendered with StrictUndefined (a missing value
is an error, never an empty string in a file), and files shipped as they are.

Filters: `shell` (an argv as one shell command line, every argument quoted with shlex.quote, one option per line,
sentinels as "${TRTSWEEP_*}"), `quote` (shlex.quote), `variables` (sentinels as ${TRTSWEEP_*}, for systemd) and
`number` (a measurement, "-" when there is none)."""

from __future__ import annotations

import functools
import shlex
from importlib import resources
from typing import Any

import jinja2

from trtsweep.handoff.paths import expand


def shell(argv: list[str]) -> str:
    """A shell command line, one option (with its value) per line, every argument quoted; the ${TRTSWEEP_*}
    sentinels are left for the shell to expand."""
    words = [shlex.quote(a) for a in argv]
    line = words[0] + "".join((" \\\n  " if w.startswith("-") or w == ":" else " ") + w for w in words[1:])
    return expand(line, quoted=True)


def number(value: Any) -> str:
    return "-" if value is None else f"{value:.1f}" if isinstance(value, float) else str(value)


@functools.cache
def environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("trtsweep.handoff", "templates"),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
        autoescape=False,  # shell, systemd and Markdown text
    )
    env.filters.update(shell=shell, quote=shlex.quote, variables=expand, number=number)
    return env


def render(template: str, **context: Any) -> str:
    return environment().get_template(template).render(**context)


def shipped(name: str) -> str:
    """A file of templates/ that goes into the bundle as it is."""
    return (resources.files("trtsweep.handoff") / "templates" / name).read_text(encoding="utf-8")
