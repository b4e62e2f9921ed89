"""The bundle's systemd unit (templates/unit.service.j2): the native server, its variables from
/etc/trtsweep/<name>.env."""

from __future__ import annotations

from typing import Any

from trtsweep.handoff.render import render
from trtsweep.handoff.server import Serving


def unit(point: dict[str, Any], s: Serving, name: str) -> str:
    needs = [*s.native_needs, *(["TRTSWEEP_BUNDLE"] if s.kind == "trtllm-serve" else [])]
    return render("unit.service.j2", kind=s.kind, name=name, point_id=point["id"], needs=needs, command=s.native)
