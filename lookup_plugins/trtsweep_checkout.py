# Copyright: trtsweep contributors
# Apache-2.0
"""Lookup plugin: the trtsweep checkout this Ansible run uses (the directory holding sweep.yml and ansible.cfg).

Path defaults (`trtsweep_results_dir`, the built wheels) are resolved against it once, whichever playbook renders
them: `playbook_dir` is the directory of the playbook being run, which for a play of an imported playbook
(playbooks/*.yml) is playbooks/, not the checkout.
"""

from __future__ import annotations

from pathlib import Path

from ansible.plugins.lookup import LookupBase

DOCUMENTATION = r"""
name: trtsweep_checkout
short_description: The trtsweep checkout (the directory holding sweep.yml), whichever playbook asks
description:
  - Returns the absolute path of the checkout that holds this plugin (lookup_plugins/ in it), for path defaults
    that must not depend on the directory of the playbook that renders them.
options: {}
"""

EXAMPLES = r"""
trtsweep_results_dir: "{{ lookup('trtsweep_checkout') }}/results"
"""

RETURN = r"""
_raw:
  description: The checkout's absolute path.
  type: list
  elements: str
"""

CHECKOUT = Path(__file__).resolve().parent.parent


class LookupModule(LookupBase):
    def run(self, terms, variables=None, **kwargs):  # type: ignore[no-untyped-def]
        return [str(CHECKOUT)]
