"""The two TensorRT-LLM flows a sweep point can take, and the servers that serve it.

- `engine` (TensorRT-LLM 0.8 .. 1.2): convert_checkpoint.py / quantize.py -> trtllm-build -> Triton's
  `inflight_batcher_llm` repository (ensemble + tensorrt_llm model), served by Triton.
- `pytorch` (TensorRT-LLM 1.0 and later): a Hugging Face checkpoint (ModelOpt-quantized when the precision asks
  for it) served by the PyTorch backend with LLM API options instead of an engine: by Triton's `llmapi` model
  (`tensorrt_llm/1/model.yaml`) and/or by `trtllm-serve` (OpenAI-compatible).

Sweep keys (planning.py): `flow: engine | pytorch | [engine, pytorch]` (the sweep's, a model entry's over it),
`servers: [triton, trtllm-serve]` (the pytorch flow's servers; the engine flow is served by Triton),
`pytorch:` (trtsweep.sweep.schema.Pytorch: KV cache, CUDA graphs, overlap scheduler, chunked prefill, attention
backend, EP) and
`llm_api:` (any other LLM API option, checked by name and type against the release's table). A point of the
pytorch flow carries its LLM API options, built and checked at plan time (llmapi.options), and the release
they were checked against. With the hf backend (no TensorRT-LLM) the options are checked against HF_RELEASE,
the newest release trtsweep has a table of, and its servers are trtsweep's transformers counterparts.
"""

from __future__ import annotations

from typing import Any

from trtsweep.errors import TrtsweepError
from trtsweep.toolchain import versions
from trtsweep.toolchain.llmapi import args as llmapi_args
from trtsweep.toolchain.llmapi import options as llmapi_options

FLOWS = ("engine", "pytorch")
SERVERS = ("triton", "trtllm-serve")
HF_RELEASE = "1.2"
# precisions of the pytorch flow (tensorrtllm): the HF checkpoint's own dtype, or a ModelOpt quantization
PYTORCH_PRECISIONS = ("bf16", "fp16", "fp8", "nvfp4", "int4_awq", "w4a8_awq")  # no int8_sq: modelopt.py says why
UNQUANTIZED_DTYPE = {"bf16": "bfloat16", "fp16": "float16"}


def _fail(field: str, problem: str) -> TrtsweepError:
    return TrtsweepError(f"sweep field '{field}': {problem}")


# The sweep's schema (trtsweep.sweep.schema) has checked these keys' types and values: what follows normalizes them.


def parse_flows(value: str | list[str]) -> list[str]:
    """`flow: engine`, `flow: pytorch` or a list of both (each point then exists once per flow), in FLOWS order."""
    items = value if isinstance(value, list) else [value]
    return [flow for flow in FLOWS if flow in items]


def parse_servers(value: list[str] | None) -> list[str]:
    return ["triton"] if value is None else [server for server in SERVERS if server in value]


def variants(flows: list[str], servers: list[str], field: str) -> list[tuple[str, str]]:
    """(flow, server) pairs of one configuration: the engine flow on Triton, the pytorch flow on each server."""
    out = []
    for flow in flows:
        if flow == "engine":
            if "triton" not in servers:
                raise _fail(field, "the engine flow is served by Triton only: add triton to servers")
            out.append((flow, "triton"))
        else:
            out += [(flow, server) for server in servers]
    return out


def id_suffix(flow: str, server: str) -> str:
    """Engine points keep their ids (results of earlier runs resume); pytorch points say flow and server."""
    return "" if flow == "engine" else f"_pytorch-{'serve' if server == 'trtllm-serve' else 'triton'}"


def release_key(version: str) -> tuple[int, int]:
    match = versions.VERSION_RE.match(str(version).strip())
    if not match:
        raise _fail("trtllm.version", f"expected a TensorRT-LLM release such as 0.11.0 or 1.2.0rc7, got {version!r}")
    return int(match.group(1)), int(match.group(2))


def release(backend: str, version: str | None, flow: str, field: str) -> str | None:
    """The release a point's flow is checked against: the engine flow's flag tables (0.8 .. 1.2) or the PyTorch
    flow's LLM API tables (1.0 ..); a version without the flow fails naming both."""
    if backend != "tensorrtllm":
        return HF_RELEASE if flow == "pytorch" else None
    assert version is not None
    major, minor = release_key(version)
    name = f"{major}.{minor}"
    if flow == "engine":
        if not versions.FIRST <= (major, minor) <= versions.LAST:
            first, last = versions.FIRST, versions.LAST
            hint = "; use flow: pytorch" if name in llmapi_args.releases() or (major, minor) > last else ""
            raise _fail(field, f"TensorRT-LLM {version} has no engine flow (trtllm-build): that flow is "
                               f"{first[0]}.{first[1]} .. {last[0]}.{last[1]}{hint}")  # fmt: skip
        return name
    known = llmapi_args.releases()
    if name not in known:
        tables = ", ".join(known)
        raise _fail(field, f"TensorRT-LLM {version} has no PyTorch flow trtsweep has a table of (LLM API tables: "
                           f"{tables}); use flow: engine for releases before 1.0")  # fmt: skip
    return name


