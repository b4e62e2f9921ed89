"""What each host writes for a run is named by the host (trtsweep.fleet.collect.host_file_name): hosts that share one
home directory (NFS homes: one trtsweep cache, one work directory) get a run folder and a lease each.

Fails on names by run only: two hosts with one work dir were handed one run folder (host spec, runner record,
journals) and one lease file."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from tests.conftest import ROOT
from trtsweep.fleet.collect import Collector, host_file_name

RUN = "20261127T000000Z-abcdef"
HOSTS = ("gpu-01", "gpu-02")


def plan(rounds: int = 1) -> dict[str, Any]:
    lanes = [{"name": f"{h}--lane0", "host": h, "ports": {}, "points": [f"p-{h}"]} for h in HOSTS]
    points = [{"id": f"p-{h}", "host": h} for h in HOSTS]
    return {"run_id": RUN, "sweep": "s", "points": points, "lanes": lanes, "search": {"round": rounds}}


def lease_file(host: str, work: str) -> str:
    """group_vars' trtsweep_run_lease_file, rendered for `host` as Ansible renders it (ansible imported here, never
    at collection: tests/conftest.py says why)."""
    from ansible.parsing.dataloader import DataLoader
    from ansible.plugins.loader import init_plugin_loader
    from ansible.template import Templar, trust_as_template

    init_plugin_loader()
    text = yaml.safe_load((ROOT / "group_vars" / "all" / "trtsweep.yml").read_text())["trtsweep_run_lease_file"]
    variables = {"trtsweep_work_dir": work, "trtsweep_run_id": RUN, "inventory_hostname": host}
    return str(Templar(loader=DataLoader(), variables=variables).template(trust_as_template(text)))


@pytest.mark.parametrize("rounds", [1, 2])
def test_two_hosts_with_one_work_dir_get_a_run_folder_each(tmp_path, rounds):
    settings = {"trtsweep_work_dir": str(tmp_path / "work")}
    folders = [Collector(tmp_path, plan(rounds), h).host_spec(settings, "lease")["journal_dir"] for h in HOSTS]
    run = RUN if rounds == 1 else f"r{rounds}-{RUN}"
    assert folders == [f"{tmp_path}/work/s/.runs/{run}-{h}" for h in HOSTS]


def test_two_hosts_with_one_work_dir_get_a_lease_each_named_as_their_run_folder():
    assert [lease_file(h, "/home/me/.cache/trtsweep/work") for h in HOSTS] == [
        f"/home/me/.cache/trtsweep/work/.leases/{RUN}-{h}.lease" for h in HOSTS
    ]
    for odd in ("fe80::1", "a b/c", "a_b_c"):
        assert lease_file(odd, "/w") == f"/w/.leases/{RUN}-{host_file_name(odd)}.lease"


def test_a_host_name_is_a_safe_file_name_and_two_names_stay_two():
    assert host_file_name("gpu-01.example.com") == "gpu-01.example.com"
    odd = host_file_name("../a b/c")
    assert "/" not in odd and " " not in odd and odd.startswith(".._a_b_c-")
    assert host_file_name("a/b") != host_file_name("a_b") == "a_b"
