"""The report: results.csv/json, the verdict under the SLOs, report.html and the comparison of sweeps, read from the
fleet's point records (the report never writes them).

May import: trtsweep.errors, trtsweep.common, trtsweep.perf, trtsweep.sweep, trtsweep.fleet, trtsweep.search (a
search's account).
"""
