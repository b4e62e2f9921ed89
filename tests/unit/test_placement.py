"""Placement: hosts that fit, balance, share groups, packed lanes with disjoint GPUs and ports."""

from __future__ import annotations

import pytest

from trtsweep.errors import TrtsweepError
from trtsweep.fleet.hostfacts import declared_gpus
from trtsweep.fleet.placement import host_from_facts, place
from trtsweep.sweep.planning import expand


def gpus(count, gpu="NVIDIA H100 80GB HBM3", memory_mb=81559):
    return [{"index": i, "name": gpu, "memory_mb": memory_mb, "used_mb": 0} for i in range(count)]


def host(name, count=0, busy=(), **kw):
    return host_from_facts(name, {"gpus": gpus(count, **kw), "busy_gpus": list(busy)})


def sweep(**over):
    base = {
        "name": "s",
        "backend": "tensorrtllm",
        "trtllm": {"version": "0.11.0", "family": "qwen"},
        "models": [{"repo_id": "Qwen/Qwen2-7B", "name": "q"}],
        "precisions": ["fp8", "int8_wo"],
        "parallelism": [{"tp": 1, "pp": 1}],
        "max_batch_sizes": [8, 16],
        "lengths": [{"input": 512, "output": 64}],
        "streaming": [True],
        "benchmark": {"input_data": "data/prompts.jsonl"},
    }
    return {**base, **over}


def test_exclusive_one_lane_per_host_with_every_gpu_and_balanced_work():
    plan = place(expand(sweep()), [host("a", 2), host("b", 2)])
    assert {ln["host"]: ln["gpus"] for ln in plan["lanes"]} == {"a": [0, 1], "b": [0, 1]}
    per_host = {h: [p["id"] for p in plan["points"] if p["host"] == h] for h in "ab"}
    assert sorted(len(v) for v in per_host.values()) == [2, 2]
    # points sharing a checkpoint (same precision) stay on one host
    for ids in per_host.values():
        assert len({i.split("_")[1] for i in ids}) == 1
    assert all(not p["colocated"] and p["ports"]["http"] == 8000 for p in plan["points"])


def test_pack_runs_points_side_by_side_on_disjoint_gpus_and_port_blocks():
    points = expand(sweep(precisions=["fp8", "int8_wo", "int4_awq", "fp16"], max_batch_sizes=[8]))
    plan = place(points, [host("a", 8)], mode="pack")
    lanes = plan["lanes"]
    assert len(lanes) == 4
    used = [g for ln in lanes for g in ln["gpus"]]
    assert len(used) == len(set(used)) == 4
    http = [ln["ports"]["http"] for ln in lanes]
    assert http == [8000, 8010, 8020, 8030]
    assert all(p["colocated"] for p in plan["points"])
    assert {p["visible_devices"] for p in plan["points"]} == {"0", "1", "2", "3"}


def declared(name, count):
    return host_from_facts(name, {"gpus": declared_gpus(count)})


def test_pack_spreads_points_sharing_a_checkpoint_over_every_gpu_of_the_fleet():
    # issue 23: 2 precisions x 40 batch sizes on ten 8-GPU hosts made 20 lanes (one per checkpoint and host)
    points = expand(sweep(max_batch_sizes=list(range(1, 41))))
    plan = place(points, [declared(f"gpu-{i:02d}", 8) for i in range(10)], mode="pack")
    lanes = plan["lanes"]
    assert len(lanes) == 80 and all(len(ln["points"]) == 1 for ln in lanes)
    assert sorted((ln["host"], ln["gpus"][0]) for ln in lanes) == [(f"gpu-{i:02d}", g) for i in range(10)
                                                                      for g in range(8)]  # fmt: skip
    assert sorted(ln["ports"]["http"] for ln in lanes if ln["host"] == "gpu-00") == list(range(8000, 8080, 10))
    # each host still prepares one checkpoint: its eight points share a precision
    for name in {ln["host"] for ln in lanes}:
        assert len({p["precision"] for p in plan["points"] if p["host"] == name}) == 1
    assert all(p["order"] == 0 and p["colocated"] for p in plan["points"])


def test_pack_spreads_a_small_grid_over_the_lanes_of_two_hosts():
    plan = place(expand(sweep(max_batch_sizes=[1, 2, 4, 8])), [declared("a", 4), declared("b", 4)], mode="pack")
    per_host = {h: sorted(ln["gpus"][0] for ln in plan["lanes"] if ln["host"] == h) for h in "ab"}
    assert per_host == {"a": [0, 1, 2, 3], "b": [0, 1, 2, 3]} and len(plan["lanes"]) == 8
    assert {h: len({p["precision"] for p in plan["points"] if p["host"] == h}) for h in "ab"} == {"a": 1, "b": 1}
    # more points than lanes: every lane takes one, the rest go to the lanes that finish first
    crowded = place(expand(sweep(max_batch_sizes=[1, 2, 4])), [declared("a", 4)], mode="pack")
    assert [len(ln["points"]) for ln in crowded["lanes"]] == [2, 2, 1, 1]


