"""Where a Slurm sweep ran, as the report says it: one line per job its points ran in (the points' records:
trtsweep.lane.step.step_record), with its partition, account, nodes and steps, the ids `squeue` and `sacct` show. A
sweep on SSH hosts has no such line."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def lines(records: Sequence[dict[str, Any]]) -> list[str]:
    """`Slurm allocation: job 12 (partition gpu, account ml) on 3 node(s) (n1, n2, n3): 6 point(s) in 6 step(s)
    (12.0-12.5)`, one per job, in the order the records name them."""
    jobs: dict[str, dict[str, Any]] = {}
    for record in records:
        slurm = record.get("slurm")
        if not isinstance(slurm, dict) or not slurm.get("job_id"):
            continue
        job = jobs.setdefault(str(slurm["job_id"]), {"nodes": {}, "steps": {}, "points": 0, "about": slurm})
        job["nodes"][str(slurm.get("node") or "?")] = None
        job["steps"][str(slurm.get("step_id"))] = None
        job["points"] += 1
    out = []
    for job_id, job in jobs.items():
        about = job["about"]
        where = ", ".join(f"{key} {about[key]}" for key in ("partition", "account") if about.get(key))
        nodes = list(job["nodes"])
        steps = sorted(job["steps"], key=lambda s: (not s.isdigit(), int(s) if s.isdigit() else 0, s))
        span = f"{job_id}.{steps[0]}" + (f"-{job_id}.{steps[-1]}" if len(steps) > 1 else "")
        out.append(f"Slurm allocation: job {job_id}{f' ({where})' if where else ''} on {len(nodes)} node(s) "
                   f"({', '.join(nodes)}): {job['points']} point(s) in {len(steps)} step(s) ({span})")  # fmt: skip
    return out
