"""The report's line of the Slurm allocation a sweep ran in (trtsweep.report.allocation), from the points' records."""

from __future__ import annotations

from trtsweep.report import allocation


def record(point: str, node: str, step: str, job: str = "12") -> dict:
    return {"point": point, "slurm": {"job_id": job, "step_id": step, "node": node, "partition": "gpu",
                                      "account": None}}  # fmt: skip


def test_one_line_per_job_with_its_name_partition_nodes_and_steps():
    records = [record("a", "n1", "0"), record("b", "n2", "1"), record("c", "n1", "10"), record("d", "n1", "2", "13"),
               {"point": "e"}, {"point": "f", "slurm": None}]  # fmt: skip
    assert allocation.lines(records) == [
        "Slurm allocation: job 12 (partition gpu) on 2 node(s) (n1, n2): 3 point(s) in 3 step(s) (12.0-12.10)",
        "Slurm allocation: job 13 (partition gpu) on 1 node(s) (n1): 1 point(s) in 1 step(s) (13.2)",
    ]
    assert allocation.lines([{"point": "a", "host": "h"}]) == []  # SSH hosts: no such line
