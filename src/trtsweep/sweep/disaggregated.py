"""The PyTorch flow's disaggregated axis: context (prefill) and generation (decode) workers on separate GPUs.

Sweep key (trtsweep.sweep.schema.Disaggregated), a list whose values multiply the matrix like the other axes:

    disaggregated:
      - none                                           # aggregated: one trtllm-serve, the baseline
      - name: c1g2                                     # optional; default the label, c1x1-g2x1
        context:    {tp: 1, pp: 1, instances: 1}       # pp and instances default 1
        generation: {tp: 1, pp: 1, instances: 2}
        transceiver: {backend: DEFAULT, max_tokens_in_buffer: 4096}   # cache_transceiver_config; optional

A value takes its parallelism from its workers: it is planned once per (model, precision, batch size, lengths,
streaming), not once per `parallelism:` entry, and its point's `tp` / `pp` are the generation workers'. The point
carries the normalized value (`point["disaggregated"]`: name, context and generation {tp, pp, instances},
transceiver {backend, ...given}); its id gains `_disagg-<label>`, label `c{instances}x{tp}[p{pp}]-g{...}` (pp only
when > 1); `resources.gpus` counts every worker's GPUs (on one host), so tokens/s per GPU divides by all of them.
An aggregated point (`none`, or a sweep without the key) has no such key: its id, options and hash are as before.

The point's LLM API options (`llm_api`) are every worker's: a speculative variant, attention DP and a MoE layout
apply to the context and generation workers alike (trtsweep.toolchain.llmapi.disagg writes each worker's file from
them with its own tp/pp and the transceiver). So a MoE entry is combined with a value whose roles both have tp =
moe tp x moe ep, and attention DP with one whose roles both have tp > 1.

Refused at plan time in one line naming the field: the axis in a sweep of engine-flow points only, or with no
trtllm-serve among the pytorch flow's servers (Triton's llmapi model has no disaggregated mode; a Triton point is
planned aggregated only, as engine-flow points are planned without the axes); a transceiver backend or field the
release's CacheTransceiverConfig does not have (args/<release>.json: DEFAULT, UCX, NIXL, MPI in 1.0 and 1.1,
MOONCAKE too in 1.2; lower-case names were 1.0 release candidates' only); `llm_api.cache_transceiver_config` beside
the axis; the MPI transceiver (it needs every worker's ranks in one MPI world, and each worker is its own trtllm-serve
process here); on the hf backend (the CPU bed's stand-ins, one rank each) a worker of more than one rank. tp, pp and
instances below 1 are the schema's (positive integers). A value that needs more GPUs than a host has is refused by
placement (trtsweep.fleet.placement.check_fit names the point and its GPUs).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from trtsweep.errors import TrtsweepError
from trtsweep.sweep.schema import disagg_label
from trtsweep.toolchain.llmapi import args as llmapi_args

NONE = "none"
ROLES = ("context", "generation")
DEFAULT_BACKEND = "DEFAULT"


def _fail(field: str, problem: str) -> TrtsweepError:
    return TrtsweepError(f"sweep field '{field}': {problem}")


@dataclass(frozen=True)
class Value:
    """One disaggregated value of the axis: its index in the sweep's list and its normalized shape."""

    index: int
    shape: dict[str, Any]


def normalize(item: dict[str, Any]) -> dict[str, Any]:
    """A schema-checked value as the point carries it: every role's tp, pp and instances, the transceiver's backend."""
    roles = {role: {"tp": item[role]["tp"], "pp": item[role].get("pp", 1),
                    "instances": item[role].get("instances", 1)} for role in ROLES}  # fmt: skip
    given = {k: v for k, v in (item.get("transceiver") or {}).items() if v is not None}
    return {"name": item.get("name") or disagg_label(roles["context"], roles["generation"]), **roles,
            "transceiver": {"backend": DEFAULT_BACKEND, **given}}  # fmt: skip


def values(value: list[Any] | None) -> list[Value | None]:
    """The sweep's `disaggregated:` list as values (None: aggregated, `none`); [None] without the key."""
    if value is None:
        return [None]
    return [None if item == NONE else Value(index, normalize(item)) for index, item in enumerate(value)]


