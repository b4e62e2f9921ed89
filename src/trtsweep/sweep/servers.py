"""Which servers a sweep's points use, read from its flows without planning it: for the hosts' preflight (the prepare
play) and `trtsweep plan -i`, which ask for Triton's binary or image only where Triton serves."""

from __future__ import annotations

from typing import Any


def servers_of(sweep: dict[str, Any]) -> list[str]:
    """Triton for the engine flow, the pytorch flow's `servers` (default triton)."""
    flows = sweep.get("flow") or "engine"
    flows = [flows] if isinstance(flows, str) else list(flows)
    servers = ["triton"] if "engine" in flows else []
    if "pytorch" in flows:
        servers += [s for s in (sweep.get("servers") or ["triton"]) if s not in servers]
    return servers or ["triton"]
