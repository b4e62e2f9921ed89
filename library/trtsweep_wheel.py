#!/usr/bin/python
# Copyright: trtsweep contributors
# Apache-2.0
"""Ansible module (controller): the wheel of the controller's exact trtsweep, built once per build id."""

from __future__ import annotations

DOCUMENTATION = r"""
module: trtsweep_wheel
short_description: Build the wheel of the controller's trtsweep (once per build id)
description:
  - Builds C(trtsweep-<version>-py3-none-any.whl) from the source tree the controller runs (pip wheel, no
    dependencies) into C(<out_dir>/<build id>/), or returns the one already there (C(changed=false)).
  - The build id is a hash of every file of the package, so hosts get exactly the controller's code.
  - Runs on the controller.
  - With O(wheel), builds nothing and returns that wheel's build id (read from the files inside it).
  - With O(wheelhouse), also packs that folder of dependency wheels into one uncompressed archive in O(out_dir)
    (C(wheelhouse-<digest>.tar), reused while its files stay the same), so that a host gets it in one transfer.
options:
  out_dir: {type: path, required: true, description: "Directory of built wheels on the controller."}
  wheel: {type: path, description: "A trtsweep wheel to use instead of building the controller's source tree."}
  wheelhouse: {type: path, description: "A folder of dependency wheels (trtsweep wheelhouse) to pack for hosts."}
attributes:
  check_mode: {support: full}
"""

EXAMPLES = r"""
- name: The controller's trtsweep as a wheel
  trtsweep_wheel:
    out_dir: "{{ playbook_dir }}/.cache/wheels"
  delegate_to: localhost
  run_once: true

- name: The same, and a wheelhouse packed for offline hosts
  trtsweep_wheel:
    out_dir: "{{ playbook_dir }}/.cache/wheels"
    wheelhouse: /srv/wheelhouse
  delegate_to: localhost
  run_once: true
"""

RETURN = r"""
path: {description: The wheel file., returned: success, type: str}
build: {description: The build id (hash of the package files)., returned: success, type: str}
version: {description: The package version., returned: success, type: str}
wheelhouse_archive:
  description: The packed wheelhouse (empty in check mode).
  returned: with wheelhouse
  type: str
"""

from pathlib import Path

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.trtsweep_common import require_trtsweep, run_or_fail


def main():
    module = AnsibleModule(
        argument_spec={"out_dir": {"type": "path", "required": True}, "wheel": {"type": "path"},
                       "wheelhouse": {"type": "path"}},
        supports_check_mode=True,
    )  # fmt: skip
    require_trtsweep(module)
    from trtsweep import __version__
    from trtsweep.fleet import bootstrap
    from trtsweep.fleet.release import build_id, wheel_build_id

    out = Path(module.params["out_dir"])
    packed, archive = _wheelhouse(module, bootstrap, out)
    if module.params["wheel"]:
        wheel = Path(module.params["wheel"])
        try:
            build = wheel_build_id(wheel)
        except (OSError, ValueError) as exc:
            module.fail_json(msg=f"fleet_prepare_wheel {wheel}: not a readable wheel ({exc})")
        module.exit_json(changed=packed, path=str(wheel), build=build, version=wheel.name.split("-")[1], **archive)
    if module.check_mode:
        existing = sorted((out / build_id()).glob("trtsweep-*.whl"))
        module.exit_json(changed=not existing, path=str(existing[0]) if existing else "", build=build_id(),
                         version=__version__, **archive)  # fmt: skip
    path, build, built = run_or_fail(module, bootstrap.build_wheel, out)
    module.exit_json(changed=built or packed, path=str(path), build=build, version=__version__, **archive)


def _wheelhouse(module, bootstrap, out: Path) -> tuple[bool, dict]:
    """(packed now?, the archive's return value) for O(wheelhouse); nothing is written in check mode."""
    source = module.params["wheelhouse"]
    if not source:
        return False, {}
    if not Path(source).is_dir():
        module.fail_json(msg=f"fleet_prepare_wheelhouse {source}: not a folder on the controller")
    if module.check_mode:
        return False, {"wheelhouse_archive": ""}
    archive, packed = run_or_fail(module, bootstrap.pack_wheelhouse, Path(source), out)
    return packed, {"wheelhouse_archive": str(archive)}


if __name__ == "__main__":
    main()
