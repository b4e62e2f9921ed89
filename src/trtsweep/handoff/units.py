"""The bundle's systemd unit (templates/unit.service.j2): the native server, its variables from
/etc/trtsweep/<name>.env."""

from __future__ import annotations

from typing import Any

from trtsweep.handoff.render import render
from trtsweep.handoff.server import Serving


def unit(point: dict[str, Any], s: Serving, name: str) -> str:
    needs = [*s.native_needs, *(["TRTSWEEP_BUNDLE"] if s.kind == "trtllm-serve" else [])]
    title = "Triton Inference Server" if s.kind == "triton" else "trtllm-serve"
    before = [list(s.native_prepare)] if s.native_prepare else []
    return service(title, name, point["id"], needs, s.native, before=before)


def service(title: str, name: str, point_id: str, needs: list[str], command: list[str], *,
            environment: dict[str, str] | None = None, before: list[list[str]] | None = None,
            after: list[str] | None = None, requires: list[str] | None = None, part_of: str | None = None,
            env: str | None = None) -> str:  # fmt: skip
    """A systemd unit running `command` (variables from /etc/trtsweep/<env, else name>.env): `before` its
    ExecStartPre commands, `after` / `requires` the units it starts after and needs, `part_of` the unit that stops
    and restarts it with itself."""
    return render("unit.service.j2", title=title, name=name, point_id=point_id, needs=needs, command=command,
                  environment=environment or {}, before=before or [], after=after or [], requires=requires or [],
                  part_of=part_of, env=env or name)  # fmt: skip