def test_pack_lanes_are_as_wide_as_the_widest_point():
    points = expand(sweep(parallelism=[{"tp": 2, "pp": 1}], precisions=["fp8", "int8_wo", "fp16"], max_batch_sizes=[8]))
    plan = place(points, [host("a", 4)], mode="pack")
    assert sorted(tuple(ln["gpus"]) for ln in plan["lanes"]) == [(0, 1), (2, 3)]


def test_longest_first_balances_weights():
    over = {"placement": {"weights": {"*fp8*": 5}}, "max_batch_sizes": [8]}
    points = expand(sweep(precisions=["fp8", "int8_wo", "fp16", "bf16"], **over))
    plan = place(points, [host("a", 1), host("b", 1)])
    load = {h: sum(p["weight"] for p in plan["points"] if p["host"] == h) for h in "ab"}
    assert sorted(load.values()) == [3.0, 5.0]  # fp8 (5) alone, the three others (1 each) together


def test_a_heavy_share_group_is_split_rather_than_unbalance_the_fleet():
    points = expand(sweep(precisions=["fp8"], max_batch_sizes=[1, 2, 4, 8]))
    plan = place(points, [host("a", 1), host("b", 1)])
    assert sorted(sum(p["host"] == h for p in plan["points"]) for h in "ab") == [2, 2]


def test_gpu_type_memory_and_busy_gpus_decide_where_a_point_fits():
    over = {"placement": {"gpu_type": "H100", "min_gpu_memory_gb": 70}, "precisions": ["fp8"], "max_batch_sizes": [8]}
    hosts = [host("small", 4, gpu="NVIDIA L4", memory_mb=23034), host("big", 2, busy=[0])]
    plan = place(expand(sweep(**over)), hosts)
    assert [(p["host"], p["gpus"]) for p in plan["points"]] == [("big", [1])]


def test_no_host_fits_names_the_points_and_what_hosts_offer():
    points = expand(sweep(parallelism=[{"tp": 4, "pp": 2}], precisions=["fp8"], max_batch_sizes=[8]))
    with pytest.raises(TrtsweepError) as err:
        place(points, [host("a", 4), host("cpu", 0)])
    text = str(err.value)
    assert "no host can take 1 point(s): q_fp8_tp4pp2_bs8_isl512osl64_stream (8 GPU(s))" in text
    assert "a: 4 usable GPU(s); cpu: 0 usable GPU(s)" in text and "\n" not in text


def test_cpu_points_go_to_gpu_less_hosts_too_and_get_no_gpus():
    points = expand(sweep(backend="hf", trtllm=None, precisions=["float32", "int8"], max_batch_sizes=[4]))
    plan = place(points, [host("cpu1"), host("cpu2")])
    assert sorted(p["host"] for p in plan["points"]) == ["cpu1", "cpu2"]
    assert all(p["gpus"] == [] and p["visible_devices"] == "" for p in plan["points"])


def test_empty_fleet_is_refused():
    with pytest.raises(TrtsweepError, match="trtsweep_hosts is empty"):
        place(expand(sweep()), [])


def test_an_exclusive_lane_gives_each_point_the_gpus_its_layout_needs_not_the_whole_host():
    """Exclusive means nothing else on the host, not every GPU to every server: a tp1 point's server sees GPU 0 alone
    (the lane's check compares the server's GPUs with these), a tp2 point GPUs 0 and 1; the lane keeps all eight."""
    from trtsweep.fleet import runplan

    points = expand(sweep(precisions=["fp8"], max_batch_sizes=[8], parallelism=[{"tp": 1, "pp": 1}, {"tp": 2, "pp": 1},
                                                                                {"tp": 2, "pp": 2}]))  # fmt: skip
    plan = place(points, [host("a", 8)])
    assert [ln["gpus"] for ln in plan["lanes"]] == [list(range(8))]
    own = {p["tp"] * p["pp"]: (p["gpus"], p["visible_devices"]) for p in plan["points"]}
    assert own == {1: ([0], "0"), 2: ([0, 1], "0,1"), 4: ([0, 1, 2, 3], "0,1,2,3")}
    text = runplan.plan_text({**plan, "kept": [], "collect": [], "left_out": [], "unplaced": []})
    rows = {line.split()[-1]: line.split()[2] for line in text.splitlines()[1:]}
    assert sorted(rows.values()) == ["0", "0,1", "0,1,2,3"]  # the plan shows each point's own GPUs


def test_a_point_moved_to_its_earlier_hosts_wider_lane_keeps_its_own_gpu_count():
    from trtsweep.fleet import runplan

    plan = place(expand(sweep(max_batch_sizes=[8])), [host("a", 1), host("b", 8)])
    assert sorted(ln["host"] for ln in plan["lanes"]) == ["a", "b"]  # a point on each
    point = next(p for p in plan["points"] if p["host"] == "a")  # an earlier run ran it on b
    assert runplan.on_earlier_hosts(plan, [{"point": point["id"], "run_id": "r", "host": "b"}])
    assert (point["host"], point["gpus"], point["visible_devices"]) == ("b", [0], "0")
