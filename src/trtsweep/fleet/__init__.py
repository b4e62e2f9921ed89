"""The fleet: hosts and their facts, placement into lanes, the run's plan, bootstrap, the run lock, the heartbeat,
point records and resume.

May import: trtsweep.errors, trtsweep.common, trtsweep.hub, trtsweep.toolchain, trtsweep.sweep, trtsweep.lane (the
journal a host's lanes write), trtsweep.search (a search's round is the plan's points).
"""

from typing import Any


def __getattr__(name: str) -> Any:
    """Names of the old `trtsweep.fleet` module (now `trtsweep.fleet.runplan`),
    for scripts written before the move."""
    from trtsweep._moved import forward

    return forward(__name__, "runplan", name)
