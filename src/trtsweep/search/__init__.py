"""The search over configurations (a sweep's `search:`): which configurations are measured, how long, in what
order, and what a predictor (AIConfigurator) expected of them.

May import: trtsweep.errors, trtsweep.common, trtsweep.perf (the capacity search), trtsweep.sweep (the SLO keys),
trtsweep.fleet (the point records a round's outcomes are read from).
"""
