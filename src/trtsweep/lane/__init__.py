"""A lane on its host: the run's points of one lane, one after the other, every stage in one process.

The controller hands a host its lanes (`spec.HostSpec`, one JSON file) and starts `python -m trtsweep.lane` there
once; that process runs each lane in a child of its own and ends them when the run's lease lapses. A lane runs its
points stage after stage (`point.PointRun`: download -> quantize -> build -> repository -> serve -> benchmark,
the server always stopped, the results packed into one archive) and writes every stage it enters and every point
it ends as a line of its journal (`journal`), which the controller reads over the host's connection.

May import: trtsweep.errors, trtsweep.common, trtsweep.runtime, trtsweep.hub, trtsweep.toolchain, trtsweep.triton,
trtsweep.serve, trtsweep.perf, trtsweep.sweep.
"""
