# Copyright: trtsweep contributors
# Apache-2.0
"""Jinja2 filters of trtsweep for the playbooks (the logic lives in the trtsweep package)."""

from __future__ import annotations

from ansible.errors import AnsibleFilterError

try:
    from trtsweep.errors import TrtsweepError
    from trtsweep.fleet import hostfacts
    from trtsweep.fleet.collect import host_file_name
except ImportError as exc:  # the controller's Python must have trtsweep installed
    IMPORT_ERROR: ImportError | None = exc
else:
    IMPORT_ERROR = None

NOT_PREPARED = "not prepared: unreachable, or failed in the prepare play before its GPUs were known (see above)"


def _require(name):
    if IMPORT_ERROR is not None:
        raise AnsibleFilterError(f"{name} needs the trtsweep package on the controller: {IMPORT_ERROR}")


def trtsweep_fleet_hosts(names, hostvars, active=None):
    """Host name -> what placement needs (fleet_prepare_host_facts of the prepare play); a host the prepare play
    never reached gets its declared GPUs (if any) and a problem, so its points are failed at preflight. `active`:
    the hosts still in the play (ansible_play_hosts, for a search's later round): a host that went unreachable
    (`trtsweep_unreachable`, set by the events callback) or failed since the prepare play gets a problem too, so
    that nothing more is placed on it."""
    _require("trtsweep_fleet_hosts")
    hosts = {}
    for name in names:
        host = hostvars[name]
        facts = host.get("fleet_prepare_host_facts")
        reason = host.get("trtsweep_unreachable")
        if facts:
            hosts[name] = dict(facts)
            gone = _gone(reason, active is not None and name not in active)
            if gone:
                hosts[name]["problems"] = [*facts.get("problems", []), gone]
            continue
        declared = host.get("trtsweep_gpus")
        try:
            gpus = hostfacts.declared_gpus(declared) if declared is not None else []
        except TrtsweepError as exc:
            raise AnsibleFilterError(f"{name}: {exc}") from exc
        problem = f"unreachable in the prepare play, nothing sent to it: {reason}" if reason else NOT_PREPARED
        hosts[name] = {"gpus": gpus, "busy_gpus": [], "problems": [problem]}
    return hosts


def _gone(reason, left_the_play):
    """The problem of a prepared host that went away since (None: it is still there)."""
    if reason:
        return f"unreachable earlier in this run, nothing more sent to it: {reason}"
    if left_the_play:
        return "failed earlier in this run (see above), nothing more sent to it"
    return None


def trtsweep_host_file_name(name):
    """An inventory host name as part of a file name (trtsweep.fleet.collect.host_file_name: the run's lease)."""
    _require("trtsweep_host_file_name")
    return host_file_name(str(name))


class FilterModule:
    def filters(self):
        return {"trtsweep_fleet_hosts": trtsweep_fleet_hosts, "trtsweep_host_file_name": trtsweep_host_file_name}
