#!/usr/bin/python
# Copyright: trtsweep contributors
# Apache-2.0
"""Ansible module: make a Hugging Face model available on the host (hub, mirror or offline cache)."""

from __future__ import annotations

DOCUMENTATION = r"""
module: trtsweep_hf_download
short_description: Resolve or download a Hugging Face model snapshot
description:
  - Looks the snapshot up in the hub cache first (C(local_files_only)); reports C(changed=false) when it
    is already there. Otherwise, unless C(offline), downloads it with C(huggingface_hub.snapshot_download).
  - The token comes from C(token) (mark it no_log; Ansible Vault) or the HF_TOKEN environment variable and
    is never returned or logged.
options:
  repo_id: {type: str, required: true, description: "Hugging Face repo id, owner/name."}
  revision: {type: str, description: "Branch, tag or commit; the resolved commit is returned."}
  cache_dir: {type: path, description: "Hub cache directory (default: huggingface_hub's)."}
  offline: {type: bool, default: false, description: "Never contact the hub (air-gapped hosts)."}
  endpoint: {type: str, description: "A hub mirror URL (HF_ENDPOINT)."}
  allow_patterns: {type: list, elements: str, description: "Only files matching these globs."}
  ignore_patterns: {type: list, elements: str, description: "Skip files matching these globs."}
  token: {type: str, no_log: true, description: "Hub token (Ansible Vault); else HF_TOKEN from the environment."}
attributes:
  check_mode: {support: full}
"""

EXAMPLES = r"""
- name: Resolve the demo model from the pre-seeded offline cache
  trtsweep_hf_download:
    repo_id: HuggingFaceTB/SmolLM2-135M-Instruct
    cache_dir: ~/.cache/trtsweep/hf-hub
    offline: true
"""

RETURN = r"""
path: {description: Local snapshot directory., returned: success, type: str}
revision: {description: Resolved commit hash of the snapshot., returned: success, type: str}
"""

import os
from pathlib import Path

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.trtsweep_common import require_trtsweep


def main():
    module = AnsibleModule(
        argument_spec={
            "repo_id": {"type": "str", "required": True},
            "revision": {"type": "str"},
            "cache_dir": {"type": "path"},
            "offline": {"type": "bool", "default": False},
            "endpoint": {"type": "str"},
            "allow_patterns": {"type": "list", "elements": "str"},
            "ignore_patterns": {"type": "list", "elements": "str"},
            "token": {"type": "str", "no_log": True},
        },
        supports_check_mode=True,
    )
    require_trtsweep(module)
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import HfHubHTTPError, LocalEntryNotFoundError

    p = module.params
    kwargs = {
        "repo_id": p["repo_id"],
        "revision": p["revision"],
        "cache_dir": p["cache_dir"],
        "allow_patterns": p["allow_patterns"],
        "ignore_patterns": p["ignore_patterns"],
        "token": p["token"] or os.environ.get("HF_TOKEN") or False,
        "endpoint": p["endpoint"],
    }
    try:
        path = snapshot_download(local_files_only=True, **kwargs)
        changed = False
    except LocalEntryNotFoundError:
        if p["offline"]:
            module.fail_json(
                msg=f"{p['repo_id']} (revision {p['revision'] or 'main'}) is not in the hub cache "
                f"{p['cache_dir'] or '(default)'} and offline is set"
            )
        if module.check_mode:
            module.exit_json(changed=True, path=None, revision=p["revision"])
        try:
            path = snapshot_download(**kwargs)
        except (HfHubHTTPError, OSError) as exc:
            module.fail_json(msg=f"download of {p['repo_id']} failed: {str(exc).splitlines()[0]}")
        changed = True
    module.exit_json(changed=changed, path=path, revision=Path(path).name)


if __name__ == "__main__":
    main()
