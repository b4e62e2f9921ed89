"""The PyTorch flow's own axes of the sweep matrix: speculative decoding, attention data parallelism, MoE parallelism,
disaggregated serving.

Sweep keys (trtsweep.sweep.schema: Speculative, Moe), each a list whose values multiply the matrix like its other
axes, for the pytorch flow only:

- `speculative: [none, {name, decoding_type, max_draft_len, draft, options}, ...]`: a variant becomes the LLM API's
  `speculative_config` (`decoding_type` dispatches it, DecodingBaseConfig.from_dict; `options` any other field of
  that decoding config), checked against the release's table; `draft` (Eagle, DraftTarget) is the draft model, a Hub
  repository downloaded like the model, whose directory becomes the config's `speculative_model_dir`
  (`speculative_model` where the release names it so) on the host (trtsweep.toolchain.llmapi.options.with_draft).
- `attention_dp: [false, true]`: `enable_attention_dp` (each of the tp ranks takes its own requests through
  attention; the MoE layers stay parallel across them).
- `moe: [{ep, tp, backend, max_num_tokens}, ...]`: `moe_expert_parallel_size`, `moe_tensor_parallel_size` and
  `moe_config: {backend, max_num_tokens}`; TensorRT-LLM splits the tp ranks into moe tp x moe ep, so an entry
  measures only the parallelism entries whose tp is its tp x ep (the others are not combined with it).
- `disaggregated: [none, {name, context, generation, transceiver}, ...]`: trtsweep.sweep.disaggregated (a value
  takes its parallelism from its workers: planned once, not per parallelism entry; trtllm-serve points only).

The engine flow's points of a sweep are planned without the axes (trtllm-build's engines are built without them
here), as before; a sweep whose points are all the engine flow's is refused with them. What each value cannot take is
refused at plan time in one line naming the field: a decoding type the release or the PyTorch backend does not
have (Medusa and Lookahead are not the PyTorch backend's: their supports_backend), a draft where there is none to
give or none where one is needed, attention DP on one rank or on a dense model, MoE fields on a model whose config.json
names no experts, MTP on a checkpoint without MTP layers, a Blackwell-only MoE backend where placement.gpu_type names
another GPU (its points need sm100 GPUs: placement), a draft whose vocabulary is not the model's (the config checks
where the controller has config.json; plan_notes says what was left out); on the hf backend (the CPU bed's
stand-ins, one rank) n-gram and draft-model drafting only. A sweep without these keys plans exactly as before (no
key in its points, the same ids and hashes).
"""

from __future__ import annotations

import copy
import dataclasses
import itertools
import json
from dataclasses import dataclass
from typing import Any

from trtsweep.common import gpu_arch
from trtsweep.errors import TrtsweepError
from trtsweep.sweep import disaggregated as disagg
from trtsweep.toolchain.llmapi import args as llmapi_args
from trtsweep.toolchain.llmapi import options as llmapi_options

NONE = "none"
# the PyTorch backend's decoding types: each one's supports_backend("pytorch") (llm_args.py of 1.0 .. 1.2: Medusa's
# is `backend not in ("pytorch", "_autodeploy")`; NGram, DraftTarget, MTP and AUTO `backend == "pytorch"`; Eagle any)
PYTORCH_TYPES = ("Eagle", "MTP", "NGram", "DraftTarget", "AUTO")
NEEDS_DRAFT = ("Eagle", "DraftTarget")  # EagleDecodingConfig.validate: "Draft model must be provided for EAGLE"
NEEDS_DRAFT_LEN = ("Eagle", "NGram", "DraftTarget")
HF_TYPES = ("NGram", "DraftTarget")  # what the hf backend's stand-ins draft (trtsweep.serve.drafting)
# config.json keys that give a model's routed experts (Mixtral/Qwen-MoE, Qwen3-MoE/OLMoE, DeepSeek)
EXPERT_KEYS = ("num_local_experts", "num_experts", "n_routed_experts")
# config.json's MTP layers (DeepSeek-V3, GLM-4.5 style checkpoints): MTP drafts with them, and a model without them
# fails at load (MTPDecodingConfig reads num_nextn_predict_layers from the model's config)
MTP_KEY = "num_nextn_predict_layers"
# MoE backends whose kernels are Blackwell's (SM100 / SM103) only: TRTLLMGenFusedMoE (fused_moe_trtllm_gen.py: "SM100
# Blackwell only", SM120 and above refused) and CuteDslFusedMoE (fused_moe_cute_dsl.py: CuTe DSL kernels of SM100);
# on H100 / H200 (SM90) the server fails at its first forward. Their points need GPUs of trtsweep.fleet.placement's
# "sm100" architecture.
BLACKWELL_MOE = ("TRTLLM", "CUTEDSL")
AXIS_OPTIONS = ("speculative_config", "enable_attention_dp", "moe_expert_parallel_size", "moe_tensor_parallel_size",
                "moe_config")  # fmt: skip


