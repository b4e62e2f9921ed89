"""The fleet: hosts and their facts, placement into lanes, the run's plan, bootstrap, the run lock, the heartbeat,
point records and resume.

May import: trtsweep.errors, trtsweep.common, trtsweep.runtime, trtsweep.hub, trtsweep.toolchain, trtsweep.sweep,
trtsweep.lane (the journal a host's lanes write), trtsweep.search (a search's round is the plan's points).
"""
