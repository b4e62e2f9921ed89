"""The handoff: the best (or a chosen) point as a bundle ops can deploy: repository, scripts, units, manifests.

May import: trtsweep.errors, trtsweep.common, trtsweep.toolchain, trtsweep.serve, trtsweep.perf, trtsweep.sweep,
trtsweep.report.
"""

from typing import Any


def __getattr__(name: str) -> Any:
    """Names of the old `trtsweep.handoff` module (now `trtsweep.handoff.bundle`),
    for scripts written before the move."""
    from trtsweep._moved import forward

    return forward(__name__, "bundle", name)
