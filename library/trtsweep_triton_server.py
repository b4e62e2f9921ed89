#!/usr/bin/python
# Copyright: trtsweep contributors
# Apache-2.0
"""Ansible module: start a Triton server for a model repository and wait until ready, or stop it."""

from __future__ import annotations

DOCUMENTATION = r"""
module: trtsweep_triton_server
short_description: Start (and wait for) or stop a Triton Inference Server by PID
description:
  - C(state=started) refuses ports already in use, starts tritonserver in its own process group with a
    fresh server id (C(--id=trtsweep-<hex>), returned as C(server_id)), writes a state file (pid, process
    start time, ports, command, server id, hash of the model repository), and waits until the process is
    alive and its HTTP and gRPC ports answer server metadata with that id and C(/v2/health/ready). If the
    server exits or is not ready in time it is stopped and the task fails with the last log line (and
    the log tail in C(details)); if another server answers on its ports the task fails at once, naming both ids.
  - A server the state file names that is still running is adopted (C(changed=false)) only if its command
    line (less the id), the model repository's contents and C(visible_devices) are unchanged and it still
    answers with its own id; otherwise it is stopped and a new one started (C(replaced=true), with a warning
    naming what differed).
  - The server's environment is this task's without C(SSH_CLIENT), C(SSH2_CLIENT), C(SSH_CONNECTION),
    C(SSH_TTY) and C(BASH_ENV) (with them, the bash that Triton's python backend starts each stub with reads
    C(~/.bashrc), whose conda or pyenv set-up would hide the virtualenv from the stub).
  - C(state=stopped) stops the server named by the state file (TERM, then KILL), waits until its ports
    are free, and removes the state file. A PID reused by another process is never signalled.
  - Every server runs under a supervisor (C(python -m trtsweep.serve.supervisor)), its parent, which records
    its exit status. With C(lease_file) the server lives only while the run's heartbeat (trtsweep_heartbeat) renews
    the lease; the supervisor stops it (TERM, KILL after a grace period, its python-backend stubs with it) when the
    counter the heartbeat writes into the file has not changed for C(lease_ttl) seconds of the host's monotonic
    clock, or at once when the file is removed, so an interrupted or cut-off run leaves no server behind. The
    module never renews the lease itself.
options:
  state:
    description: Start (and wait for readiness) or stop.
    type: str
    choices: [started, stopped]
    default: started
  state_file:
    description: JSON file describing the started server.
    type: path
    required: true
  model_repository:
    description: Model repository (state=started).
    type: path
  runtime:
    description:
      - C(local) runs the tritonserver bundled with nvidia-pytriton (CPU test bed); C(native) the one given
        by C(tritonserver); C(container) runs it in C(container_image) with the docker CLI (GPUs, host
        network, shm size, memlock and stack ulimits, paths mounted at the same place).
    type: str
    choices: [local, native, container]
    default: local
  world_size:
    description: Ranks (TP x PP). Above 1, one tritonserver per rank runs under mpirun; rank 0 serves, the
      others load only C(leader_models) (leader mode, as TRT-LLM's launch_triton_server.py does).
    type: int
    default: 1
  engine_dir:
    description: Engine directory; its config.json's tp x pp must equal C(world_size).
    type: path
  mpirun: {type: str, default: mpirun, description: "mpirun binary for world_size > 1."}
  leader_models: {type: list, elements: str, default: [tensorrt_llm], description: "Models the follower ranks load."}
  container_image:
    type: str
    description: Image for C(container), e.g. nvcr.io/nvidia/tritonserver:25.12-trtllm-python-py3.
  container_name: {type: str, description: "Container name (default trtsweep-<http_port>)."}
  docker: {type: str, default: docker, description: "docker CLI."}
  gpus: {type: str, default: all, description: "docker --gpus value."}
  visible_devices:
    type: str
    description:
      - GPUs the server may use, as CUDA_VISIBLE_DEVICES takes them (C(0,1) or GPU UUIDs). C(local) and C(native)
        get C(CUDA_VISIBLE_DEVICES); C(container) gets C(--gpus "device=...") instead of C(gpus). Null leaves
        the GPUs as they are.
  mounts: {type: list, elements: path, default: [], description: "Host paths mounted at the same path."}
  tritonserver:
    description: Binary for C(native).
    type: str
    default: tritonserver
  http_port: {type: int, default: 8000, description: "HTTP port."}
  grpc_port: {type: int, default: 8001, description: "gRPC port."}
  metrics_port: {type: int, default: 8002, description: "Metrics port."}
  bind_address: {type: str, default: 127.0.0.1, description: "Address the endpoints bind (loopback by default)."}
  log_file:
    description: Server log (state=started).
    type: path
  log_verbose: {type: int, default: 0, description: "tritonserver --log-verbose."}
  ready_timeout: {type: float, default: 300, description: "Seconds to wait for /v2/health/ready."}
  cache_dir:
    description: Where the local runtime keeps its backend directory.
    type: path
  lease_file:
    description:
      - The run's lease (C(state=started)); unset, the server runs until stopped.
    type: path
  lease_ttl: {type: float, default: 20, description: "Seconds without a new counter in the lease before the stop."}
  openai:
    description:
      - Serve with the PyTorch flow's OpenAI-compatible server instead of Triton (C(trtsweep.serve.openai_server)),
        C(trtllm-serve) for backend C(tensorrtllm), C(python -m trtsweep.serve.hf_openai) for backend C(hf), on
        C(http_port) alone, its command checked against the release's C(trtllm-serve) options. Its server id is the
        model id it answers on C(GET /v1/models), a per-start link under C(served_dir) to C(model).
    type: dict
    suboptions:
      backend: {type: str, choices: [tensorrtllm, hf], required: true, description: "What serves it."}
      release: {type: str, required: true, description: "TensorRT-LLM release (major.minor) of the options."}
      model: {type: path, required: true, description: "The checkpoint served."}
      options_file: {type: path, required: true, description: "LLM API options (--extra_llm_api_options)."}
      served_dir: {type: path, required: true, description: "Where the per-start model link is made."}
      tp: {type: int, default: 1, description: "--tp_size."}
      pp: {type: int, default: 1, description: "--pp_size."}
      ep: {type: int, description: "--ep_size."}
      executable: {type: str, default: trtllm-serve, description: "trtllm-serve of the install."}
attributes:
  check_mode: {support: full}
  diff_mode: {support: none}
"""