def check_precision(backend: str, flow: str, precision: str, kv_cache_dtype: str | None) -> None:
    if backend != "tensorrtllm" or flow != "pytorch":
        return
    if precision not in PYTORCH_PRECISIONS:
        takes = ", ".join(PYTORCH_PRECISIONS)
        raise _fail("precisions", f"{precision!r} has no PyTorch-flow counterpart; that flow takes {takes} "
                                  "(give the engine flow its own model entry)")  # fmt: skip
    if kv_cache_dtype not in (None, "fp8"):
        raise _fail(
            "trtllm.kv_cache_dtype", f"the PyTorch flow quantizes the KV cache to fp8 only, not {kv_cache_dtype}"
        )


def llm_api_options(point: dict[str, Any], release_name: str, pytorch: dict[str, Any],
                    llm_api: dict[str, Any]) -> dict[str, Any]:  # fmt: skip
    """The point's LLM API options (the `--extra_llm_api_options` file / model.yaml), checked against the release."""
    if "dtype" in llm_api:
        raise _fail("llm_api.dtype", "set by the point's precision (precisions:), so the point is what its id says")
    settings = {k: v for k, v in pytorch.items() if k != "ep"}
    if point["backend"] == "tensorrtllm":
        dtype = UNQUANTIZED_DTYPE.get(point["precision"], "auto")  # quantized: the checkpoint's own dtype
        kv_dtype = point["trtllm"].get("kv_cache_dtype")
    else:
        dtype, kv_dtype = point["precision"], None
    spec = llmapi_options.PointOptions(
        max_batch_size=point["max_batch_size"], max_input_len=point["max_input_len"],
        max_output_len=point["max_output_len"], tp=point["tp"], pp=point["pp"], ep=pytorch.get("ep"),
        kv_cache_dtype=kv_dtype, llm_api={"dtype": dtype, **llm_api}, **settings,
    )  # fmt: skip
    try:
        return llmapi_options.build(release_name, spec)
    except (TrtsweepError, TypeError) as exc:
        raise _fail("pytorch" if "pytorch." in str(exc) else "llm_api", str(exc)) from exc


# an ensemble input (the engine flow's names, which sweeps use) -> its name in the OpenAI request body
OPENAI_FIELDS = {"runtime_top_k": "top_k", "runtime_top_p": "top_p", "random_seed": "seed", "stop_words": "stop"}
EXCLUDE_INPUT = "sampling_param_exclude_input_from_output"
# ... and in the llmapi model, where it is not sampling_param_<name>
LLMAPI_INPUTS = {"runtime_top_k": "sampling_param_top_k", "runtime_top_p": "sampling_param_top_p",
                 "random_seed": "sampling_param_seed", "seed": "sampling_param_seed",
                 "stop_words": "sampling_param_stop"}  # fmt: skip


def request_inputs(server: str, release: str, inputs: dict[str, Any], field: str) -> dict[str, Any]:
    """A pytorch-flow point's request inputs under the names its server takes: a sweep names them as the engine
    flow's ensemble does (top_k, temperature, random_seed, ...), so one sweep measures both flows alike.
    trtllm-serve: the OpenAI body field; Triton's llmapi model: `sampling_param_<name>` (checked against the
    release's recorded llmapi tensors, or the newest record when the release has none)."""
    if server == "trtllm-serve":
        return {OPENAI_FIELDS.get(k, k): v for k, v in inputs.items()}
    record = llmapi_args.table(release).get("llmapi_model", {}).get("inputs") or llmapi_args.table(
        HF_RELEASE)["llmapi_model"]["inputs"]  # fmt: skip
    names = {t["name"] for t in record}
    out = {}
    for key, value in inputs.items():
        name = key if key in names else LLMAPI_INPUTS.get(key, f"sampling_param_{key}")
        if name not in names:
            raise _fail(f"{field}.{key}", f"the llmapi model (TensorRT-LLM {release}) has no input {key!r} or {name!r}")
        out[name] = value
    if EXCLUDE_INPUT in names:  # the llmapi model answers prompt + output unless told (the ensemble: output only)
        out.setdefault(EXCLUDE_INPUT, True)
    return out
