"""The bundle's README.md, for operations (templates/README.md.j2): what was measured, the artifacts, four ways to
run it, the smoke test and what to watch."""

from __future__ import annotations

from typing import Any

from trtsweep.handoff.paths import STORE
from trtsweep.handoff.render import render
from trtsweep.handoff.server import CONFIG_DIR, OPTIONS_FILE, Serving
from trtsweep.handoff.smoke import SMOKE_REQUESTS


def readme(manifest: dict[str, Any], s: Serving) -> str:
    return render(
        "README.md.j2", m=manifest, p=manifest["point"], s=s, store=STORE,
        options_in_container=f"{CONFIG_DIR}/{OPTIONS_FILE}", requests=SMOKE_REQUESTS,
    )  # fmt: skip
