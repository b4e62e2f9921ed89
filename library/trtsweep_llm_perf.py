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
  - Runs the C(llm-perf) command line in its own process (returned as C(cmd)).
  - Measurements are results, not host state, so the module reports C(changed=false).
  - Fails when a level has no successful request (its numbers would be dashes), naming the level and the
    error classes; the files are written all the same.
  - With C(search), llm-perf searches for the capacity instead of measuring C(concurrency) (C(--search slo));
    it raises the load level by level and narrows down to the highest one whose level meets C(search.slo);
    the summary's C(search) object (returned as C(search)) holds every level's verdict and the capacity.
options:
  url: {type: str, required: true, description: "Server address, e.g. 127.0.0.1:8001."}
  protocol: {type: str, choices: [grpc, http, openai], default: grpc, description: "Server protocol."}
  endpoint:
    type: str
    choices: [chat, completions]
    default: chat
    description: "C(protocol=openai): /v1/chat/completions (messages) or /v1/completions (the prompt templated here)."
  model: {type: str, default: ensemble, description: "Triton model name or OpenAI model."}
  concurrency:
    type: list
    elements: int
    default: [1]
    description: "Closed-loop concurrency levels (not passed with C(search): the search picks its levels)."
  search:
    type: dict
    description:
      - A capacity search instead of the C(concurrency) levels (llm-perf C(--search slo)); null measures the levels.
      - C(num_requests) is the number of requests of each level the search measures.
    suboptions:
      search: {type: str, choices: [slo], default: slo, description: "slo: the highest load within C(slo)."}
      variable:
        type: str
        choices: [concurrency, request_rate]
        required: true
        description: "The load raised: requests in flight (closed loop) or requests per second (open loop)."
      max: {type: float, required: true, description: "The highest load tried (C(--search-max))."}
      max_levels: {type: int, default: 8, description: "Levels measured at most (C(--search-max-levels))."}
      hint:
        type: list
        elements: float
        description:
          - An earlier, shorter search's capacity and the level above it that failed (C(--search-hint MET,FAILED)),
            measured first; a configuration search's later round sets it.
      slo:
        type: dict
        required: true
        description:
          - The limits each level is judged by (C(--search-slo)), the sweep's C(slo) mapping, e.g.
            C(ttft_p99_ms=1000) and C(min_success_rate=0.99) as a dict; its keys other than ttft_p99_ms,
            tpot_p99_ms, e2e_p99_ms and min_success_rate are not per-level limits and are left out.
            At least one of those four is required.
  input_data: {type: path, required: true, description: "Prompts jsonl on the host."}
  tokenizer_path: {type: str, description: "HF tokenizer directory for token counts and the chat template."}
  export_file:
    type: path
    required: true
    description: Profile export path; .csv and .summary.json are written next to it.
  num_requests: {type: int, description: "Measured requests per level (default one per record)."}
  warmup_requests: {type: int, default: 1, description: "Warm-up requests per level."}
  max_tokens: {type: int, description: "Fixed output budget (default the reference's token count)."}
  streaming: {type: bool, default: true, description: "Stream responses."}
  chat_template: {type: bool, default: false, description: "Wrap prompts with the tokenizer's chat template."}
  extra_inputs: {type: dict, default: {}, description: "Extra request inputs, e.g. top_k: 1."}
  scorer: {type: str, description: "Extra accuracy scorer module:function."}
  server_metrics_url: {type: str, description: "Prometheus endpoint, or trtllm-serve's /metrics."}
  gpu_telemetry:
    type: list
    elements: int
    default: []
    description: "GPUs of this host (nvidia-smi indices) sampled through NVML during each level (none without NVML)."
  seed: {type: int, default: 0, description: "Seed of the request order."}
  connect_timeout: {type: float, default: 10, description: "Seconds to reach the server."}
  request_timeout: {type: float, default: 600, description: "Seconds per request."}
  stall_timeout:
    type: float
    default: 60
    description: "Streaming: seconds to wait for the next chunk before the request fails as a timeout; 0 turns it off."
  expect_server_id:
    type: str
    description:
      - The server id the Triton server must report in its metadata (C(name) of GET /v2, gRPC ServerMetadata)
        before the first and after the last request of every level, e.g. the C(server_id) that
        trtsweep_triton_server returned. On a mismatch, or a server that no longer answers, that level fails
        and so does the task; what was measured stays written. Null skips the check.
  server_state_file:
    type: path
    description:
      - The state file of the server being measured (trtsweep_triton_server's C(state_file)). While llm-perf
        runs, the module checks every second that the server still runs under its supervisor; when it is gone
        (crashed, or stopped by its supervisor because the run's lease lapsed - an interrupted run, a dead
        controller, a cut link), llm-perf is stopped at once and the task fails with the server's exit and the
        log's cause, so no client outlives the run. llm-perf also dies with the module's process.
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
    expect_server_id: "{{ triton_serve_result.server_id }}"

- name: The highest concurrency within the SLOs (a capacity search)
  trtsweep_llm_perf:
    url: 127.0.0.1:8001
    input_data: /srv/data/prompts.jsonl
    export_file: /srv/results/p1/llm_perf.json
    num_requests: 200
    search:
      variable: concurrency
      max: 256
      slo: {ttft_p99_ms: 1000, tpot_p99_ms: 50, min_success_rate: 0.99}
"""

RETURN = r"""
search:
  description: With C(search), the summary's search object (each level's verdict, the capacity, its bound).
  returned: success, with search
  type: dict
