"""Placement: which host, which GPUs, which ports and in what order each sweep point runs.

Input: the points of `planning.expand` (each with `resources` {gpus, gpu_type, min_gpu_memory_gb} and a
`weight`, its expected work) and the hosts with their GPUs (discovered with nvidia-smi or declared in the
inventory). Output: every point gets a *lane*: one sequence of points on one host with a fixed GPU set and
a fixed Triton port block. A host runs its lanes side by side; the points of a lane one after the other.

* `exclusive` (default): one lane per host holding every usable GPU: one point at a time, clean numbers.
* `pack`: a host's usable GPUs are cut into lanes as wide as the largest point placed there, so an
  8-GPU host runs eight 1-GPU points at once (`CUDA_VISIBLE_DEVICES` per lane, ports base + k * stride).

A point is given the first GPUs of its lane that its layout needs (`resources.gpus`: tp x pp, or its disaggregated
workers' sum), never the whole lane: in an exclusive lane of eight GPUs a tp1 point's server sees GPU 0 alone
(nothing else runs on the host meanwhile), and the lane's check that the server holds exactly its GPUs compares
with those.

Hosts are chosen longest-processing-time first: groups of points that share a checkpoint (same model,
revision, precision, TP/PP) go, heaviest first, to the host that finishes them earliest; a group heavier
than an even share of the work is cut into pieces of at most that share, so sharing never unbalances the
fleet and a host still prepares as few checkpoints as it can. On a host, the points are dealt group by group
to the lane that finishes earliest: a checkpoint's points run side by side in every free lane (the first lane
makes the checkpoint, the others wait on its lock and reuse it; `build.artifacts`). A point that no host can
take fails the plan with the points and the reason named.

Ports of a disaggregated point (`point["disaggregated"]`): its proxy listens on the lane's http port and each of its
workers (context and generation instances) on a port of its own, `worker0`, `worker1`, ... in the lane's and the point's
`ports`. They come from the lane's own block, the ports from its http port up to the next lane's (http + stride):
the first ones there that no lane of the host takes for http, grpc or metrics. Every lane of a host that runs a
disaggregated point gets as many worker ports as the widest one placed there (a point moved between its lanes keeps
finding them); when a lane's block is too narrow, the host's stride grows by steps of 10 until each block holds them,
so no port is shared between lanes. A host without a disaggregated point keeps its ports as before.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

from trtsweep.common.gpu_arch import ARCH_NAMES, has_arch
from trtsweep.errors import TrtsweepError

PORT_ROLES = ("http", "grpc", "metrics")
DEFAULT_PORTS = {"http": 8000, "grpc": 8001, "metrics": 8002}
DEFAULT_PORT_STRIDE = 10


@dataclass(frozen=True)
class Gpu:
    index: int
    name: str
    memory_mb: int
    used_mb: int = 0


@dataclass
class Host:
    """A host as placement sees it: its usable GPUs and the first Triton port block."""

    name: str
    gpus: list[Gpu] = field(default_factory=list)
    ports: dict[str, int] = field(default_factory=lambda: dict(DEFAULT_PORTS))
    port_stride: int = DEFAULT_PORT_STRIDE
    busy_gpus: list[int] = field(default_factory=list)  # indices left out: memory already in use

    def fitting(self, resources: dict[str, Any]) -> list[Gpu]:
        """The GPUs of this host that a point with these resources may use."""
        gpu_type = (resources.get("gpu_type") or "").lower()
        min_mb = (resources.get("min_gpu_memory_gb") or 0) * 1024
        arch = resources.get("gpu_arch")
        return [g for g in self.gpus if gpu_type in g.name.lower() and g.memory_mb >= min_mb
                and (arch is None or has_arch(g.name, arch))]  # fmt: skip

    def fits(self, resources: dict[str, Any]) -> bool:
        return len(self.fitting(resources)) >= resources["gpus"]


@dataclass
class Lane:
    name: str  # the inventory name the run play uses for it: <host>--lane<k>
    host: str
    index: int
    gpus: list[int]
    ports: dict[str, int]
    points: list[str] = field(default_factory=list)
    load: float = 0.0


def host_from_facts(name: str, facts: dict[str, Any]) -> Host:
    """A Host from the `trtsweep_host_facts` module result (or the same shape written in an inventory).

    `facts`: {gpus: [{index, name, memory_mb, used_mb}], busy_gpus: [index...], ports: {http, grpc, metrics},
    port_stride: N}.
    """
    gpus = [Gpu(int(g["index"]), str(g["name"]), int(g["memory_mb"]), int(g.get("used_mb", 0))) for g in facts["gpus"]]
    busy = [int(i) for i in facts.get("busy_gpus", [])]
    ports = {role: int(facts.get("ports", DEFAULT_PORTS).get(role, DEFAULT_PORTS[role])) for role in PORT_ROLES}
    return Host(
        name=name,
        gpus=[g for g in gpus if g.index not in busy],
        ports=ports,
        port_stride=int(facts.get("port_stride", DEFAULT_PORT_STRIDE)),
        busy_gpus=busy,
    )


def _share_key(point: dict[str, Any]) -> str:
    """Points with the same key share a checkpoint (and cache): keep them together where it does not unbalance."""
    model = point["model"]
    kv = point.get("trtllm", {}).get("kv_cache_dtype")
    return json.dumps([model["repo_id"], model.get("revision"), point["precision"], point["tp"], point["pp"], kv])


def _describe(resources: dict[str, Any]) -> str:
    text = f"{resources['gpus']} GPU(s)"
    if resources.get("gpu_type"):
        text += f" of type {resources['gpu_type']}"
    if resources.get("min_gpu_memory_gb"):
        text += f" with >= {resources['min_gpu_memory_gb']} GiB"
    if resources.get("gpu_arch"):
        arch = resources["gpu_arch"]
        text += f" of architecture {arch} ({ARCH_NAMES[arch]}: its MoE backend's kernels)"
    return text


def check_fit(points: list[dict[str, Any]], hosts: list[Host]) -> None:
    homeless = [p for p in points if not any(h.fits(p["resources"]) for h in hosts)]
    if not homeless:
        return
    offer = "; ".join(f"{h.name}: {len(h.gpus)} usable GPU(s)" for h in hosts) or "no hosts"
    needs = ", ".join(f"{p['id']} ({_describe(p['resources'])})" for p in homeless[:5])
    more = f" and {len(homeless) - 5} more" if len(homeless) > 5 else ""
    raise TrtsweepError(f"no host can take {len(homeless)} point(s): {needs}{more}; hosts offer {offer}")


def _lane_width(points: list[dict[str, Any]]) -> int:
    return max((p["resources"]["gpus"] for p in points), default=0)


def _slots(host: Host, width: int, mode: str) -> int:
    """How many points of `width` GPUs the host runs at once."""
    if mode == "exclusive" or width == 0:
        return 1
    return max(1, len(host.gpus) // width)


def _weight(points: list[dict[str, Any]]) -> float:
    return sum(p["weight"] for p in points)


def _groups(points: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """Points by the checkpoint they share: heaviest group first (ties: first point), each heaviest point first."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for point in points:
        groups.setdefault(_share_key(point), []).append(point)
    ordered = sorted(groups.values(), key=lambda g: (-_weight(g), g[0]["id"]))
    return [sorted(g, key=lambda p: (-p["weight"], p["id"])) for g in ordered]


