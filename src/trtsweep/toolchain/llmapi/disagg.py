"""A disaggregated point's servers: context and generation `trtllm-serve` workers and the `trtllm-serve
disaggregated` proxy in front of them, per release (1.0, 1.1, 1.2), from the point's aggregated LLM API options.

    Shape.from_point(point["disaggregated"])   the shape: name, context / generation {tp, pp, instances}, transceiver
    workers(shape, release, options, gpus, host, ports)   every worker: role, GPUs, port, options file content, flags
    proxy_config(shape, workers, host, port)   the proxy's config file content
    proxy_argv(release, config_file)           `trtllm-serve disaggregated -c <config_file>`
    parse_proxy_config(config)                 the config read as the proxy's parser reads it (the stand-in proxy's)

Each worker runs `trtllm-serve <model> --backend pytorch --host H --port P --tp_size T --pp_size P [flags]
--extra_llm_api_options <file>` on its own GPUs (context workers first, instance by instance, then the generation
workers). Its options file is the point's options with the role's `tensor_parallel_size` / `pipeline_parallel_size`,
`cache_transceiver_config` (the shape's transceiver, `backend: DEFAULT` unless given: UCX in 1.0/1.1, NIXL in 1.2) and,
for context workers, `disable_overlap_scheduler: true`. In 1.0 and 1.1 trtllm-serve builds a `build_config` out of its
own --max_batch_size / --max_num_tokens / --max_seq_len flags, and BaseLlmArgs.set_runtime_knobs_from_build_config
sets the top-level values from it with the PyTorch backend, so those three keys move from the options file to flags
there; in 1.2 (no build_config in TorchLlmArgs) they stay top-level keys. The release's table names them
(args.table(release)['disaggregated']['worker_flags'], with its sources). Every options file is checked with
args.check_options and every flag against the release's `trtllm-serve serve` options; the proxy's argument against
its `disaggregated` options; the proxy config has `hostname`, `port`, `backend: pytorch` (inherited by both server
sections as an LLM API argument, as the examples write it) and `context_servers` / `generation_servers` with
`num_instances` and as many `host:port` urls.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trtsweep.errors import TrtsweepError
from trtsweep.toolchain.llmapi import args
from trtsweep.toolchain.llmapi import serve as llmapi_serve

ROLES = ("context", "generation")
SECTIONS = {"context": "context_servers", "generation": "generation_servers"}
DEFAULT_TRANSCEIVER = "DEFAULT"


def _fail(field: str, problem: str) -> TrtsweepError:
    return TrtsweepError(f"disaggregated {field}: {problem}")


def _count(field: str, value: Any, default: int | None = None) -> int:
    value = default if value is None else value
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise _fail(field, f"expected an integer >= 1, got {value!r}")
    return value


@dataclass(frozen=True)
class Role:
    tp: int
    pp: int
    instances: int

    @classmethod
    def from_dict(cls, field: str, value: Any) -> Role:
        if not isinstance(value, dict):
            raise _fail(field, f"expected a mapping with tp, pp and instances, got {value!r}")
        unknown = sorted(set(value) - {"tp", "pp", "instances"})
        if unknown:
            raise _fail(f"{field}.{unknown[0]}", "unknown key (expected tp, pp, instances)")
        return cls(_count(f"{field}.tp", value.get("tp")), _count(f"{field}.pp", value.get("pp"), 1),
                   _count(f"{field}.instances", value.get("instances"), 1))  # fmt: skip

    def label(self, letter: str) -> str:
        return f"{letter}{self.instances}x{self.tp}" + (f"p{self.pp}" if self.pp > 1 else "")

    @property
    def gpus_per_instance(self) -> int:
        return self.tp * self.pp


@dataclass(frozen=True)
class Shape:
    name: str
    context: Role
    generation: Role
    transceiver: dict[str, Any]

    @classmethod
    def from_point(cls, value: dict[str, Any]) -> Shape:
        """The shape of `point["disaggregated"]` (the planner's normalized dict)."""
        if not isinstance(value, dict):
            raise _fail("", f"expected a mapping with context and generation, got {value!r}")
        transceiver = value.get("transceiver") or {}
        if not isinstance(transceiver, dict):
            raise _fail("transceiver", f"expected a mapping, got {transceiver!r}")
        shape = cls(name="", context=Role.from_dict("context", value.get("context")),
                    generation=Role.from_dict("generation", value.get("generation")),
                    transceiver={"backend": DEFAULT_TRANSCEIVER, **transceiver})  # fmt: skip
        name = value.get("name") or shape.label()
        if not isinstance(name, str):
            raise _fail("name", f"expected a string, got {name!r}")
        return cls(name, shape.context, shape.generation, shape.transceiver)

    def role(self, role: str) -> Role:
        return self.context if role == "context" else self.generation

    def gpus(self) -> int:
        """Every worker's GPUs: instances x tp x pp of both roles."""
        return sum(self.role(r).instances * self.role(r).gpus_per_instance for r in ROLES)

    def label(self) -> str:
        return f"{self.context.label('c')}-{self.generation.label('g')}"

    def instances(self) -> int:
        return self.context.instances + self.generation.instances


@dataclass(frozen=True)
class Worker:
    role: str  # context | generation
    index: int  # the instance within its role
    tp: int
    pp: int
    gpus: tuple[int, ...]  # its GPUs (CUDA_VISIBLE_DEVICES); () on a CPU host
    port: int
    options: dict[str, Any]  # the worker's --extra_llm_api_options YAML content
    flags: list[str]  # trtllm-serve arguments after the model argument, checked against the release

    @property
    def name(self) -> str:
        return f"{self.role}{self.index}"

    def argv(self, release: str, model: str, options_file: str, executable: str = "trtllm-serve") -> list[str]:
        """The worker's command: `<executable> <model> <flags> --extra_llm_api_options <options_file>`."""
        return [executable, model, *self.flags, *llmapi_serve.option(release, "--extra_llm_api_options", options_file)]


def _split_gpus(shape: Shape, gpus: Sequence[int]) -> list[tuple[int, ...]]:
    """Each instance's GPUs: context instances first, in order, then generation ones; () each on a CPU host."""
    if not gpus:
        return [()] * shape.instances()
    if len(gpus) != shape.gpus():
        raise _fail("gpus", f"the shape {shape.label()} needs {shape.gpus()} GPUs, the point has {len(gpus)}")
    out, at = [], 0
    for role in ROLES:
        r = shape.role(role)
        for _ in range(r.instances):
            out.append(tuple(gpus[at : at + r.gpus_per_instance]))
            at += r.gpus_per_instance
    return out


def worker_options(shape: Shape, role: str, release: str, options: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """(options file content, flags taking the build_config keys) of a worker of `role`."""
    r = shape.role(role)
    out = copy.deepcopy(options)
    out.update(tensor_parallel_size=r.tp, pipeline_parallel_size=r.pp,
               cache_transceiver_config=copy.deepcopy(shape.transceiver))  # fmt: skip
    if role == "context":  # the context phase runs without the overlap scheduler (disaggregated serving's rule)
        out["disable_overlap_scheduler"] = True
    flags = llmapi_serve.build_config_flags(release, out)
    for key in args.table(release)["disaggregated"]["worker_flags"]:  # flags there, not top-level keys
        out.pop(key, None)
    args.check_options(release, out, prefix=f"disaggregated {role} worker")
    return out, flags


def workers(shape: Shape, release: str, options: dict[str, Any], gpus: Sequence[int], host: str,
            ports: Sequence[int]) -> list[Worker]:  # fmt: skip
    """Every worker of the shape (context ones first), each on its GPUs and port; `options`: the point's aggregated
    LLM API options."""
    if len(ports) != shape.instances():
        raise _fail("ports", f"the shape {shape.label()} has {shape.instances()} workers, got {len(ports)} ports")
    if len(set(ports)) != len(ports):
        raise _fail("ports", f"every worker needs a port of its own, got {list(ports)}")
    slices = iter(_split_gpus(shape, gpus))
    port = iter(ports)
    out = []
    for role in ROLES:
        r = shape.role(role)
        content, build_flags = worker_options(shape, role, release, options)
        for index in range(r.instances):
            at = next(port)
            given = (
                ("--backend", "pytorch"),
                ("--host", host),
                ("--port", at),
                ("--tp_size", r.tp),
                ("--pp_size", r.pp),
            )
            flags = [part for flag, value in given for part in llmapi_serve.option(release, flag, value)]
            flags += build_flags
            out.append(Worker(role, index, r.tp, r.pp, next(slices), at, copy.deepcopy(content), flags))
    return out


def _url_host(host: str) -> str:
    """The workers' host as the proxy's urls name it: the parser splits `host:port` on ':' into two parts."""
    host = {"0.0.0.0": "127.0.0.1", "": "127.0.0.1"}.get(host, host)
    if ":" in host:
        raise _fail("host", f"the proxy's urls are host:port split on ':' (no IPv6 address), got {host!r}")
    return host


def proxy_config(shape: Shape, workers: Sequence[Worker], host: str, port: int) -> dict[str, Any]:
    """The proxy's config (`trtllm-serve disaggregated -c`): it listens on host:port, its servers are `workers`."""
    config: dict[str, Any] = {"hostname": host, "port": port, "backend": "pytorch"}
    for role in ROLES:
        urls = [f"{_url_host(host)}:{w.port}" for w in workers if w.role == role]
        if len(urls) != shape.role(role).instances:
            raise _fail(role, f"{shape.role(role).instances} instances, {len(urls)} workers given")
        config[SECTIONS[role]] = {"num_instances": len(urls), "urls": urls}
    return config


def proxy_argv(release: str, config_file: Path, executable: str = "trtllm-serve") -> list[str]:
    return llmapi_serve.disaggregated_argv(release, str(config_file), executable)


@dataclass(frozen=True)
class ProxyConfig:
    """A proxy config as the proxy's parser reads it (disagg_utils.extract_disagg_cfg / extract_ctx_gen_cfgs)."""

    hostname: str
    port: int
    context_urls: list[str]
    generation_urls: list[str]
    inherited: dict[str, Any]  # the other top-level keys: both sections' LLM API arguments


def _urls(section: str, value: Any) -> list[str]:
    if not isinstance(value, dict):
        raise ValueError(f"{section}: expected a mapping with num_instances and urls, got {value!r}")
    count, urls = value.get("num_instances", 1), value.get("urls")
    if not isinstance(urls, list) or not urls:
        raise ValueError(f"{section}.urls: expected a list of host:port, got {urls!r} (no server to send to)")
    for url in urls:
        parts = url.split(":") if isinstance(url, str) else []
        if len(parts) != 2 or not parts[1].isdigit():
            raise ValueError(f"{section}.urls: expected host:port, got {url!r}")
    if len(urls) != count:
        raise ValueError(f"Number of hostnames ({len(urls)}) should be equal to the number of instances ({count})")
    return list(urls)


def parse_proxy_config(config: Any) -> ProxyConfig:
    """Read a proxy config as `trtllm-serve disaggregated` does (ValueError with its message when it cannot)."""
    if not isinstance(config, dict):
        raise ValueError(f"expected a mapping, got {config!r}")
    port = config.get("port", 8000)
    if not isinstance(port, int) or isinstance(port, bool):
        raise ValueError(f"port: expected an integer, got {port!r}")
    inherited = {k: v for k, v in config.items() if k not in ("hostname", "port", *SECTIONS.values())}
    sections = {}
    for role, section in SECTIONS.items():
        value = config.get(section) or {}
        for key, given in inherited.items():  # a top-level key is inherited; given in a section too, it must agree
            if isinstance(value, dict) and key in value and value[key] != given:
                raise ValueError(f"Parameter {key} is specified both in the top-level and in the {section} section, "
                                 "but with different values")  # fmt: skip
        sections[role] = _urls(section, value)
    return ProxyConfig(str(config.get("hostname", "localhost")), port, sections["context"], sections["generation"],
                       inherited)  # fmt: skip