levels:
  description: Per concurrency level, the headline row (latencies in ms, throughputs per second).
  returned: success
  type: list
  elements: dict
cmd:
  description: The llm-perf command line that ran.
  returned: success
  type: list
  elements: str
files:
  description: Paths of the profile export, CSV and summary JSON.
  returned: success
  type: dict
"""

import json
from pathlib import Path

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.trtsweep_common import fail_on_status, require_trtsweep, run_cli


def main():
    module = AnsibleModule(
        argument_spec={
            "url": {"type": "str", "required": True},
            "protocol": {"type": "str", "choices": ["grpc", "http", "openai"], "default": "grpc"},
            "endpoint": {"type": "str", "choices": ["chat", "completions"], "default": "chat"},
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
            "scorer": {"type": "str"},
            "server_metrics_url": {"type": "str"},
            "gpu_telemetry": {"type": "list", "elements": "int", "default": []},
            "seed": {"type": "int", "default": 0},
            "connect_timeout": {"type": "float", "default": 10.0},
            "request_timeout": {"type": "float", "default": 600.0},
            "stall_timeout": {"type": "float", "default": 60.0},
            "expect_server_id": {"type": "str"},
            "server_state_file": {"type": "path"},
            "search": {
                "type": "dict",
                "options": {
                    "search": {"type": "str", "choices": ["slo"], "default": "slo"},
                    "variable": {"type": "str", "choices": ["concurrency", "request_rate"], "required": True},
                    "max": {"type": "float", "required": True},
                    "max_levels": {"type": "int", "default": 8},
                    "hint": {"type": "list", "elements": "float"},
                    "slo": {"type": "dict", "required": True},
                },
            },
        },
        supports_check_mode=False,
    )
    require_trtsweep(module)
    from trtsweep.perf import export
    from trtsweep.perf.argv import command

    try:
        argv = command(module.params)
    except ValueError as exc:
        module.fail_json(msg=str(exc))
    ok = (0, 3)  # 3: a level measured nothing (said below, with the files)
    if module.params["server_state_file"]:
        from trtsweep.serve import server
        from trtsweep.serve.logs import log_tail
        from trtsweep.serve.spec import ServerState

        state_file = Path(module.params["server_state_file"])
        watched = server.run_while_served(argv, state_file)
        if watched.server_gone:
            log = Path(ServerState.load(state_file).log_file)
            module.fail_json(msg=f"benchmark stopped: {watched.server_gone}", cmd=argv, details=log_tail(log))
        fail_on_status(module, argv, watched.returncode, watched.stderr, ok)
        stdout = watched.stdout
    else:
        stdout = run_cli(module, argv, ok=ok)
    files = {k: str(v) for k, v in export.paths(Path(module.params["export_file"])).items()}
    with open(files["summary"], encoding="utf-8") as handle:
        summary = json.load(handle)
    levels, search = summary["levels"], summary.get("search")
    rows = [export.headline(level, level["summary"]) for level in levels]
    failed = sum(level["summary"].get("failed", 0) for level in levels)
    # a level that measured nothing has no numbers: the point did not produce what it is for; in a capacity search
    # only the first (synchronous) level must measure: a higher one where everything failed is a finding
    empty = export.unmeasured(levels[:1] if search else levels)
    if empty:
        module.fail_json(msg=empty, levels=rows, files=files, failed_requests=failed, details=stdout.strip(), cmd=argv)
    module.exit_json(
        changed=False, levels=rows, files=files, failed_requests=failed, table=stdout.strip(), cmd=argv, search=search
    )


if __name__ == "__main__":
    main()