EXAMPLES = r"""
- name: Start Triton
  trtsweep_triton_server:
    state: started
    state_file: /srv/points/p1/triton_server.json
    model_repository: /srv/points/p1/triton_repo
    log_file: /srv/results/p1/triton_server.log
    grpc_port: 8001

- name: Stop it
  trtsweep_triton_server:
    state: stopped
    state_file: /srv/points/p1/triton_server.json
"""

RETURN = r"""
pid: {description: Server process id., returned: when started, type: int}
ready_after_s: {description: Seconds until ready., returned: when a server was started, type: float}
argv: {description: The command line (a list)., returned: when started, type: list, elements: str}
server_id:
  description:
    - The id this server answers server metadata with (C(name) of GET /v2; tritonserver C(--id)). Pass it to
      llm_perf (C(expect_server_id)) so the benchmark checks it measures this server.
  returned: when started (not in check mode before a start)
  type: str
  sample: trtsweep-5f0c2a9e81d44b3c
replaced:
  description: A running server named by the state file did not match (see C(msg)) and was stopped and replaced.
  returned: when started
  type: bool
finished:
  description: C(state=renewed) - the async job writing C(results_file) has finished.
  returned: when renewed
  type: bool
msg:
  description: What happened (already running; or what differed from the running server that was replaced).
  returned: always
  type: str
"""

from pathlib import Path

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.trtsweep_common import require_trtsweep, run_or_fail


def _spec(module):
    from trtsweep.serve.spec import from_params

    return run_or_fail(module, from_params, module.params)


def _running(state_file):
    """The server the state file names, if it is still running."""
    from trtsweep.serve.server import is_running
    from trtsweep.serve.spec import ServerState

    if not state_file.exists():
        return None
    old = ServerState.load(state_file)
    return old if is_running(old) else None