def label(shape: dict[str, Any]) -> str:
    return disagg_label(shape["context"], shape["generation"])


def gpus(shape: dict[str, Any]) -> int:
    """Every worker's GPUs: sum over the roles of instances x tp x pp."""
    return sum(shape[r]["instances"] * shape[r]["tp"] * shape[r]["pp"] for r in ROLES)


def point_gpus(shape: dict[str, Any], backend: str, gpus_per_point: int) -> int:
    """The point's `resources.gpus`: every worker's GPUs; on the hf backend each worker (one rank) takes
    `placement.gpus_per_point` (0: a CPU point)."""
    if backend == "tensorrtllm":
        return gpus(shape)
    return sum(shape[role]["instances"] for role in ROLES) * gpus_per_point


def active(sweep: dict[str, Any]) -> bool:
    """Whether the sweep asks for a disaggregated value (`[none]` alone does not)."""
    return any(item != NONE for item in sweep.get("disaggregated") or [])


def check_sweep(sweep: dict[str, Any], backend: str, servers: list[str], used_flows: set[str]) -> None:
    """What the sweep as a whole cannot take: disaggregated serving without trtllm-serve, beside its own LLM API
    key, or on the hf backend's one-rank workers."""
    if not active(sweep) or "pytorch" not in used_flows:
        return  # engine flow only: pytorch_axes.check_sweep refuses every axis alike
    if "trtllm-serve" not in servers:
        raise _fail("disaggregated", "trtllm-serve only (Triton's llmapi model has no disaggregated mode): add "
                                     "trtllm-serve to servers")  # fmt: skip
    if "cache_transceiver_config" in (sweep.get("llm_api") or {}):
        raise _fail("llm_api.cache_transceiver_config", "set by the sweep's disaggregated: axis (each value's "
                                                        "transceiver)")  # fmt: skip
    for item in values(sweep["disaggregated"]):
        if item is None or backend != "hf":
            continue
        for role in ROLES:
            if item.shape[role]["tp"] * item.shape[role]["pp"] != 1:
                raise _fail(f"disaggregated[{item.index}].{role}", "backend hf serves one rank a worker; use tp: 1, "
                                                                   "pp: 1 (instances may be more)")  # fmt: skip


def check_release(item: Value | None, release: str) -> None:
    """The value's transceiver against the release's CacheTransceiverConfig (its backends and fields)."""
    if item is None:
        return
    field = f"disaggregated[{item.index}].transceiver"
    fields = llmapi_args.table(release).get("objects", {}).get("CacheTransceiverConfig")
    if fields is None:
        raise _fail(field, f"TensorRT-LLM {release}'s table has no CacheTransceiverConfig to check it against")
    transceiver = item.shape["transceiver"]
    for key in transceiver:
        if key not in fields:
            known = ", ".join(sorted(fields))
            raise _fail(f"{field}.{key}", f"TensorRT-LLM {release}'s CacheTransceiverConfig has no such field; it "
                                          f"has {known}")  # fmt: skip
    backends = fields["backend"]["choices"]
    if transceiver["backend"] not in backends:
        hint = " (upper case: lower-case names were 1.0 release candidates')" if (
            transceiver["backend"].upper() in backends) else ""  # fmt: skip
        raise _fail(f"{field}.backend", f"TensorRT-LLM {release} takes one of {', '.join(backends)}, got "
                                        f"{transceiver['backend']!r}{hint}")  # fmt: skip
    if transceiver["backend"] == "MPI":
        raise _fail(f"{field}.backend", "MPI moves the KV cache between ranks of one MPI world (the disaggregated "
                    "MPI-worker launch, deprecated), and trtsweep starts each worker as its own trtllm-serve process: "
                    f"use {', '.join(b for b in backends if b != 'MPI')}")  # fmt: skip
    try:
        llmapi_args.check_options(release, {"cache_transceiver_config": transceiver})
    except TrtsweepError as exc:
        raise _fail(field, str(exc)) from exc


def roles_tp(shape: dict[str, Any]) -> set[int]:
    return {shape[role]["tp"] for role in ROLES}


def id_part(item: Value | None) -> str:
    return "" if item is None else f"_disagg-{label(item.shape)}"
