"""The sweep and its plan: the sweep file read as data, its matrix expanded into points, flows, SLOs, prompt checks.

May import: trtsweep.errors, trtsweep.common, trtsweep.toolchain, trtsweep.triton, trtsweep.perf.
"""