def _pieces(members: list[dict[str, Any]], share: float) -> list[list[dict[str, Any]]]:
    """A share group (heaviest point first) cut first-fit into pieces of at most `share` (a heavier point alone)."""
    pieces: list[list[dict[str, Any]]] = []
    for point in members:
        room = next((pc for pc in pieces if _weight(pc) + point["weight"] <= share), None)
        if room is None:
            pieces.append([point])
        else:
            room.append(point)
    return pieces


def _units(points: list[dict[str, Any]], hosts: list[Host]) -> list[list[dict[str, Any]]]:
    """What goes to one host: a share group, a piece of a heavy one, or a point that no host fits with its group."""
    total = _weight(points)
    units: list[list[dict[str, Any]]] = []
    for members in _groups(points):
        eligible = [h for h in hosts if all(h.fits(p["resources"]) for p in members)]
        if eligible:
            units.extend(_pieces(members, total / len(eligible)))
        else:  # each point finds its own host
            units.extend([p] for p in members)
    return sorted(units, key=lambda u: (-_weight(u), u[0]["id"]))


def _choose_hosts(points: list[dict[str, Any]], hosts: list[Host], mode: str) -> dict[str, list[dict[str, Any]]]:
    """Longest-processing-time first over share groups (or their pieces); returns host name -> its points."""
    load = {h.name: 0.0 for h in hosts}
    placed: dict[str, list[dict[str, Any]]] = {h.name: [] for h in hosts}
    for unit in _units(points, hosts):
        weight = _weight(unit)
        width = _lane_width(unit)

        def finish(h: Host, weight: float = weight, width: int = width) -> tuple[float, float, str]:
            return ((load[h.name] + weight) / _slots(h, width, mode), load[h.name], h.name)

        host = min((h for h in hosts if all(h.fits(p["resources"]) for p in unit)), key=finish)
        load[host.name] += weight
        placed[host.name].extend(unit)
    return placed


def worker_count(point: dict[str, Any]) -> int:
    """How many workers a disaggregated point starts (context and generation instances); 0 for any other."""
    shape = point.get("disaggregated")
    if not shape:
        return 0
    return sum(int(shape[role].get("instances") or 1) for role in ("context", "generation"))


