"""The report: results.csv/json, the verdict under the SLOs, report.html and the comparison of sweeps, read from the
fleet's point records (the report never writes them).

May import: trtsweep.errors, trtsweep.common, trtsweep.perf, trtsweep.sweep, trtsweep.fleet, trtsweep.search (a
search's account).
"""

from typing import Any


def __getattr__(name: str) -> Any:
    """Names of the old `trtsweep.report` module (now `trtsweep.report.writer`),
    for scripts written before the move."""
    from trtsweep._moved import forward

    return forward(__name__, "writer", name)
