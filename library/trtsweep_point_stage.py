#!/usr/bin/python
# Copyright: trtsweep contributors
# Apache-2.0
"""Ansible module: one stage of a sweep point on its host, run as a sweep's lane runs it (the roles' point mode)."""

from __future__ import annotations

DOCUMENTATION = r"""
module: trtsweep_point_stage
short_description: Run one stage of a sweep point on the host, through the lane's own mapping of the point
description:
  - The roles' point mode (O(point) given as C(hf_download_point), C(quantize_point), C(trtllm_build_point),
    C(triton_repo_point)). The point and the host's settings are mapped onto the stage's functions by
    C(trtsweep.lane.point.PointStages), the mapping a sweep's lane runs, so a handoff or a user's playbook makes the
    artifacts the sweep made (the same content-keyed checkpoint and engine directories, the same files).
  - The point's C(stage_settings) (recorded in C(point.json), the settings it was measured with) win over O(settings).
  - C(download) seeds the bundled demo model when the point names it (not in check mode), resolves the model
    (O(pinned_revision) taken whatever the point's revision names now) and, when the plan deferred it, checks that
    the prompts at C(<point_dir>/<name of benchmark.input_data>) fit C(max_input_len).
  - C(quantize) refuses a precision the backend does not take, then makes or reuses the engine flow's checkpoint
    (trtsweep_quantize) or the PyTorch flow's (trtsweep_modelopt); the hf backend loads the weights in the precision.
  - C(build) makes or reuses the engine (trtsweep_trtllm_build), or writes the PyTorch flow's LLM API options file
    C(<point_dir>/llm_api_options.yml); nothing for the hf backend's engine flow.
  - C(repository) writes the Triton model repository C(<point_dir>/triton_repo) (trtsweep_triton_repo); none for a
    point served by trtllm-serve.
  - A stage's failure fails the task with its one-line cause. Check mode reports what would be made and makes nothing.
options:
  stage:
    type: str
    required: true
    choices: [download, quantize, build, repository]
    description: The stage to run.
  point:
    type: dict
    required: true
    description: The point as the plan placed it, or C(point.json) of a measured one (a handoff bundle's C(point)).
  point_dir:
    type: path
    required: true
    description: The point's directory on the host (prompts, LLM API options, model repository).
  results_dir:
    type: path
    description: Where the build records go (C(checkpoint.json), C(trtllm_build.json)); default C(<point_dir>/results).
  settings:
    type: dict
    default: {}
    description:
      - The host's settings the stages read, as a sweep's controller hands them to its lanes, by name (the roles'
        variables, C(quantize_dtype), C(trtllm_build_gemm_plugin), ..., and C(trtsweep_cache_dir),
        C(trtsweep_hf_cache_dir), C(trtsweep_hf_offline), C(trtsweep_triton_runtime)); tokens go in O(token).
  made:
    type: dict
    default: {}
    description: What the earlier stages made (RV(made) of their tasks).
  pinned_revision:
    type: str
    description: C(download) - the model commit to take (the one the point was measured with).
  token:
    type: str
    no_log: true
    description: Hugging Face token of C(download) and the C(quantize) tools (Vault); else the host's HF_TOKEN.
attributes:
  check_mode: {support: full}
  diff_mode: {support: none}
"""

EXAMPLES = r"""
- name: The model of a handed-off point, at the commit it was measured with
  trtsweep_point_stage:
    stage: download
    point: "{{ (lookup('ansible.builtin.file', bundle ~ '/bundle.json') | from_json).point }}"
    point_dir: /srv/trtsweep/handoff/p1
    pinned_revision: 0123456789abcdef0123456789abcdef01234567
    settings: {trtsweep_hf_cache_dir: /srv/hf-hub, trtsweep_hf_offline: true}
  register: model

- name: Its checkpoint
  trtsweep_point_stage:
    stage: quantize
    point: "{{ (lookup('ansible.builtin.file', bundle ~ '/bundle.json') | from_json).point }}"
    point_dir: /srv/trtsweep/handoff/p1
    made: "{{ model.made }}"
    settings: {quantize_dtype: float16, quantize_smoothquant_alpha: 0.5, quantize_awq_block_size: 128}
"""

