#!/usr/bin/python
# Copyright: trtsweep contributors
# Apache-2.0
"""Ansible module: start a Triton server for a model repository and wait until ready, or stop it."""

from __future__ import annotations

DOCUMENTATION = r"""
module: trtsweep_triton_server
short_description: Start (and wait for) or stop a Triton Inference Server by PID
description:
  - C(state=started) refuses ports already in use, starts tritonserver in its own process group, writes
    a state file (pid, process start time, ports, command), and waits for C(/v2/health/ready). If the
    server exits or is not ready in time it is stopped and the task fails with the last log line (and
    the log tail in C(details)).
  - C(state=stopped) stops the server named by the state file (TERM, then KILL), waits until its ports
    are free, and removes the state file. A PID reused by another process is never signalled.
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
  shm_size: {type: str, default: 2g, description: "docker --shm-size."}
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

- name: Stop Triton
  trtsweep_triton_server:
    state: stopped
    state_file: /srv/points/p1/triton_server.json
"""

RETURN = r"""
pid: {description: Server process id., returned: when started, type: int}
ready_after_s: {description: Seconds until ready., returned: when started, type: float}
argv: {description: The command line (a list)., returned: when started, type: list, elements: str}
"""

from pathlib import Path

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.trtsweep_common import require_trtsweep, run_or_fail


def _started(module, server):
    p = module.params
    state_file = Path(p["state_file"])
    if state_file.exists():
        old = server.ServerState.load(state_file)
        if server.is_running(old):
            module.exit_json(changed=False, pid=old.pid, argv=old.argv, msg="already running")
    if not p["model_repository"] or not p["log_file"]:
        module.fail_json(msg="state=started needs model_repository and log_file")
    spec = server.ServerSpec(
        model_repository=Path(p["model_repository"]),
        log_file=Path(p["log_file"]),
        runtime=p["runtime"],
        http_port=p["http_port"],
        grpc_port=p["grpc_port"],
        metrics_port=p["metrics_port"],
        bind_address=p["bind_address"],
        tritonserver=p["tritonserver"],
        log_verbose=p["log_verbose"],
    )
    if p["cache_dir"]:
        spec.cache_dir = Path(p["cache_dir"])
    spec.world_size, spec.mpirun, spec.leader_models = p["world_size"], p["mpirun"], p["leader_models"]
    if p["runtime"] == "container":
        if not p["container_image"]:
            module.fail_json(msg="runtime=container needs container_image")
        spec.container = server.ContainerSpec(
            image=p["container_image"],
            name=p["container_name"] or f"trtsweep-{p['http_port']}",
            docker=p["docker"],
            gpus=p["gpus"],
            shm_size=p["shm_size"],
            mounts=[m for m in [p["engine_dir"], *p["mounts"]] if m],
        )
    run_or_fail(module, server.check_world_size, spec, Path(p["engine_dir"]) if p["engine_dir"] else None)
    if module.check_mode:
        argv, _ = run_or_fail(module, server.build_command, spec)
        module.exit_json(changed=True, argv=argv)
    state = run_or_fail(module, server.start, spec, state_file)
    ready = run_or_fail(module, server.wait_ready, state, p["ready_timeout"])
    module.exit_json(changed=True, pid=state.pid, argv=state.argv, ready_after_s=round(ready, 3))


def _stopped(module, server):
    state_file = Path(module.params["state_file"])
    if not state_file.exists():
        module.exit_json(changed=False, msg="no server state file")
    state = server.ServerState.load(state_file)
    running = server.is_running(state)
    if module.check_mode:
        module.exit_json(changed=running, pid=state.pid)
    if running:
        run_or_fail(module, server.stop, state)
    state_file.unlink()
    module.exit_json(changed=running, pid=state.pid)


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
            "shm_size": {"type": "str", "default": "2g"},
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
        },
        supports_check_mode=True,
    )
    require_trtsweep(module)
    from trtsweep.serve import server

    if module.params["state"] == "started":
        _started(module, server)
    else:
        _stopped(module, server)


if __name__ == "__main__":
    main()