def _fail(field: str, problem: str) -> TrtsweepError:
    return TrtsweepError(f"sweep field '{field}': {problem}")


@dataclass(frozen=True)
class Variant:
    """One speculative-decoding value: its name and LLM API config (without the draft's directory), its draft."""

    name: str
    config: dict[str, Any] | None  # None: no speculative decoding
    draft: dict[str, Any] | None  # {repo_id, revision}
    index: int


@dataclass(frozen=True)
class Combo:
    """One value of each axis a point takes (None: the sweep does not give that axis)."""

    speculative: Variant | None
    attention_dp: bool | None
    moe: dict[str, Any] | None
    moe_index: int | None
    disaggregated: disagg.Value | None = None  # None: aggregated (one server)


def variants(value: list[Any] | None) -> list[Variant | None]:
    """The sweep's `speculative:` list (schema-checked) as variants; [None] without the key."""
    if value is None:
        return [None]
    out: list[Variant | None] = []
    for index, item in enumerate(value):
        if item == NONE:
            out.append(Variant(NONE, None, None, index))
            continue
        config = {"decoding_type": item["decoding_type"], **(item.get("options") or {})}
        if item.get("max_draft_len") is not None:
            config["max_draft_len"] = item["max_draft_len"]
        draft = item.get("draft")
        out.append(Variant(item["name"], config, {"revision": None, **draft} if draft else None, index))
    return out


def combos(sweep: dict[str, Any]) -> list[Combo]:
    """Every (speculative, attention_dp, moe, disaggregated) value of the sweep, in the sweep's order."""
    adp: list[bool | None] = list(sweep["attention_dp"]) if sweep.get("attention_dp") is not None else [None]
    moe = sweep.get("moe")
    moes: list[tuple[int | None, dict[str, Any] | None]] = list(enumerate(moe)) if moe is not None else [(None, None)]
    shapes = disagg.values(sweep.get("disaggregated"))
    product = itertools.product(variants(sweep.get("speculative")), adp, moes, shapes)
    return [Combo(spec, dp, entry, index, value) for spec, dp, (index, entry), value in product]


