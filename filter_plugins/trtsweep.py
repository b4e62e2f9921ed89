# Copyright: trtsweep contributors
# Apache-2.0
"""Jinja2 filters of trtsweep: sweep planning for the playbooks (the logic lives in trtsweep.planning)."""

from __future__ import annotations

from ansible.errors import AnsibleFilterError

try:
    from trtsweep.errors import TrtsweepError
    from trtsweep.planning import assign_hosts, expand
except ImportError as exc:  # the controller's Python must have trtsweep installed
    IMPORT_ERROR: ImportError | None = exc
else:
    IMPORT_ERROR = None


def trtsweep_points(sweep, hosts):
    """The sweep's points (one dict of resolved settings each), placed on `hosts`."""
    if IMPORT_ERROR is not None:
        raise AnsibleFilterError(f"trtsweep_points needs the trtsweep package on the controller: {IMPORT_ERROR}")
    try:
        return assign_hosts(expand(sweep), list(hosts))
    except TrtsweepError as exc:
        raise AnsibleFilterError(str(exc)) from exc


class FilterModule:
    def filters(self):
        return {"trtsweep_points": trtsweep_points}
