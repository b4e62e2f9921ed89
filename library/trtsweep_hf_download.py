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
    is already there. Otherwise, unless C(offline), checks the free disk space against the size of the
    selected files and downloads them with C(huggingface_hub.snapshot_download).
  - A O(revision) that is not a commit (a branch or tag; none means main) is resolved to the commit it names on the
    hub now, so a moved branch is downloaded; offline, or when the hub does not answer, the cache's ref decides.
  - O(resolve_only) downloads nothing and only returns the commit the revision names now, in RV(resolved).
  - C(mirror_dir) resolves the model from a local mirror directory instead (air-gapped fleets).
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
  mirror_dir: {type: path, description: "Local mirror directory holding <owner>/<name>/ model directories."}
  source:
    type: str
    choices: [huggingface, modelscope]
    default: huggingface
    description: Where to download from (ModelScope needs the modelscope package on the host).
  resolve_only:
    type: bool
    default: false
    description: Only say which commit O(revision) names now (the hub's answer, else the cache's ref); download nothing.
attributes:
  check_mode: {support: full}
"""

EXAMPLES = r"""
- name: Resolve the demo model from the pre-seeded offline cache
  trtsweep_hf_download:
    repo_id: HuggingFaceTB/SmolLM2-135M-Instruct
    cache_dir: ~/.cache/trtsweep/hf-hub
    offline: true

- name: Which commit main names now, downloading nothing
  trtsweep_hf_download:
    repo_id: Qwen/Qwen2-7B
    revision: main
    resolve_only: true
"""

RETURN = r"""
path: {description: Local snapshot directory., returned: success, type: str}
revision: {description: Resolved commit hash of the snapshot (null for a mirror)., returned: success, type: str}
source: {description: "Where it came from: hub-cache, hub, mirror or modelscope.", returned: success, type: str}
resolved:
  description: "O(resolve_only): ref (owner/name@revision) and commit (null when neither the hub nor the cache knows)."
  returned: resolve_only
  type: dict
"""

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.trtsweep_common import require_trtsweep, run_or_fail


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
            "mirror_dir": {"type": "path"},
            "source": {"type": "str", "choices": ["huggingface", "modelscope"], "default": "huggingface"},
            "resolve_only": {"type": "bool", "default": False},
        },
        supports_check_mode=True,
    )
    require_trtsweep(module)
    from trtsweep.hub.download import current_commit, ref_key, resolve

    p = module.params
    if p["resolve_only"]:
        commit = run_or_fail(module, current_commit, p["repo_id"], revision=p["revision"], cache_dir=p["cache_dir"],
                             offline=p["offline"], endpoint=p["endpoint"], token=p["token"])  # fmt: skip
        module.exit_json(changed=False, resolved={"ref": ref_key(p["repo_id"], p["revision"]), "commit": commit})
    snap = run_or_fail(
        module,
        resolve,
        p["repo_id"],
        revision=p["revision"],
        cache_dir=p["cache_dir"],
        offline=p["offline"],
        endpoint=p["endpoint"],
        allow=p["allow_patterns"],
        ignore=p["ignore_patterns"],
        token=p["token"],
        mirror_dir=p["mirror_dir"],
        source=p["source"],
        check_mode=module.check_mode,
    )
    module.exit_json(changed=snap.changed, path=snap.path, revision=snap.revision, source=snap.source)


if __name__ == "__main__":
    main()