def check_sweep(sweep: dict[str, Any], backend: str, used_flows: set[str], parallelism: list[tuple[int, int]],
                servers: list[str]) -> None:  # fmt: skip
    """What the sweep as a whole cannot take: the axes in the engine flow, on the hf backend's one rank, beside
    `pytorch.ep` or the same `llm_api:` keys, a MoE entry no parallelism entry or disaggregated value fits,
    disaggregated serving without trtllm-serve."""
    active = [key for key in ("speculative", "attention_dp", "moe", "disaggregated") if _active(sweep, key)]
    if active and "pytorch" not in used_flows:
        raise _fail(active[0], "an axis of the pytorch flow, and every point of this sweep is the engine flow's "
                               "(trtllm-build + Triton, planned without it): add flow: pytorch")  # fmt: skip
    if backend == "hf":
        for key in ("attention_dp", "moe"):
            if _active(sweep, key):
                raise _fail(key, "backend hf serves one rank; attention DP and MoE parallelism need tensorrtllm")
    if sweep.get("moe") is not None and (sweep.get("pytorch") or {}).get("ep") is not None:
        raise _fail("pytorch.ep", "moe: sets the expert parallelism of each point: give moe or pytorch.ep, not both")
    for key in AXIS_OPTIONS:
        if key in (sweep.get("llm_api") or {}) and _axis_of(key, sweep):
            raise _fail(f"llm_api.{key}", f"set by the sweep's {_axis_of(key, sweep)}: axis (each point's own value)")
    disagg.check_sweep(sweep, backend, servers, used_flows)
    shapes = [v for v in disagg.values(sweep.get("disaggregated")) if v is not None]
    tps = {tp for tp, _ in parallelism} | {min(disagg.roles_tp(v.shape)) for v in shapes
                                           if len(disagg.roles_tp(v.shape)) == 1}  # fmt: skip
    for index, entry in enumerate(sweep.get("moe") or []):
        if entry["ep"] * entry.get("tp", 1) not in tps:
            whose = "parallelism entry's or disaggregated value's" if shapes else "parallelism entry's"
            raise _fail(f"moe[{index}]", f"moe tp x ep = {entry['ep'] * entry.get('tp', 1)} is no {whose} tp "
                                         f"({', '.join(map(str, sorted(tps)))}): TensorRT-LLM splits the tp ranks into "
                                         "moe tp x moe ep")  # fmt: skip
    gpu_type = (sweep.get("placement") or {}).get("gpu_type")
    for index, entry in enumerate(sweep.get("moe") or []):
        backend_name = str(entry.get("backend") or "").upper()
        if backend_name in BLACKWELL_MOE and gpu_type and not gpu_arch.has_arch(str(gpu_type), "sm100"):
            raise _fail(f"moe[{index}].backend", f"{backend_name}'s MoE kernels are Blackwell's (SM100: "
                        f"{gpu_arch.ARCH_NAMES['sm100']}) only, and placement.gpu_type asks for {gpu_type}: use "
                        "CUTLASS (any GPU) there")  # fmt: skip
    moe_tps = {entry["ep"] * entry.get("tp", 1) for entry in sweep.get("moe") or []}
    for value in shapes if moe_tps else []:
        if disagg.roles_tp(value.shape) - moe_tps or len(disagg.roles_tp(value.shape)) > 1:
            tp = {role: value.shape[role]["tp"] for role in disagg.ROLES}
            raise _fail(f"disaggregated[{value.index}]", f"context tp {tp['context']} and generation tp "
                        f"{tp['generation']} fit no moe entry: every worker takes the point's moe layout, so both "
                        f"roles' tp must be one moe tp x ep ({', '.join(map(str, sorted(moe_tps)))})")  # fmt: skip
    for spec in variants(sweep.get("speculative")) if backend == "hf" else []:
        kind = decoding_type(spec)
        if kind is not None and kind not in HF_TYPES:
            raise _fail(f"speculative[{spec.index}].decoding_type", f"the hf backend's stand-ins draft by "
                        f"{', '.join(HF_TYPES)} only; {kind} needs tensorrtllm")  # fmt: skip


def decoding_type(spec: Variant | None) -> str | None:
    """The variant's decoding type (None: no speculative decoding)."""
    return spec.config["decoding_type"] if spec is not None and spec.config is not None else None


def _active(sweep: dict[str, Any], key: str) -> bool:
    """Whether an axis asks for anything beyond the default (speculative: [none] and attention_dp: [false] do not)."""
    value = sweep.get(key)
    if value is None:
        return False
    if key == "speculative":
        return any(item != NONE for item in value)
    if key == "attention_dp":
        return any(value)
    if key == "disaggregated":
        return disagg.active(sweep)
    return True


def _axis_of(option: str, sweep: dict[str, Any]) -> str | None:
    axis = {"speculative_config": "speculative", "enable_attention_dp": "attention_dp"}.get(option, "moe")
    return axis if sweep.get(axis) is not None else None


ENGINE = Combo(None, None, None, None)  # an engine-flow point: planned as without the axes


def of_point(axes: list[Combo], flow: str, server: str, tp: int, first: bool) -> list[Combo]:
    """The combinations a point of `flow`, `server` and `tp` ranks takes: the engine flow's points none of the axes
    (their ids, options and hashes as before); a MoE entry only where tp = moe tp x moe ep. A disaggregated value
    takes its parallelism from its workers: it comes once, with the `first` parallelism entry, where both its roles'
    tp fit the MoE entry; Triton serves aggregated only (its points take the other axes' values once each)."""
    if flow == "engine":
        return [ENGINE]
    if server != "trtllm-serve":
        out: list[Combo] = []
        for combo in (dataclasses.replace(c, disaggregated=None) for c in axes if _fits(c, {tp})):
            out += [] if combo in out else [combo]
        return out
    aggregated = [c for c in axes if c.disaggregated is None and _fits(c, {tp})]
    if not first:
        return aggregated
    shaped = [c for c in axes if c.disaggregated is not None and _fits(c, disagg.roles_tp(c.disaggregated.shape))]
    return aggregated + shaped


