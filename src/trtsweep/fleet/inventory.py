"""The fleet as the inventory describes it, for `trtsweep plan -i` (no host is contacted).

Hosts of the group `trtsweep_hosts` (and its children), read with `ansible-inventory --list`; their GPUs are
the declared `trtsweep_gpus` (discovery happens only when the sweep runs), ports the host's
`trtsweep_triton_*_port` and `trtsweep_port_stride`. What the inventory declares that the sweep cannot run on is
each host's problem, as the run's preflight finds it (`hostfacts.version_problems`: a declared TensorRT-LLM
release, `trtsweep_trtllm_version`, or an image tag naming another release than the sweep's `trtllm.version`):
the plan fails the points only such hosts could take, naming why, before the first GPU minute.

So does a setting a YAML inventory gives a group (`vars:` of `trtsweep_hosts` or a child) that the checkout's own
`group_vars/all` overrides: by Ansible's default order a playbook's group_vars/all outranks an inventory file's
groups (`trtsweep_triton_runtime: native` there left every host on `local`); the checkout's ansible.cfg turns that
order around (`precedence`), so this finds something only where another configuration is in effect.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from trtsweep.errors import TrtsweepError
from trtsweep.fleet.hostfacts import container_images, declared_gpus, image_problem, version_problems
from trtsweep.fleet.placement import DEFAULT_PORT_STRIDE, DEFAULT_PORTS
from trtsweep.sweep.servers import servers_of

GROUP = "trtsweep_hosts"


def _ansible_inventory() -> str:
    sibling = Path(sys.executable).parent / "ansible-inventory"
    found = str(sibling) if sibling.exists() else shutil.which("ansible-inventory")
    if not found:
        raise TrtsweepError("ansible-inventory not found (install ansible-core)")
    return found


def read(inventory: str, export: bool = False) -> dict[str, Any]:
    """`ansible-inventory --list` (`export`: groups' own variables kept apart, as `--export` shows them)."""
    argv = [_ansible_inventory(), "-i", inventory, "--list", *(["--export"] if export else [])]
    proc = subprocess.run(argv, capture_output=True, text=True)
    if proc.returncode != 0:
        lines = [line for line in proc.stderr.splitlines() if line.strip()]
        raise TrtsweepError(f"inventory {inventory}: {lines[-1] if lines else 'ansible-inventory failed'}")
    return json.loads(proc.stdout)


def group_hosts(data: dict[str, Any], group: str = GROUP) -> list[str]:
    entry = data.get(group, {})
    hosts = list(entry.get("hosts", []))
    for child in entry.get("children", []):
        hosts += [h for h in group_hosts(data, child) if h not in hosts]
    return hosts


def _port(value: Any, default: int) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def planning_hosts(inventory: str, assumed_gpus: int | list[dict[str, Any]] | None = None,
                   sweep: dict[str, Any] | None = None) -> tuple[dict[str, dict[str, Any]], list[str]]:  # fmt: skip
    """(host name -> facts for placement, with the problems the inventory declares against `sweep`; notes on
    assumptions made)."""
    trtllm = (sweep or {}).get("trtllm") if isinstance((sweep or {}).get("trtllm"), dict) else {}
    servers = servers_of(sweep or {})
    data = read(inventory)
    hostvars = data.get("_meta", {}).get("hostvars", {})
    names = group_hosts(data)
    notes: list[str] = []
    if not names:
        slurm = ((read(inventory, export=True).get("all") or {}).get("vars") or {}).get("trtsweep_slurm")
        if slurm is None:
            raise TrtsweepError(f"inventory {inventory}: the group {GROUP} has no hosts (nor trtsweep_slurm: "
                                "docs/slurm.md)")  # fmt: skip
        names, hostvars, notes = slurm_nodes(slurm, hostvars, assumed_gpus)
    hosts = {}
    overridden = overridden_group_vars(inventory, hostvars)
    for name in names:
        v = hostvars.get(name, {})
        if v.get("trtsweep_slurm_gpus") is not None:  # a Slurm node's: the job's GPUs there
            gpus = declared_gpus(assumed_gpus if isinstance(assumed_gpus, list) else len(v["trtsweep_slurm_gpus"]))
            gpus = [{**g, "index": i} for g, i in zip(gpus, v["trtsweep_slurm_gpus"], strict=False)]
        elif v.get("trtsweep_gpus") is not None:
            gpus = declared_gpus(v["trtsweep_gpus"])
            notes.append(f"note: {name} declares trtsweep_gpus: there the run takes them as declared, and the check "
                         "that each server holds exactly its GPUs is off (they are not the driver's); for a preview "
                         "of hosts whose GPUs nvidia-smi finds, leave it out and give --gpus")  # fmt: skip
        else:
            gpus = declared_gpus(assumed_gpus or 0)
            typed = isinstance(assumed_gpus, list) and gpus
            assumed = f"{len(gpus)} x {gpus[0]['name']} ({gpus[0]['memory_mb'] / 1024:g} GiB)" if typed else len(gpus)
            notes.append(f"note: {name} declares no trtsweep_gpus; planned with {assumed} (--gpus N[:NAME[:GIB]])")
        hosts[name] = {
            "gpus": gpus,
            "busy_gpus": [],
            "ports": {r: _port(v.get(f"trtsweep_triton_{r}_port"), p) for r, p in DEFAULT_PORTS.items()},
            "port_stride": _port(v.get("trtsweep_port_stride"), DEFAULT_PORT_STRIDE),
            "problems": _declared_problems(v, trtllm or {}, servers) + overridden.get(name, []),
        }
    return hosts, notes


def slurm_nodes(value: Any, hostvars: dict[str, dict[str, Any]], assumed_gpus: int | list[dict[str, Any]] | None
                ) -> tuple[list[str], dict[str, dict[str, Any]], list[str]]:  # fmt: skip
    """(node names, their variables, notes) of the allocation `trtsweep_slurm` names: the job's nodes and GPUs
    (scontrol) for one that exists, `allocate`'s shape for the run's own (nodes named slurm-node-N until Slurm names
    them)."""
    from trtsweep.fleet import slurm

    given = slurm.settings(value)
    if "allocate" in given:
        request = slurm.Request.from_inventory(given["allocate"])
        count = len(declared_gpus(assumed_gpus)) if isinstance(assumed_gpus, list) else request.gpus_per_node
        nodes = [slurm.Node(f"slurm-node-{i + 1}", tuple(range(count))) for i in range(request.nodes)]
        note = (f"note: the hosts are the {request.nodes} node(s) the run allocates (trtsweep_slurm.allocate), "
                f"{count} GPU(s) each; Slurm names them when the run starts")  # fmt: skip
    else:
        found = slurm.describe(slurm.existing_job(given["job_id"]))
        nodes = list(found.nodes)
        note = f"note: the hosts are job {found.job_id}'s nodes ({found.state}), each with the job's GPUs there"
    variables = {n.name: {**hostvars.get(n.name, {}), "trtsweep_slurm_gpus": list(n.gpus)} for n in nodes}
    return [n.name for n in nodes], variables, [note]


def _declared_problems(hostvars: dict[str, Any], trtllm: dict[str, Any], servers: list[str]) -> list[str]:
    """The run's preflight checks on what the host's variables declare (hostfacts: the image the sweep's servers
    need in the container runtime, the TensorRT-LLM release and the images' tags)."""
    runtime = str(hostvars.get("trtsweep_triton_runtime", "local"))
    image = hostvars.get("trtsweep_triton_container_image") or None
    trtllm_image = trtllm.get("container_image") or None
    problem = image_problem(runtime, servers, image, trtllm_image)
    if runtime == "pyxis" and hostvars.get("trtsweep_slurm_gpus") is None:
        problem = "runtime pyxis: not a node of the run's Slurm allocation (trtsweep_slurm: docs/slurm.md)"
    declared, wanted = hostvars.get("trtsweep_trtllm_version"), trtllm.get("version")
    return ([problem] if problem else []) + version_problems(
        str(wanted) if wanted else None, str(declared) if declared else None,
        container_images(runtime, image, trtllm_image),
    )  # fmt: skip


def overridden_group_vars(inventory: str, hostvars: dict[str, dict[str, Any]]) -> dict[str, list[str]]:
    """Host -> one line per group variable of a YAML inventory file that the host does not get (a higher-precedence
    group_vars/all of the checkout set it otherwise); {} for another kind of inventory."""
    try:
        raw = yaml.safe_load(Path(inventory).read_text())
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return {}
    found: dict[str, list[str]] = {}

    def walk(group: str, node: Any) -> list[str]:
        """The hosts of `group` (its children's too), noting each of its variables a host lost."""
        node = node if isinstance(node, dict) else {}
        members = [h for h in (node.get("hosts") or {}) if isinstance(h, str)]
        for child, sub in (node.get("children") or {}).items():
            members += walk(str(child), sub)
        for var, value in (node.get("vars") or {}).items():
            if isinstance(value, str) and "{{" in value:
                continue  # a template: its value is Ansible's to make
            for host in members:
                got = hostvars.get(host, {}).get(var, value)
                if got != value:
                    found.setdefault(host, []).append(
                        f"the inventory sets {var}: {value!r} for group {group}, but {host} gets {got!r}: the "
                        "checkout's group_vars/all outranks an inventory file's group variables (Ansible's default "
                        "order; the checkout's ansible.cfg, not in effect here, turns it around): set it on each host"
                    )
        return members

    if isinstance(raw, dict):
        for group, node in raw.items():
            walk(str(group), node)
    return found