def _worker_ports(host: Host, count: int, workers: int) -> tuple[int, list[list[int]]]:
    """(stride, each lane's worker ports): the first ports of each lane's block [http, http + stride) that no lane's
    http, grpc or metrics port takes, the stride grown by 10 until every block holds `workers` of them."""
    stride = host.port_stride
    while True:
        taken = {host.ports[role] + k * stride for role in PORT_ROLES for k in range(count)}
        blocks = [[port for port in range(host.ports["http"] + k * stride, host.ports["http"] + (k + 1) * stride)
                   if port not in taken][:workers] for k in range(count)]  # fmt: skip
        if all(len(block) == workers for block in blocks):
            return stride, blocks
        stride += 10


def _lanes(host: Host, points: list[dict[str, Any]], mode: str) -> list[Lane]:
    width = _lane_width(points)
    usable = [g.index for g in host.fitting({"gpus": width, **_strictest(points)})]
    count = _slots(host, width, mode) if width else 1
    count = min(count, max(1, len(usable) // width) if width else 1)
    workers = max((worker_count(p) for p in points), default=0)
    stride, worker_ports = _worker_ports(host, count, workers) if workers else (host.port_stride, [[]] * count)
    lanes = []
    for k in range(count):
        gpus = usable[k * width : (k + 1) * width] if mode == "pack" and width else usable if width else []
        ports = {role: host.ports[role] + k * stride for role in PORT_ROLES}
        ports.update({f"worker{i}": port for i, port in enumerate(worker_ports[k])})
        lanes.append(Lane(name=f"{host.name}--lane{k}", host=host.name, index=k, gpus=gpus, ports=ports))
    # group by group, each point to the lane that finishes earliest: a checkpoint's points spread over the free
    # lanes (the artifact lock makes the others wait for the one making it), and a lane's points share checkpoints
    for point in (p for members in _groups(points) for p in members):
        lane = min(lanes, key=lambda ln: (ln.load, ln.index))
        lane.points.append(point["id"])
        lane.load += point["weight"]
    return [ln for ln in lanes if ln.points]


def own_gpus(lane_gpus: list[int], point: dict[str, Any]) -> list[int]:
    """The GPUs of its lane a point's servers get: the first `resources.gpus` of them (all, where it does not say)."""
    needs = (point.get("resources") or {}).get("gpus")
    if isinstance(needs, int) and not isinstance(needs, bool) and needs >= 0:
        return list(lane_gpus[:needs])
    return list(lane_gpus)


def _strictest(points: list[dict[str, Any]]) -> dict[str, Any]:
    """The tightest GPU type / memory among points placed together (lanes are cut from GPUs fitting all)."""
    types = {p["resources"].get("gpu_type") for p in points} - {None}
    memory = max((p["resources"].get("min_gpu_memory_gb") or 0 for p in points), default=0)
    return {"gpu_type": next(iter(types)) if len(types) == 1 else None, "min_gpu_memory_gb": memory or None}


def place(points: list[dict[str, Any]], hosts: list[Host], mode: str = "exclusive") -> dict[str, Any]:
    """Place `points` on `hosts`; returns {points: [point + placement], lanes: [lane dicts]}.

    Each placed point gains: host, lane (inventory name), gpus (the indices of its own GPUs: the first its layout
    needs of its lane's), visible_devices ("0,1" or ""),
    ports {http, grpc, metrics, and worker0.. on a lane with a disaggregated point}, order (position in its lane),
    colocated (other lanes on its host).
    """
    if mode not in ("exclusive", "pack"):
        raise TrtsweepError(f"placement mode {mode!r}: expected exclusive or pack")
    if not hosts and points:
        raise TrtsweepError("no hosts to run the sweep on: the inventory group trtsweep_hosts is empty")
    check_fit(points, hosts)
    by_id = {p["id"]: p for p in points}
    lanes: list[Lane] = []
    placed_by_host = _choose_hosts(points, hosts, mode) if points else {}
    for host in hosts:
        if placed_by_host.get(host.name):
            lanes.extend(_lanes(host, placed_by_host[host.name], mode))
    lanes_per_host: dict[str, int] = {}
    for lane in lanes:
        lanes_per_host[lane.host] = lanes_per_host.get(lane.host, 0) + 1
    out = []
    for lane in lanes:
        for order, point_id in enumerate(lane.points):
            gpus = own_gpus(lane.gpus, by_id[point_id])
            out.append(
                {
                    **by_id[point_id],
                    "host": lane.host,
                    "lane": lane.name,
                    "gpus": gpus,
                    "visible_devices": ",".join(str(i) for i in gpus),
                    "ports": dict(lane.ports),
                    "order": order,
                    "colocated": lanes_per_host[lane.host] > 1,
                }
            )
    order = {p["id"]: i for i, p in enumerate(points)}
    out.sort(key=lambda p: order[p["id"]])
    return {"points": out, "lanes": [asdict(lane) for lane in lanes]}