def _fits(combo: Combo, tps: set[int]) -> bool:
    return combo.moe is None or tps == {combo.moe["ep"] * combo.moe.get("tp", 1)}


def parallelism(combo: Combo, tp: int, pp: int) -> tuple[int, int]:
    """The point's tp and pp: the parallelism entry's, or a disaggregated value's generation workers'."""
    if combo.disaggregated is None:
        return tp, pp
    generation = combo.disaggregated.shape["generation"]
    return generation["tp"], generation["pp"]


def check_point(combo: Combo, release: str, tp: int) -> None:
    """The combination against the point's release (its decoding types and their fields, the transceiver) and its
    tp (a disaggregated value's: every worker's)."""
    value = combo.disaggregated
    if combo.attention_dp and value is not None and 1 in disagg.roles_tp(value.shape):
        role = next(r for r in disagg.ROLES if value.shape[r]["tp"] == 1)
        raise _fail("attention_dp", f"attention DP spreads requests over the tp ranks, and every worker takes it: "
                    f"disaggregated[{value.index}]'s {role} workers have tp 1 (give both roles tp > 1)")  # fmt: skip
    if combo.attention_dp and tp == 1:
        raise _fail("attention_dp", "attention DP spreads requests over the tp ranks: a tp 1 point measures the same "
                                    "as without it (give parallelism entries with tp > 1)")  # fmt: skip
    disagg.check_release(value, release)
    spec = combo.speculative
    if spec is None or spec.config is None:
        return
    field = f"speculative[{spec.index}]"
    kind = spec.config["decoding_type"]
    if not llmapi_args.decoding_fields(release, kind):
        raise _fail(f"{field}.decoding_type", f"TensorRT-LLM {release} has no {kind} decoding config")
    if kind not in PYTORCH_TYPES:
        takes = ", ".join(PYTORCH_TYPES)
        raise _fail(f"{field}.decoding_type", f"{kind} is not the PyTorch backend's; it takes {takes}")
    if kind in NEEDS_DRAFT_LEN and "max_draft_len" not in spec.config:
        raise _fail(f"{field}.max_draft_len", f"{kind} drafts up to max_draft_len tokens a step: give it")
    if (spec.draft is None) == (kind in NEEDS_DRAFT):
        need = "needs a draft model (draft: {repo_id: ...})" if kind in NEEDS_DRAFT else "drafts without a draft model"
        raise _fail(f"{field}.draft", f"{kind} {need}")
    config = dict(spec.config)
    if spec.draft is not None:
        config[llmapi_options.draft_field(release, kind)] = "/draft"  # the host's: llmapi_options.with_draft
    try:
        llmapi_args.check_speculative(release, config, "speculative_config")
    except TrtsweepError as exc:
        raise _fail(field, str(exc)) from exc
    ngram = spec.config.get("max_matching_ngram_size")
    if kind == "NGram" and not (isinstance(ngram, int) and not isinstance(ngram, bool) and ngram > 0):
        raise _fail(f"{field}.options.max_matching_ngram_size", "NGram matches up to max_matching_ngram_size tokens of "
                    f"the context: give it (an integer > 0, got {ngram!r}); TensorRT-LLM asserts it when the server "
                    "starts")  # fmt: skip