RETURN = r"""
made:
  description:
    - What this and the earlier stages made - model_dir, revision, output_dir (the model the server loads),
      hf_dtype, checkpoint_dir, engine_dir, engine_size_bytes, draft_dir (a speculative point's draft model).
  returned: success
  type: dict
command:
  description: C(quantize) / C(build) - the tool's argv that ran or would run (empty when none runs).
  returned: success
  type: list
  elements: str
changed_files:
  description: C(repository) - files (relative to the repository) written or, in check mode, that would be.
  returned: success
  type: list
  elements: str
params:
  description: C(repository) - the repository's resolved parameters.
  returned: success
  type: dict
"""

import dataclasses
import json
import sys
from pathlib import Path

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.trtsweep_common import require_trtsweep, run_cli, run_or_fail

MADE = (
    "model_dir",
    "revision",
    "output_dir",
    "hf_dtype",
    "checkpoint_dir",
    "engine_dir",
    "engine_size_bytes",
    "draft_dir",
)


def _stages(module):
    from trtsweep.lane.point import Made, PointStages
    from trtsweep.lane.spec import PointPaths

    p = module.params
    point_dir = Path(p["point_dir"])
    results = Path(p["results_dir"]) if p["results_dir"] else point_dir / "results"
    settings = dict(p["settings"])
    if p["token"]:
        settings.update(hf_download_token=p["token"], quantize_hf_token=p["token"])
    made = Made(**{name: p["made"][name] for name in MADE if p["made"].get(name) is not None})
    return PointStages(p["point"], settings, PointPaths(point_dir, point_dir, results), made=made)


def _demo_revision(module, stages):
    """The seeded demo model's commit, seeded in its own process (torch and Ansible's module runtime do not share a
    process well) as trtsweep_demo_model seeds it; none in check mode, which seeds nothing."""
    if not stages.demo or module.check_mode:
        return None
    argv = [sys.executable, "-m", "trtsweep.cli", "demo-model", "--cache-dir", str(stages.cache_dir)]
    return json.loads(run_cli(module, argv))["revision"]


def _download(module, stages):
    snap = stages.download(_demo_revision(module, stages), module.params["pinned_revision"], module.check_mode)
    if stages.prompts.is_file():
        stages.check_prompts()
    return {"changed": snap.changed, "source": snap.source}


def _quantize(module, stages):
    outcome = stages.quantize(module.check_mode)
    if outcome is None:
        return {"changed": False, "command": []}
    return {"changed": outcome.changed, "command": outcome.command, "reused": outcome.reused}


def _build(module, stages):
    return {"changed": stages.build(module.check_mode)}


def _repository(module, stages):
    written, params = stages.repository(module.check_mode)
    changed = written.changed if written is not None else []
    return {"changed": bool(changed), "changed_files": changed, "params": params}


STAGES = {"download": _download, "quantize": _quantize, "build": _build, "repository": _repository}


def main():
    module = AnsibleModule(
        argument_spec={
            "stage": {"type": "str", "required": True, "choices": list(STAGES)},
            "point": {"type": "dict", "required": True},
            "point_dir": {"type": "path", "required": True},
            "results_dir": {"type": "path"},
            "settings": {"type": "dict", "default": {}},
            "made": {"type": "dict", "default": {}},
            "pinned_revision": {"type": "str"},
            "token": {"type": "str", "no_log": True},
        },
        supports_check_mode=True,
    )
    require_trtsweep(module)
    stage = module.params["stage"]
    stages = _stages(module)
    try:
        result = run_or_fail(module, STAGES[stage], module, stages)
    except KeyError as exc:
        module.fail_json(msg=f"stage {stage} of point {module.params['point'].get('id')}: no {exc} in the point or "
                             "the settings (the role's variables give every setting)")  # fmt: skip
    made = {name: value for name, value in dataclasses.asdict(stages.made).items() if name in MADE}
    module.exit_json(made=made, **result)


if __name__ == "__main__":
    main()