def _started(module):
    from trtsweep.serve import server
    from trtsweep.serve.command import build_command
    from trtsweep.serve.identity import adoption_differences
    from trtsweep.serve.probes import check_world_size

    p = module.params
    state_file = Path(p["state_file"])
    spec = _spec(module)
    old = _running(state_file)
    replaced = ""
    if old is not None:
        if not spec.model_repository.is_dir():
            module.fail_json(msg=f"model repository {spec.model_repository} does not exist")
        differences = run_or_fail(module, adoption_differences, old, spec)
        if not differences:
            module.exit_json(changed=False, pid=old.pid, argv=old.argv, server_id=old.server_id, replaced=False,
                             msg="already running")  # fmt: skip
        replaced = f"replaced the running server (pid {old.pid}, id {old.server_id!r}): " + "; ".join(differences)
        if module.check_mode:
            module.exit_json(changed=True, pid=old.pid, argv=old.argv, replaced=True, msg=replaced)
        run_or_fail(module, server.stop, old)
        module.warn(replaced)
    run_or_fail(module, check_world_size, spec, Path(p["engine_dir"]) if p["engine_dir"] else None)
    if module.check_mode:
        argv, _ = run_or_fail(module, build_command, spec)
        module.exit_json(changed=True, argv=argv, replaced=False, msg="would start")
    state = run_or_fail(module, server.start, spec, state_file)
    ready = run_or_fail(module, server.wait_ready, state, p["ready_timeout"])
    module.exit_json(changed=True, pid=state.pid, argv=state.argv, server_id=state.server_id,
                     ready_after_s=round(ready, 3), replaced=bool(replaced), msg=replaced or "started")  # fmt: skip


def _stopped(module):
    from trtsweep.serve import server
    from trtsweep.serve.spec import ServerState

    state_file = Path(module.params["state_file"])
    if not state_file.exists():
        module.exit_json(changed=False, msg="no server state file")
    state = ServerState.load(state_file)
    running = server.is_running(state)
    if module.check_mode:
        module.exit_json(changed=running, pid=state.pid, msg="would stop" if running else "not running")
    if running or state.container:  # a container outlives its killed docker CLI: removed by name
        run_or_fail(module, server.stop, state)
    state_file.unlink()
    module.exit_json(changed=running, pid=state.pid, msg="stopped" if running else "not running")


def main():
    module = AnsibleModule(
        argument_spec={
            "state": {"type": "str", "choices": ["started", "stopped"], "default": "started"},
            "state_file": {"type": "path", "required": True},
            "model_repository": {"type": "path"},
            "runtime": {"type": "str", "choices": ["local", "native", "container"], "default": "local"},
            "world_size": {"type": "int", "default": 1},
            "engine_dir": {"type": "path"},
            "mpirun": {"type": "str", "default": "mpirun"},
            "leader_models": {"type": "list", "elements": "str", "default": ["tensorrt_llm"]},
            "container_image": {"type": "str"},
            "container_name": {"type": "str"},
            "docker": {"type": "str", "default": "docker"},
            "gpus": {"type": "str", "default": "all"},
            "visible_devices": {"type": "str"},
            "mounts": {"type": "list", "elements": "path", "default": []},
            "tritonserver": {"type": "str", "default": "tritonserver"},
            "http_port": {"type": "int", "default": 8000},
            "grpc_port": {"type": "int", "default": 8001},
            "metrics_port": {"type": "int", "default": 8002},
            "bind_address": {"type": "str", "default": "127.0.0.1"},
            "log_file": {"type": "path"},
            "log_verbose": {"type": "int", "default": 0},
            "ready_timeout": {"type": "float", "default": 300.0},
            "cache_dir": {"type": "path"},
            "lease_file": {"type": "path"},
            "lease_ttl": {"type": "float", "default": 20.0},
            "openai": {
                "type": "dict",
                "options": {
                    "backend": {"type": "str", "choices": ["tensorrtllm", "hf"], "required": True},
                    "release": {"type": "str", "required": True},
                    "model": {"type": "path", "required": True},
                    "options_file": {"type": "path", "required": True},
                    "served_dir": {"type": "path", "required": True},
                    "tp": {"type": "int", "default": 1},
                    "pp": {"type": "int", "default": 1},
                    "ep": {"type": "int"},
                    "executable": {"type": "str", "default": "trtllm-serve"},
                },
            },
        },
        supports_check_mode=True,
    )
    require_trtsweep(module)
    {"started": _started, "stopped": _stopped}[module.params["state"]](module)


if __name__ == "__main__":
    main()