def benchmark(combo: Combo, tp: int, value: dict[str, Any]) -> dict[str, Any]:
    """The point's benchmark: with attention DP each of the tp ranks takes its own requests and `max_batch_size` is a
    rank's, so the sweep's load is a rank's: the concurrency levels, a load search's max and num_requests multiplied
    by tp (`levels_scaled_by`), the load the point exists for (measured unscaled, it ran at 1/tp of it). A
    disaggregated point warms up with at least one request per (context, generation) instance pair
    (`warmup_pairs`): the KV-cache transfer between two workers connects on its first use, which a measured request
    must not pay (the proxy deals requests to each role's instances in turn)."""
    out = copy.deepcopy(value)
    if combo.disaggregated is not None:
        shape = combo.disaggregated.shape
        pairs = shape["context"]["instances"] * shape["generation"]["instances"]
        if pairs > 1:
            out["warmup_requests"] = max(int(out.get("warmup_requests") or 0), pairs)
            out["warmup_pairs"] = pairs
    if not combo.attention_dp or tp <= 1:
        return out
    if out.get("concurrency"):
        out["concurrency"] = [level * tp for level in out["concurrency"]]
    if out.get("load"):
        out["load"]["max"] = out["load"]["max"] * tp
    if out.get("num_requests"):
        out["num_requests"] *= tp
    out["levels_scaled_by"] = tp
    return out


def options(combo: Combo) -> dict[str, Any]:
    """The LLM API options of the combination (none for an axis the sweep does not give)."""
    out: dict[str, Any] = {}
    if combo.speculative is not None and combo.speculative.config is not None:
        out["speculative_config"] = dict(combo.speculative.config)
    if combo.attention_dp is not None:
        out["enable_attention_dp"] = combo.attention_dp
    if combo.moe is not None:
        out["moe_expert_parallel_size"] = combo.moe["ep"]
        out["moe_tensor_parallel_size"] = combo.moe.get("tp", 1)
        moe_config = {k: combo.moe[k] for k in ("backend", "max_num_tokens") if combo.moe.get(k) is not None}
        if moe_config:
            out["moe_config"] = moe_config
    return out


def id_part(combo: Combo) -> str:
    """What a point id says of the combination: `_moe-ep4tp2[-cutlass]`, `_adp`, `_disagg-<label>`, `_spec-<name>`
    (nothing for an axis left out, attention DP off, aggregated serving or no speculative decoding; the variant
    last, as the report's comparisons read it)."""
    part = ""
    if combo.moe is not None:
        backend = f"-{combo.moe['backend'].lower()}" if combo.moe.get("backend") else ""
        part += f"_moe-ep{combo.moe['ep']}tp{combo.moe.get('tp', 1)}{backend}"
    if combo.attention_dp:
        part += "_adp"
    part += disagg.id_part(combo.disaggregated)
    if combo.speculative is not None and combo.speculative.config is not None:
        part += f"_spec-{combo.speculative.name}"
    return part


def point_fields(combo: Combo) -> dict[str, Any]:
    """The point's record of the combination (results.csv's speculative, attention_dp, moe_ep, disaggregated
    columns): a disaggregated point's normalized value (trtsweep.sweep.disaggregated.normalize)."""
    out: dict[str, Any] = {}
    if combo.speculative is not None:
        out["speculative"] = combo.speculative.name
        if combo.speculative.draft is not None:
            out["draft_model"] = dict(combo.speculative.draft)
    if combo.attention_dp is not None:
        out["attention_dp"] = combo.attention_dp
    if combo.moe is not None:
        out["moe_ep"], out["moe_tp"] = combo.moe["ep"], combo.moe.get("tp", 1)
    if combo.disaggregated is not None:
        out["disaggregated"] = copy.deepcopy(combo.disaggregated.shape)
    return out


# -- what the model's config.json says (read where the controller has it: a local directory or the hub cache) -----


def read_config(repo_id: str, revision: str | None, model_dirs: dict[str, str] | None = None,
                name: str | None = None) -> dict[str, Any] | None:  # fmt: skip
    """The model's config.json from `model_dirs[name]` (the sweep's search.model_dirs) or the local hub cache,
    never the network; None where neither has it (the checks that need it are then left to the host)."""
    from pathlib import Path

    if model_dirs and name in model_dirs:
        path: Any = Path(model_dirs[name]) / "config.json"
    else:
        from huggingface_hub import try_to_load_from_cache

        path = try_to_load_from_cache(repo_id, "config.json", revision=revision)
    if not isinstance(path, str | Path) or not Path(path).is_file():
        return None
    try:
        config = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return config if isinstance(config, dict) else None


def experts(config: dict[str, Any]) -> int | None:
    """The model's routed experts per MoE layer (None: a dense model)."""
    for key in EXPERT_KEYS:
        value = config.get(key) or (config.get("text_config") or {}).get(key)
        if isinstance(value, int) and value > 1:
            return value
    return None


