"""Placement's ports for disaggregated points: the proxy on the lane's http port, one port per worker from the lane's
own block, none shared with another lane of the host (the stride grows when a block is too narrow); a sweep without a
disaggregated point keeps its ports."""

from __future__ import annotations

from trtsweep.fleet.placement import host_from_facts, place


def _host(name: str, count: int, **facts):
    gpus = [{"index": i, "name": "NVIDIA H100", "memory_mb": 81559, "used_mb": 0} for i in range(count)]
    return host_from_facts(name, {"gpus": gpus, "busy_gpus": [], **facts})


def _point(pid: str, gpus: int, ctx: int = 0, gen: int = 0) -> dict:
    point = {"id": pid, "model": {"repo_id": "m"}, "precision": "fp8", "tp": 1, "pp": 1, "weight": 1.0,
             "resources": {"gpus": gpus}}  # fmt: skip
    if ctx:
        point["disaggregated"] = {"name": pid, "context": {"tp": 1, "pp": 1, "instances": ctx},
                                  "generation": {"tp": 1, "pp": 1, "instances": gen}, "transceiver": {}}  # fmt: skip
    return point


def _all_ports(plan: dict) -> list[int]:
    return [port for lane in plan["lanes"] for port in lane["ports"].values()]


def test_packed_disaggregated_points_get_worker_ports_of_their_lane_none_shared():
    points = [_point("d1", 3, ctx=1, gen=2), _point("d2", 3, ctx=1, gen=2), _point("agg", 3)]
    plan = place(points, [_host("a", 6)], mode="pack")
    lanes = plan["lanes"]
    assert [ln["ports"] for ln in lanes] == [
        {"http": 8000, "grpc": 8001, "metrics": 8002, "worker0": 8003, "worker1": 8004, "worker2": 8005},
        {"http": 8010, "grpc": 8011, "metrics": 8012, "worker0": 8013, "worker1": 8014, "worker2": 8015},
    ]
    ports = _all_ports(plan)
    assert len(ports) == len(set(ports))
    by_id = {p["id"]: p for p in plan["points"]}
    assert by_id["d1"]["ports"] == next(ln["ports"] for ln in lanes if ln["name"] == by_id["d1"]["lane"])


def test_a_block_too_narrow_for_the_workers_widens_the_hosts_stride():
    points = [_point("d1", 8, ctx=4, gen=4), _point("d2", 8, ctx=4, gen=4)]
    plan = place(points, [_host("a", 16)], mode="pack")
    http = sorted(ln["ports"]["http"] for ln in plan["lanes"])
    assert http == [8000, 8020]
    ports = _all_ports(plan)
    assert len(ports) == len(set(ports)) == 2 * 11
    for lane in plan["lanes"]:
        workers = [port for role, port in lane["ports"].items() if role.startswith("worker")]
        assert len(workers) == 8 and all(lane["ports"]["http"] < p < lane["ports"]["http"] + 20 for p in workers)


def test_grpc_and_metrics_elsewhere_leave_the_http_block_to_the_workers():
    facts = {"ports": {"http": 9000, "grpc": 9500, "metrics": 9600}, "port_stride": 4}
    plan = place([_point("d", 2, ctx=1, gen=1)], [_host("a", 2, **facts)])
    assert plan["lanes"][0]["ports"] == {"http": 9000, "grpc": 9500, "metrics": 9600, "worker0": 9001,
                                         "worker1": 9002}  # fmt: skip


def test_without_a_disaggregated_point_the_ports_are_as_before():
    plan = place([_point("a1", 1), _point("a2", 1)], [_host("a", 2)], mode="pack")
    assert sorted(tuple(ln["ports"].items()) for ln in plan["lanes"]) == [
        (("http", 8000), ("grpc", 8001), ("metrics", 8002)),
        (("http", 8010), ("grpc", 8011), ("metrics", 8012)),
    ]
