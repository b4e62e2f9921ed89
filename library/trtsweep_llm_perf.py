#!/usr/bin/python
# Copyright: trtsweep contributors
# Apache-2.0
"""Ansible module: run llm-perf against a server and return its per-level summaries."""

from __future__ import annotations

DOCUMENTATION = r"""
module: trtsweep_llm_perf
short_description: Benchmark an LLM server with llm-perf (TTFT, ITL, token throughput, accuracy)
description:
  - Runs every concurrency level with the prompts of C(input_data) and writes the profile export
    (C(export_file)), a CSV and a C(.summary.json) next to it, atomically after each level.
  - Measurements are results, not host state: the module reports C(changed=false).
options:
  url: {type: str, required: true, description: "Server address, e.g. 127.0.0.1:8001."}
  protocol: {type: str, choices: [grpc, http], default: grpc}
  model: {type: str, default: ensemble}
  concurrency: {type: list, elements: int, default: [1]}
  input_data: {type: path, required: true}
  tokenizer_path: {type: str}
  export_file: {type: path, required: true}
  num_requests: {type: int}
  warmup_requests: {type: int, default: 1}
  max_tokens: {type: int}
  streaming: {type: bool, default: true}
  chat_template: {type: bool, default: false}
  extra_inputs: {type: dict, default: {}}
  seed: {type: int, default: 0}
  connect_timeout: {type: float, default: 10}
  request_timeout: {type: float, default: 600}
attributes:
  check_mode: {support: none}
"""

EXAMPLES = r"""
- name: Benchmark the ensemble over gRPC streaming
  trtsweep_llm_perf:
    url: 127.0.0.1:8001
    model: ensemble
    concurrency: [1, 2, 4]
    input_data: /srv/data/prompts.jsonl
    tokenizer_path: /models/SmolLM2-135M-Instruct
    chat_template: true
    export_file: /srv/results/p1/llm_perf.json
"""

RETURN = r"""
levels:
  description: Per concurrency level, the headline row (latencies in ms, throughputs per second).
  returned: success
  type: list
  elements: dict
files:
  description: Paths of the profile export, CSV and summary JSON.
  returned: success
  type: dict
"""

from pathlib import Path

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.trtsweep_common import require_trtsweep, run_or_fail


def main():
    module = AnsibleModule(
        argument_spec={
            "url": {"type": "str", "required": True},
            "protocol": {"type": "str", "choices": ["grpc", "http"], "default": "grpc"},
            "model": {"type": "str", "default": "ensemble"},
            "concurrency": {"type": "list", "elements": "int", "default": [1]},
            "input_data": {"type": "path", "required": True},
            "tokenizer_path": {"type": "str"},
            "export_file": {"type": "path", "required": True},
            "num_requests": {"type": "int"},
            "warmup_requests": {"type": "int", "default": 1},
            "max_tokens": {"type": "int"},
            "streaming": {"type": "bool", "default": True},
            "chat_template": {"type": "bool", "default": False},
            "extra_inputs": {"type": "dict", "default": {}},
            "seed": {"type": "int", "default": 0},
            "connect_timeout": {"type": "float", "default": 10.0},
            "request_timeout": {"type": "float", "default": 600.0},
        },
        supports_check_mode=False,
    )
    require_trtsweep(module)
    from trtsweep.perf import export
    from trtsweep.perf.benchmark import BenchmarkConfig, run
    from trtsweep.perf.protocols import Endpoint

    p = module.params
    endpoint = Endpoint(
        url=p["url"],
        model=p["model"],
        streaming=p["streaming"],
        connect_timeout_s=p["connect_timeout"],
        request_timeout_s=p["request_timeout"],
        extra_inputs=p["extra_inputs"],
    )
    config = BenchmarkConfig(
        endpoint=endpoint,
        protocol=p["protocol"],
        input_data=Path(p["input_data"]),
        concurrency=p["concurrency"],
        tokenizer_path=p["tokenizer_path"],
        num_requests=p["num_requests"],
        warmup_requests=p["warmup_requests"],
        max_tokens=p["max_tokens"],
        chat_template=p["chat_template"],
        seed=p["seed"],
        export_file=Path(p["export_file"]),
    )
    reports = run_or_fail(module, run, config)
    rows = [export.headline(r.level.concurrency, r.summary) for r in reports]
    files = {k: str(v) for k, v in export.paths(Path(p["export_file"])).items()}
    failed = sum(r.summary.get("failed", 0) for r in reports)
    module.exit_json(changed=False, levels=rows, files=files, failed_requests=failed, table=export.table(rows))


if __name__ == "__main__":
    main()