def plan_notes(points: list[dict[str, Any]], model_dirs: dict[str, str] | None = None) -> list[str]:
    """One line per model whose points a config.json check needed (MoE, attention DP, MTP) where the controller does
    not have it: those checks were left out (the host's server start is then the first to tell)."""
    asked: dict[str, dict[str, None]] = {}
    for point in points:
        kind = ((point.get("llm_api") or {}).get("speculative_config") or {}).get("decoding_type")
        needs = {"experts (moe)": "moe_ep" in point, "experts (attention_dp)": bool(point.get("attention_dp")),
                 f"MTP layers ({MTP_KEY})": kind == "MTP"}  # fmt: skip
        model = point["model"]
        for what in (w for w, on in needs.items() if on):
            if read_config(model["repo_id"], model.get("revision"), model_dirs, model.get("name")) is None:
                asked.setdefault(model["repo_id"], {})[what] = None
    return [f"model config of {repo}: not on this machine, so its {', '.join(what)} were not checked (give "
            "search.model_dirs, or have it in the hub cache)" for repo, what in asked.items()]  # fmt: skip


def mtp_layers(config: dict[str, Any]) -> int:
    """The checkpoint's MTP layers (0: none)."""
    value = config.get(MTP_KEY) or (config.get("text_config") or {}).get(MTP_KEY)
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def needs_config(combo: Combo) -> bool:
    """Whether a check of the combination reads the model's config.json (MoE, attention DP, MTP, a draft's)."""
    spec = combo.speculative
    kind = decoding_type(spec)
    return combo.moe is not None or bool(combo.attention_dp) or kind == "MTP" or bool(spec and spec.draft)


def resources(combo: Combo) -> dict[str, Any]:
    """What the combination asks of a point's GPUs beyond their number: a Blackwell MoE backend, their architecture
    (trtsweep.fleet.placement: a host without such GPUs does not fit the point)."""
    backend = str((combo.moe or {}).get("backend") or "").upper()
    return {"gpu_arch": "sm100"} if backend in BLACKWELL_MOE else {}


def vocab_size(config: dict[str, Any]) -> int | None:
    value = config.get("vocab_size") or (config.get("text_config") or {}).get("vocab_size")
    return value if isinstance(value, int) else None


def check_model(model: dict[str, Any], config: dict[str, Any] | None, draft_config: dict[str, Any] | None,
                combo: Combo) -> None:  # fmt: skip
    """MoE fields on a dense model, a draft whose vocabulary (tokenizer) differs from the model's: where the
    configs are at hand."""
    if config is None:
        return
    if combo.moe is not None and experts(config) is None:
        keys = ", ".join(EXPERT_KEYS)
        raise _fail(f"moe[{combo.moe_index}]", f"{model['repo_id']} is a dense model (its config.json names none of "
                    f"{keys}): MoE parallelism has no experts to split")  # fmt: skip
    if combo.attention_dp and experts(config) is None:
        raise _fail("attention_dp", f"{model['repo_id']} is a dense model (its config.json names none of "
                    f"{', '.join(EXPERT_KEYS)}): attention DP is for MoE models (each rank its own requests through "
                    "attention, the experts spread across the ranks); a dense model is served by plain tp")  # fmt: skip
    spec = combo.speculative
    kind = decoding_type(spec)
    if kind == "MTP" and not mtp_layers(config):
        raise _fail(f"speculative[{spec.index}].decoding_type", f"MTP drafts with the checkpoint's own MTP layers, "
                    f"and {model['repo_id']}'s config.json has no {MTP_KEY} (DeepSeek-V3-style checkpoints have "
                    "them): TensorRT-LLM fails at model load; use NGram, or Eagle / DraftTarget with a draft "
                    "model")  # fmt: skip
    if spec is None or spec.draft is None or draft_config is None:
        return
    ours, theirs = vocab_size(config), vocab_size(draft_config)
    if ours is not None and theirs is not None and ours != theirs:
        raise _fail(f"speculative[{spec.index}].draft", f"{spec.draft['repo_id']} has a vocabulary of {theirs} tokens, "
                    f"{model['repo_id']} of {ours}: a draft must share the model's tokenizer")  # fmt: skip
