"""The sweep file's schema, declared once: typed pydantic models of every key the planner reads.

`validate` checks a sweep (the mapping under `trtsweep_sweep:`) against `Sweep` before `planning.expand` reads it
and turns the first problem into one line, `sweep field '<dotted path>': expected <what>, got <value>`, where
<what> is read from the JSON Schema of the field (the same schema editors get from `sweep.schema.json`, written
by `trtsweep schema`). What one field cannot say alone stays with the planner, after this: a precision against
the backend and flow, `trtllm.version` against the releases trtsweep has tables of, `triton:` against the serving
release's repository parameters, `pytorch:` / `llm_api:` against its LLM API, request inputs against its ensemble.

The sweep file is data, so its values are taken as YAML gives them (strict: `"10"` is not a number, `true` is not
1); a valid sweep is returned unchanged (defaults are filled in by the planner, as before).
"""

from __future__ import annotations

import functools
import keyword
import math
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Discriminator,
    Field,
    GetJsonSchemaHandler,
    Tag,
    ValidationError,
    WithJsonSchema,
    model_validator,
)
from pydantic_core import core_schema as cs

from trtsweep.errors import TrtsweepError
from trtsweep.perf import search
from trtsweep.sweep.flows import PYTORCH_PRECISIONS
from trtsweep.toolchain.precisions import KV_CACHE_DTYPES
from trtsweep.toolchain.precisions import PRECISIONS as TRTLLM_PRECISIONS
from trtsweep.toolchain.versions import FAMILIES

JSON_SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"
HF_PRECISIONS = ("float32", "bfloat16", "float16", "int8")
ALL_PRECISIONS = tuple(dict.fromkeys((*HF_PRECISIONS, *TRTLLM_PRECISIONS, *PYTORCH_PRECISIONS)))
ACCURACY_METRICS = ("rougeL", "rouge1", "rouge2", "bleu", "chrf", "exact", "contains", "corpus_bleu", "corpus_chrf")
NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]*$"
INPUT_NAME_PATTERN = r"^[A-Za-z_][A-Za-z0-9_]*$"


# -- value types -------------------------------------------------------------------------------------------------


def _no_control_characters(value: str | None) -> str | None:
    bad = next((c for c in value or "" if ord(c) < 0x20 or ord(c) == 0x7F), None)
    if bad is not None:
        raise ValueError(f"{value!r} contains the control character {bad!r}")
    return value


def _unique(value: list[Any]) -> list[Any]:
    if len(set(value)) != len(value):
        raise ValueError(f"expected a list without repeats, got {value!r}")
    return value


def _as_list(value: Any) -> Any:
    return value if isinstance(value, list) else [value]


class _OneOrMany:
    """A value or a list of values: validated as the list, shown to editors as either."""

    def __get_pydantic_json_schema__(self, schema: cs.CoreSchema, handler: GetJsonSchemaHandler) -> dict[str, Any]:
        listed = handler(schema)
        return {"anyOf": [listed["items"], listed]}


INPUT_SCALAR: dict[str, Any] = {"anyOf": [{"type": "boolean"}, {"type": "number"}, {"type": "string", "minLength": 1}]}
INPUT_VALUE_SCHEMA: dict[str, Any] = {
    "anyOf": [*INPUT_SCALAR["anyOf"], {"type": "array", "minItems": 1, "items": INPUT_SCALAR}],
    "description": "one value, or a list of values of one type (one tensor of that many elements)",
}


def _input_value(value: Any) -> Any:
    """A request input passed as llm-perf --extra-inputs name:value,...: it must survive that."""
    items = value if isinstance(value, list) else [value]
    if any(isinstance(i, float) and math.isnan(i) for i in items):
        raise ValueError("NaN is not a request input value")
    scalars = all(isinstance(i, str | int | float | bool) and i != "" for i in items)
    if not items or not scalars or len({type(i) for i in items}) > 1:
        expected = "a number, boolean or non-empty string, or a non-empty list of one of them"
        raise ValueError(f"expected {expected}, got {value!r}")
    return value


Text = Annotated[str, AfterValidator(_no_control_characters)]
PathText = Annotated[str, Field(min_length=1), AfterValidator(_no_control_characters)]
PositiveInt = Annotated[int, Field(gt=0)]
Seconds = Annotated[float, Field(gt=0, allow_inf_nan=False)]
Flow = Literal["engine", "pytorch"]
Flows = Annotated[
    list[Flow], BeforeValidator(_as_list), Field(min_length=1, json_schema_extra={"uniqueItems": True}),
    AfterValidator(_unique), _OneOrMany(),
]  # fmt: skip
Servers = Annotated[
    list[Literal["triton", "trtllm-serve"]], Field(min_length=1, json_schema_extra={"uniqueItems": True}),
    AfterValidator(_unique),
]  # fmt: skip
InputName = Annotated[str, Field(pattern=INPUT_NAME_PATTERN)]
InputValue = Annotated[Any, AfterValidator(_input_value), WithJsonSchema(INPUT_VALUE_SCHEMA)]
ExtraInputs = Annotated[dict[InputName, InputValue], Field(json_schema_extra={"additionalProperties": False})]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class _At(ValueError):
    """A model's own check between fields, about the field at `path` (relative to the model): the one-line error
    names that field."""

    def __init__(self, path: tuple[str | int, ...], problem: str) -> None:
        super().__init__(problem)
        self.path = path


# -- the sweep ---------------------------------------------------------------------------------------------------


class ModelEntry(_Strict):
    """One model of the sweep (each is one value of the matrix's model axis)."""

    repo_id: Text = Field(pattern="/", description="Hugging Face repository, owner/name")
    name: str | None = Field(
        None, pattern=NAME_PATTERN,
        description="short name in point ids and results (default: the repo's name, lower-cased)",
    )  # fmt: skip
    revision: Text | None = Field(
        None, description="branch, tag or commit of the repository (null: the default branch)"
    )
    flow: Flows | None = Field(None, description="this model's flows, over the sweep's `flow:`")
    extra_inputs: ExtraInputs | None = Field(
        None, description="request inputs of this model's points, over `benchmark.extra_inputs`"
    )


class Parallelism(_Strict):
    tp: PositiveInt = Field(1, description="tensor-parallel ranks")
    pp: PositiveInt = Field(1, description="pipeline-parallel ranks")


class Lengths(_Strict):
    input: PositiveInt = Field(description="max input tokens (the engine's max_input_len)")
    output: PositiveInt = Field(description="max output tokens (the engine's max_output_len)")


class Trtllm(_Strict):
    """The TensorRT-LLM installation a tensorrtllm sweep builds with (all points share it)."""

    version: str = Field(
        None, description="TensorRT-LLM version of the build container / install, e.g. 0.11.0 (required)"
    )
    family: Literal[FAMILIES] = Field(  # type: ignore[valid-type]
        None, description="model family of convert_checkpoint.py: llama | qwen (required)"
    )
    dir: PathText | None = Field(
        None, description="TensorRT-LLM source tree holding examples/ (convert_checkpoint.py, quantize.py)"
    )
    python: PathText | None = Field(None, description="python of that install")
    runtime: Literal["native", "container", "pyxis"] = Field(
        "native",
        description="native | container | pyxis (build steps: pyxis on a Slurm allocation; the Triton runtime comes "
        "from trtsweep_triton_runtime)",
    )
    container_image: PathText | None = Field(None, description="TRT-LLM (Triton) image for the container runtime")
    kv_cache_dtype: Literal[KV_CACHE_DTYPES] | None = Field(  # type: ignore[valid-type]
        None, description="int8 | fp8 KV cache, or null"
    )
    calib_size: PositiveInt | None = Field(None, description="calibration samples (quantize.py / SmoothQuant)")
    calibrate_on_prompts: bool = Field(
        False, description="calibrate on the benchmark's own prompts instead of the tool's default dataset"
    )
    modelopt_dir: PathText | None = Field(
        None,
        description="pytorch flow: ModelOpt's checkout holding examples/llm_ptq (quantizes fp8, nvfp4, int4_awq, ...)",
    )


class Pytorch(_Strict):
    """The PyTorch flow's LLM API settings (null: the release's default); checked against the release's table."""

    max_num_tokens: PositiveInt | None = Field(
        None, description="tokens one forward pass may batch (null: the release's default)"
    )
    kv_cache_free_gpu_memory_fraction: float | None = Field(
        None, description="share of free GPU memory the KV cache takes"
    )
    enable_block_reuse: bool | None = Field(None, description="KV-cache block reuse across requests")
    cuda_graph_batch_sizes: list[PositiveInt] | None = Field(
        None, description="batch sizes CUDA graphs are captured for (a list; [] captures none)"
    )
    disable_overlap_scheduler: bool | None = Field(None, description="turn the overlap scheduler off")
    enable_chunked_prefill: bool | None = Field(None, description="chunked prefill")
    attn_backend: str | None = Field(None, description="attention backend, e.g. TRTLLM | FLASHINFER")
    ep: PositiveInt | None = Field(None, description="MoE expert parallelism (moe_expert_parallel_size)")
    enable_iter_perf_stats: bool = Field(
        True,
        description="per-iteration stats (batch, queue, KV cache) that llm-perf reads from trtllm-serve's /metrics "
        "each level (default true; false saves their small cost)",
    )


class DraftModel(_Strict):
    """A speculative variant's draft model: downloaded like the model (hub cache, by content)."""

    repo_id: Text = Field(pattern="/", description="Hugging Face repository, owner/name (EAGLE-3 head, small model)")
    revision: Text | None = Field(None, description="branch, tag or commit (null: the default branch)")


class Speculative(_Strict):
    """One speculative-decoding variant of the PyTorch flow: the LLM API's speculative_config
    (trtsweep.sweep.pytorch_axes), checked against the release's decoding configs."""

    name: str = Field(pattern=NAME_PATTERN, description="in point ids (_spec-<name>) and results.csv's speculative")
    decoding_type: Literal["Eagle", "MTP", "NGram", "DraftTarget", "AUTO"] = Field(
        description="Eagle (EAGLE-3 on the PyTorch backend) | MTP | NGram | DraftTarget | AUTO"
    )
    max_draft_len: PositiveInt | None = Field(None, description="draft tokens a step (Eagle, NGram, DraftTarget)")
    draft: DraftModel | None = Field(None, description="Eagle, DraftTarget: the draft model")
    options: dict[str, Any] | None = Field(
        None, description="any other field of the release's decoding config (max_matching_ngram_size, "
        "eagle3_one_model, num_nextn_predict_layers, ...)",
    )  # fmt: skip


def _unique_names(value: list[Any]) -> list[Any]:
    names = [item if isinstance(item, str) else item.name for item in value]
    if len(set(names)) != len(names):
        raise ValueError(f"expected distinct names, got {names!r}")
    return value


def _speculative_kind(value: Any) -> str:
    return "variant" if isinstance(value, dict | Speculative) else "none"


SpeculativeItem = Annotated[
    Annotated[Literal["none"], Tag("none")] | Annotated[Speculative, Tag("variant")],
    Discriminator(_speculative_kind),
]  # a mapping is a variant, anything else must be "none": each error is about the one it was meant as
Speculatives = Annotated[list[SpeculativeItem], Field(min_length=1), AfterValidator(_unique_names)]


class Moe(_Strict):
    """One MoE layout of the PyTorch flow: the tp ranks split into moe tp x moe ep."""

    ep: PositiveInt = Field(description="expert-parallel ranks (moe_expert_parallel_size)")
    tp: PositiveInt = Field(1, description="tensor-parallel ranks within each expert (moe_tensor_parallel_size)")
    backend: Literal["CUTLASS", "CUTEDSL", "WIDEEP", "TRTLLM", "DEEPGEMM", "VANILLA", "TRITON"] | None = Field(
        None, description="moe_config.backend (null: the release's default, CUTLASS; TRITON from 1.1)"
    )
    max_num_tokens: PositiveInt | None = Field(None, description="moe_config.max_num_tokens")


class DisaggRole(_Strict):
    """One role's workers of a disaggregated value: `instances` trtllm-serve workers of tp x pp GPUs each."""

    tp: PositiveInt = Field(description="tensor-parallel ranks of each worker (its --tp_size)")
    pp: PositiveInt = Field(1, description="pipeline-parallel ranks of each worker (its --pp_size)")
    instances: PositiveInt = Field(1, description="workers of this role (the proxy's num_instances)")


class Transceiver(BaseModel):
    """The workers' cache_transceiver_config (the KV cache sent from context to generation workers); a key other
    than these two is checked against the release's CacheTransceiverConfig at plan time."""

    model_config = ConfigDict(extra="allow", strict=True)

    backend: str = Field(
        "DEFAULT", pattern=r"^[A-Za-z]+$",
        description="DEFAULT | UCX | NIXL | MPI, as the release names them (DEFAULT: UCX in 1.0 and 1.1, NIXL in 1.2)",
    )  # fmt: skip
    max_tokens_in_buffer: PositiveInt | None = Field(
        None, description="tokens the transfer buffer holds (at least the longest input is best)"
    )


def disagg_label(context: dict[str, Any], generation: dict[str, Any]) -> str:
    """`c{instances}x{tp}[p{pp}]-g{instances}x{tp}[p{pp}]` (pp only when > 1): a disaggregated value in point ids."""

    def part(role: dict[str, Any]) -> str:
        pp = role.get("pp", 1)
        return f"{role.get('instances', 1)}x{role['tp']}" + (f"p{pp}" if pp > 1 else "")

    return f"c{part(context)}-g{part(generation)}"


class Disaggregated(_Strict):
    """One disaggregated value of the PyTorch flow: context and generation workers (trtllm-serve each) behind
    `trtllm-serve disaggregated` (trtsweep.sweep.disaggregated)."""

    name: str | None = Field(
        None, pattern=NAME_PATTERN, description="the value's name (default: its label, e.g. c1x1-g2x1)"
    )
    context: DisaggRole = Field(description="the context (prefill) workers")
    generation: DisaggRole = Field(description="the generation (decode) workers")
    transceiver: Transceiver | None = Field(None, description="cache_transceiver_config of every worker")


def _disagg_kind(value: Any) -> str:
    return "value" if isinstance(value, dict | Disaggregated) else "none"


def _distinct_values(value: list[Any]) -> list[Any]:
    """Point ids name a disaggregated value by its workers' label, results by its name (default the label): two
    values with the same workers, or the same name, would share them."""
    labels: dict[str, int] = {}
    names: dict[str, int] = {}
    for index, item in enumerate(value):
        if isinstance(item, str):  # none
            keys = [(names, item, "value")]
        else:
            label = disagg_label(item.context.model_dump(), item.generation.model_dump())
            keys = [(labels, label, "workers"), (names, item.name or label, "name")]
        for seen, key, what in keys:
            if key in seen:
                raise _At((index,), f"the same {what} ({key}) as [{seen[key]}]: point ids and results name a value "
                                    "by its workers and its name, so each value needs its own")  # fmt: skip
            seen[key] = index
    return value


DisaggregatedItem = Annotated[
    Annotated[Literal["none"], Tag("none")] | Annotated[Disaggregated, Tag("value")],
    Discriminator(_disagg_kind),
]  # a mapping is a value, anything else must be "none"
Disaggregateds = Annotated[list[DisaggregatedItem], Field(min_length=1), AfterValidator(_distinct_values)]


SEARCH_LIMITS = search.KEYS  # the slo keys llm-perf's capacity search judges each level by


class Load(_Strict):
    """A capacity search instead of fixed levels: llm-perf raises the concurrency level by level, up to `max`, and
    narrows down to the highest one whose level meets the sweep's `slo:` limits. (llm-perf itself also searches a
    request rate, `--search-variable request_rate`; the sweep's report keys a point's levels by concurrency, so a
    sweep searches concurrency.)"""

    search: Literal["slo"] = Field(description="slo: the highest load within the sweep's slo: limits")
    variable: Literal["concurrency"] = Field(description="concurrency (closed loop: requests in flight)")
    max: float = Field(gt=0, allow_inf_nan=False, description="the highest concurrency tried (a whole number)")
    max_levels: PositiveInt = Field(8, description="levels measured at most, each of num_requests requests")

    @model_validator(mode="after")
    def _whole_concurrency(self) -> Load:
        if self.variable == "concurrency" and not float(self.max).is_integer():
            raise _At(("max",), f"expected a whole number (variable concurrency: requests in flight), got {self.max!r}")
        return self


class SharedPrefix(_Strict):
    """Prefixes shared by the requests (llm-perf --shared-prefix-count/--shared-prefix-tokens): record i is sent
    with prefix i mod count before its own text (a chat record: as its system message)."""

    count: PositiveInt = Field(description="distinct prefixes")
    tokens: PositiveInt = Field(description="tokens of each prefix, with the model's tokenizer")


class Trace(_Strict):
    """A trace replayed instead of the concurrency list (llm-perf --trace): its requests at their own times, with
    prompts of their token lengths made with the model's tokenizer (the prompts file is not sent)."""

    path: PathText = Field(
        pattern=r"\S",
        description="Mooncake JSON lines ({timestamp (ms), input_length, output_length, hash_ids}) or an Azure LLM "
        "inference CSV (TIMESTAMP, ContextTokens, GeneratedTokens); a relative path starts at the sweep file's "
        "directory",
    )
    format: Literal["auto", "mooncake", "azure"] = Field("auto", description="auto: .csv is azure, else mooncake")
    speed: Annotated[list[Seconds], BeforeValidator(_as_list), Field(min_length=1), _OneOrMany()] = Field(
        [1.0],
        description="time scale, a level each (2: twice as fast; 1: the trace's own times); a number or a list",
    )  # fmt: skip
    block_size: PositiveInt = Field(512, description="mooncake: tokens per hash id (equal ids, equal prefix blocks)")


class Conversations(_Strict):
    """Multi-turn conversations instead of the prompts file (llm-perf --conversations): each turn sent with its
    history once the answer before it ended; the concurrency is conversations in flight, num_requests and
    warmup_requests count conversations."""

    path: PathText = Field(
        pattern=r"\S",
        description="JSON lines, a conversation each: {conversation: [{user, reference, max_tokens}, ...], system, id} "
        "or {messages: [...]} (user and assistant alternating; an assistant message is the recorded answer); a "
        "relative path starts at the sweep file's directory",
    )
    history: Literal["served", "recorded"] = Field(
        "served", description="the answers in a turn's history: the server's own (served) or the recorded ones"
    )
    think_time_ms: float = Field(0, ge=0, allow_inf_nan=False, description="mean delay between an answer and the "
                                 "next turn, ms (normal, clipped at 0, seeded by seed)")  # fmt: skip
    think_time_std_ms: float = Field(0, ge=0, allow_inf_nan=False, description="standard deviation of the think time")


WORKLOAD_ALONE = {  # a trace replays its own requests at its own times: levels or shared prefixes beside it are refused
    "if": {"properties": {"trace": {"type": "object"}}, "required": ["trace"]},
    "then": {"not": {"anyOf": [{"required": [key]} for key in ("concurrency", "load", "shared_prefix")]}},
}
CONVERSATIONS_ALONE = {  # conversations run closed loop over their own turns: a search, a trace or prefixes beside them
    "if": {"properties": {"conversations": {"type": "object"}}, "required": ["conversations"]},
    "then": {"not": {"anyOf": [{"required": [key]} for key in ("load", "trace", "shared_prefix")]}},
}
LOAD_ALONE = {  # a load search chooses its levels: an explicit concurrency list beside it is refused
    "if": {"properties": {"load": {"type": "object"}}, "required": ["load"]},
    "then": {"not": {"required": ["concurrency"]}},
}


def _length_spec(value: str) -> str:
    from trtsweep.perf.dataset import parse_lengths  # llm-perf's own parser of --synthetic-*-tokens

    parse_lengths(value)  # ValueError: its message is the field's one-line error
    return value


LengthSpec = Annotated[str, AfterValidator(_length_spec)]


class Synthetic(_Strict):
    """Synthetic prompts instead of the prompts file (llm-perf --synthetic-*): made with the model's tokenizer to
    token lengths drawn from distributions, or from a data set's real (input, output) token counts."""

    input: LengthSpec | None = Field(
        None, description="prompt tokens: normal:MEAN[,STD] | lognormal:MEDIAN,SIGMA | uniform:LO,HI | fixed:N"
    )
    output: LengthSpec | None = Field(None, description="output tokens, in the same forms (default normal:128)")
    lengths_from: PathText | None = Field(
        None,
        description="a prompts file ({input, output} JSON lines) whose records' token counts are drawn instead; a "
        "relative path starts at the sweep file's directory",
    )
    count: PositiveInt | None = Field(None, description="prompts made (default 100; with lengths_from one per record)")

    @model_validator(mode="after")
    def _one_source(self) -> Synthetic:
        if (self.input is None) == (self.lengths_from is None):
            raise _At(("input",), "give the prompt lengths as input (with output) or lengths_from, one of them")
        if self.lengths_from is not None and self.output is not None:
            raise _At(("output",), "lengths_from gives the output lengths too: give no output beside it")
        return self


class Benchmark(_Strict):
    """How llm-perf measures every point (left out: llm-perf's own defaults)."""

    model_config = ConfigDict(json_schema_extra={"allOf": [LOAD_ALONE, WORKLOAD_ALONE, CONVERSATIONS_ALONE]})

    protocol: Literal["grpc", "http", "openai"] = Field(
        "grpc",
        description="Triton's grpc or http endpoint; openai only where every point is trtllm-serve's (whose "
        "points are measured over its OpenAI endpoint whatever this says)",
    )
    concurrency: list[PositiveInt] = Field(
        [1], min_length=1, description="closed-loop concurrency levels, each measured in turn"
    )
    input_data: PathText = Field(
        pattern=r"\S",
        description="jsonl prompts file ({'input': ..., 'output': ...} or {'messages': ...} per line); a relative "
        "path starts at the sweep file's directory",
    )
    num_requests: PositiveInt | None = Field(None, description="measured requests per level (null: one per record)")
    warmup_requests: int = Field(1, ge=0, description="requests per level excluded from the numbers")
    max_tokens: PositiveInt | None = Field(
        None,
        description="fixed output budget (null: the record's max_tokens, else the reference output's token count, "
        "else 128)",
    )
    chat_template: bool = Field(False, description="wrap inputs with the tokenizer's chat template")
    seed: int = Field(0, description="seed of the request order")
    extra_inputs: ExtraInputs = Field(
        {}, description="extra request inputs of every point, name -> value, e.g. {top_k: 1} (the ensemble's names)"
    )
    request_timeout: Seconds = Field(600, description="seconds per request")
    stall_timeout: float = Field(
        60, ge=0, allow_inf_nan=False,
        description="seconds without a finished request before a level is given up (0: no stall check)",
    )  # fmt: skip
    connect_timeout: Seconds = Field(10, description="seconds to reach the server")
    load: Load | None = Field(
        None,
        description="a capacity search instead of the concurrency list: the highest load within the sweep's slo: "
        "limits (needs slo:)",
    )

    shared_prefix: SharedPrefix | None = Field(
        None, description="prefixes shared by the requests, each before a record's own text (null: none)"
    )
    trace: Trace | None = Field(
        None, description="replay a trace at its own times instead of the concurrency list (null: the prompts file)"
    )
    conversations: Conversations | None = Field(
        None, description="multi-turn conversations instead of the prompts file (null: the prompts file)"
    )

    synthetic: Synthetic | None = Field(
        None, description="synthetic prompts of drawn token lengths instead of the prompts file (null: the file)"
    )

    @model_validator(mode="after")
    def _load_or_concurrency(self) -> Benchmark:
        if self.synthetic is not None:
            for other in ("trace", "conversations"):
                if other in self.model_fields_set:
                    raise _At(("synthetic",), f"{other} brings its own prompts: give synthetic or {other}, not both")
        if self.load is not None and "concurrency" in self.model_fields_set:
            raise _At(("load",), "a load search chooses its own levels: give load or concurrency, not both")
        if self.trace is not None:
            for other in ("concurrency", "load", "shared_prefix"):
                if other in self.model_fields_set:
                    raise _At(("trace",), f"a trace replays its own requests at its own times: give trace or {other}, "
                              "not both")  # fmt: skip
        if self.conversations is not None:
            for other in ("load", "trace", "shared_prefix"):
                if other in self.model_fields_set:
                    raise _At(("conversations",), f"conversations run closed loop over their own turns: give "
                              f"conversations or {other}, not both")  # fmt: skip
        return self


class Placement(_Strict):
    """Where points run (see trtsweep.fleet.placement)."""

    mode: Literal["exclusive", "pack"] = Field(
        "exclusive", description="exclusive: one point per host at a time | pack: side by side"
    )
    gpus_per_point: int = Field(0, ge=0, description="backend hf only: GPUs an hf point takes (0 = CPU point)")
    gpu_type: str | None = Field(None, pattern=r"\S", description="substring of the GPU name a point needs, e.g. H100")
    min_gpu_memory_gb: float | None = Field(None, gt=0, description="smallest GPU memory (GiB) a point needs")
    weights: dict[str, Annotated[float, Field(gt=0)]] | None = Field(
        None, description="point-id glob -> expected work (default 1.0 per point; the last matching glob wins)"
    )


class Slo(_Strict):
    """Service-level objectives the report's verdict judges the measured rows by (trtsweep.sweep.slo)."""

    ttft_p99_ms: float = Field(None, ge=0, description="time to first token, 99th percentile (ms)")
    tpot_p99_ms: float = Field(None, ge=0, description="time per output token (AIPerf's ITL), 99th percentile (ms)")
    e2e_p99_ms: float = Field(None, ge=0, description="end-to-end latency, 99th percentile (ms)")
    min_success_rate: float = Field(None, ge=0, le=1, description="succeeded / requests of the level")
    max_accuracy_drop: float = Field(
        None, ge=0, le=1,
        description="accuracy_metric may fall at most this far below the same model at the sweep's highest precision "
        "(at the same concurrency)",
    )  # fmt: skip
    min_accuracy: float = Field(None, ge=0, le=1, description="and never below this")
    accuracy_metric: Literal[ACCURACY_METRICS] = Field(  # type: ignore[valid-type]
        "rougeL", description="the accuracy column judged (default rougeL)"
    )
    target_request_rate: float = Field(
        None, gt=0, allow_inf_nan=False,
        description="requests per second to serve (not a per-row limit): the report sizes each configuration with a "
        "capacity (benchmark.load) in replicas and GPUs",
    )  # fmt: skip


class Search(_Strict):
    """How the configurations (the matrix's points) are measured: each at the full benchmark (grid), by successive
    halving, or in AIConfigurator's predicted order (trtsweep.search.strategy); auto (the default) takes the
    cheaper estimate of grid and halving. halving, predicted and a budget rank configurations by their capacity:
    they need benchmark.load (without it, auto is grid)."""

    strategy: Literal["auto", "grid", "halving", "predicted"] = Field(
        "auto", description="auto: the cheaper estimate of grid and halving, saying why | grid: every configuration "
        "| halving: short screening rounds drop the worse half | predicted: AIConfigurator's best first, until the "
        "measured best beats every remaining prediction",
    )  # fmt: skip
    keep: float = Field(0.5, gt=0, lt=1, description="halving: the fraction of configurations a screening round keeps")
    finalists: PositiveInt = Field(
        2, description="halving: configurations the last round measures at the full benchmark"
    )
    screening: float = Field(
        0.125, gt=0, le=0.5,
        description="halving: the first screening round's requests per level, a fraction of the benchmark's "
        "(doubling each round, at most 0.5)",
    )  # fmt: skip
    margin: float = Field(0.1, ge=0, description="predicted: how far the measured best must beat every prediction left")
    batch: PositiveInt | None = Field(
        None, description="predicted: configurations measured per round (null: as many as the fleet runs at once)"
    )
    budget_gpu_minutes: float | None = Field(
        None, gt=0, allow_inf_nan=False,
        description="a ceiling on the whole search: each round, the first included, is trimmed to what is left of it, "
        "the best predicted or screened configurations first (null: none)",
    )  # fmt: skip
    model_dirs: dict[str, PathText] | None = Field(
        None,
        description="predicted: model name -> a directory on the controller holding its config.json (default: "
        "config.json alone fetched from the Hub); a relative path starts at the sweep file's directory",
    )
    predictor: str = Field(
        "aiconfigurator",
        pattern=r"^\S+$",
        description="predicted: the AIConfigurator command (aiconfigurator, aisimulate)",
    )


TRTLLM_REQUIRED = {
    "if": {"properties": {"backend": {"const": "tensorrtllm"}}, "required": ["backend"]},
    "then": {"required": ["trtllm"], "properties": {"trtllm": {"type": "object", "required": ["version", "family"]}}},
    "else": {"properties": {"trtllm": {"anyOf": [{"type": "null"}, {"type": "object", "maxProperties": 0}]}}},
}


SEARCH_NEEDS_LOAD = {  # a search that ranks configurations (or is bounded by a budget) ranks them by their capacity
    "if": {
        "properties": {"search": {"type": "object", "anyOf": [
            {"properties": {"strategy": {"enum": ["halving", "predicted"]}}, "required": ["strategy"]},
            {"properties": {"budget_gpu_minutes": {"type": "number"}}, "required": ["budget_gpu_minutes"]},
        ]}},
        "required": ["search"],
    },
    "then": {"properties": {"benchmark": {"required": ["load"]}}},
}  # fmt: skip
LOAD_NEEDS_SLO = {
    "if": {
        "properties": {"benchmark": {"properties": {"load": {"type": "object"}}, "required": ["load"]}},
        "required": ["benchmark"],
    },
    "then": {
        "required": ["slo"],
        "properties": {"slo": {"type": "object", "anyOf": [{"required": [key]} for key in SEARCH_LIMITS]}},
    },
}


class Sweep(_Strict):
    """One sweep: the matrix of models x precisions x parallelism x max batch sizes x lengths x streaming."""

    model_config = ConfigDict(
        title="trtsweep sweep", json_schema_extra={"allOf": [TRTLLM_REQUIRED, LOAD_NEEDS_SLO, SEARCH_NEEDS_LOAD]}
    )

    name: str = Field(pattern=NAME_PATTERN, description="the sweep's name: results/<name>/")
    backend: Literal["hf", "tensorrtllm"] = Field("hf", description="hf (transformers, no GPU needed) | tensorrtllm")
    flow: Flows = Field(
        "engine", description="engine | pytorch | [engine, pytorch]: TensorRT-LLM's flows (each point once per flow)"
    )
    servers: Servers | None = Field(
        None, description="the pytorch flow's servers (default [triton]); the engine flow is served by Triton"
    )
    pytorch: Pytorch | None = Field(None, description="the PyTorch flow's LLM API settings")
    llm_api: dict[str, Any] | None = Field(
        None, description="pytorch flow: any other LLM API option -> value, checked against the release's table"
    )
    speculative: Speculatives | None = Field(
        None, description="pytorch flow: speculative-decoding variants, a matrix axis (none among them: without)"
    )
    attention_dp: Annotated[list[bool], Field(min_length=1), AfterValidator(_unique)] | None = Field(
        None, description="pytorch flow: enable_attention_dp values, a matrix axis (e.g. [false, true])"
    )
    moe: Annotated[list[Moe], Field(min_length=1)] | None = Field(
        None, description="pytorch flow: MoE layouts (moe tp x ep = the point's tp), a matrix axis"
    )
    disaggregated: Disaggregateds | None = Field(
        None, description="pytorch flow, trtllm-serve: aggregated (none) and disaggregated context/generation workers, "
        "a matrix axis; a value takes its parallelism from its workers",
    )  # fmt: skip
    trtllm: Trtllm | None = Field(None, description="tensorrtllm only: the TensorRT-LLM installation")
    triton: dict[str, Any] | None = Field(
        None,
        description="engine flow: extra triton_repo parameters for every point (checked against the serving "
        "release's repository: trtsweep.triton.repository)",
    )
    models: list[ModelEntry] = Field(min_length=1, description="one or more models")
    precisions: list[Literal[ALL_PRECISIONS]] = Field(  # type: ignore[valid-type]
        min_length=1,
        description="hf: float32 | bfloat16 | float16 | int8 (weight-only, CPU); tensorrtllm: the engine flow's "
        "quantizations, the pytorch flow's dtypes and ModelOpt quantizations",
    )
    parallelism: list[Parallelism] = Field(min_length=1, description="tp x pp layouts (hf: one rank)")
    max_batch_sizes: list[PositiveInt] = Field(min_length=1, description="engine / server max batch sizes")
    lengths: list[Lengths] = Field(
        min_length=1, description="engine limits (max_input_len / output); hf: one entry (no engine)"
    )
    streaming: list[bool] = Field(min_length=1, description="streamed (decoupled) and / or unstreamed serving")
    benchmark: Benchmark = Field(description="how llm-perf measures every point")
    placement: Placement | None = Field(None, description="where points run (see trtsweep.fleet.placement)")
    slo: Slo | None = Field(None, description="service-level objectives the report judges by")
    search: Search | None = Field(None, description="how the configurations are searched (null: grid, every one)")

    @model_validator(mode="after")
    def _load_needs_limits(self) -> Sweep:
        if self.search is not None and self.search.strategy in ("halving", "predicted") and self.benchmark.load is None:
            raise _At(("search", "strategy"), f"{self.search.strategy} ranks configurations by their capacity under "
                      "the SLOs: give benchmark.load (a capacity search)")  # fmt: skip
        if self.search is not None and self.search.budget_gpu_minutes is not None and self.benchmark.load is None:
            raise _At(("search", "budget_gpu_minutes"), "a budget bounds a search over configurations ranked by their "
                      "capacity: give benchmark.load (a capacity search)")  # fmt: skip
        if self.benchmark.protocol == "openai" and (self.flow != ["pytorch"] or self.servers != ["trtllm-serve"]):
            raise _At(("benchmark", "protocol"), "openai is trtllm-serve's endpoint: only for a sweep whose every "
                      "point it serves (flow: pytorch, servers: [trtllm-serve]); Triton's: grpc or http")  # fmt: skip
        limits = [key for key in SEARCH_LIMITS if self.slo is not None and getattr(self.slo, key) is not None]
        if self.benchmark.load is not None and not limits:
            raise _At(("slo",), f"benchmark.load searches for the highest load within the SLOs: give at least one of "
                                f"{', '.join(SEARCH_LIMITS)}")  # fmt: skip
        return self


class SweepFile(BaseModel):
    """A sweep file: `ansible-playbook sweep.yml -e @<file>`, `trtsweep plan <file>`."""

    model_config = ConfigDict(title="trtsweep sweep file")

    trtsweep_sweep: Sweep


def json_schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of a sweep file, as `trtsweep schema` prints it."""
    return {"$schema": JSON_SCHEMA_DIALECT, **SweepFile.model_json_schema()}


def json_schema_text() -> str:
    """`json_schema()` as `trtsweep schema` prints it and `sweep.schema.json` holds it."""
    import json

    return json.dumps(json_schema(), indent=2) + "\n"


# -- one-line errors ---------------------------------------------------------------------------------------------


@functools.cache
def _schema_of(model: type[BaseModel]) -> dict[str, Any]:
    return model.model_json_schema()


def _resolve(node: dict[str, Any], root: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in node:
        node = {**root["$defs"][node["$ref"].rsplit("/", 1)[-1]], **{k: v for k, v in node.items() if k != "$ref"}}
    if "oneOf" in node:  # a tagged union (speculative's items): read as its alternatives
        node = {"anyOf": node["oneOf"], **{k: v for k, v in node.items() if k != "oneOf"}}
    return node


def _child(node: dict[str, Any], seg: str | int, root: dict[str, Any]) -> dict[str, Any]:
    node = _resolve(node, root)
    for alternative in node.get("anyOf", []):
        found = _child(alternative, seg, root)
        if found:
            return found
    if isinstance(seg, int) and "items" in node:
        return node["items"]
    if seg in node.get("properties", {}):
        return node["properties"][seg]
    if isinstance(node.get("additionalProperties"), dict):
        return node["additionalProperties"]
    return next(iter(node.get("patternProperties", {}).values()), {})


def _properties(node: dict[str, Any], root: dict[str, Any]) -> dict[str, Any]:
    """The keys a mapping node knows, an optional section's (`anyOf` [the section, null]) included."""
    node = _resolve(node, root)
    found = dict(node.get("properties", {}))
    for alternative in node.get("anyOf", []):
        found |= _properties(alternative, root)
    return found


def _number(value: Any) -> str:
    return str(int(value)) if isinstance(value, float) and value.is_integer() else str(value)


def describe(node: dict[str, Any], root: dict[str, Any]) -> str:
    """What a JSON Schema node accepts, in words (null left out: the message is about a value that was given)."""
    node = _resolve(node, root)
    if "anyOf" in node:
        alternatives = [a for a in node["anyOf"] if _resolve(a, root).get("type") != "null"]
        return " or ".join(describe(a, root) for a in alternatives)
    if "enum" in node:
        return "one of " + ", ".join(repr(v) for v in node["enum"])
    if "const" in node:
        return repr(node["const"])
    kind = node.get("type")
    if kind in ("integer", "number"):
        noun = "an integer" if kind == "integer" else "a number"
        low, high = node.get("minimum"), node.get("maximum")
        if node.get("exclusiveMinimum") == 0 and high is None and "exclusiveMaximum" not in node:
            return f"a positive {noun.split()[-1]}"
        if low is not None and high is not None:
            noun = "a fraction" if (low, high, kind) == (0, 1, "number") else noun
            return f"{noun} in [{_number(low)}, {_number(high)}]"
        bounds = [(">", node.get("exclusiveMinimum")), (">=", low), ("<", node.get("exclusiveMaximum")), ("<=", high)]
        limits = " and ".join(f"{op} {_number(bound)}" for op, bound in bounds if bound is not None)
        return f"{noun} {limits}".strip()
    if kind == "boolean":
        return "true or false"
    if kind == "string":
        if "pattern" in node:
            return f"a string matching {node['pattern']!r}"
        return "a non-empty string" if node.get("minLength") else "a string"
    if kind == "array":
        text = "a non-empty list" if node.get("minItems") else "a list"
        text += " without repeats" if node.get("uniqueItems") else ""
        items = describe(node["items"], root) if node.get("items") else ""
        return f"{text}, each {items}" if items and items != "any value" else text
    if kind == "object" or "properties" in node:
        if "properties" in node:
            return f"a mapping with keys from {sorted(node['properties'])}"
        values = node.get("additionalProperties")
        return f"a mapping of name -> {describe(values, root)}" if isinstance(values, dict) and values else "a mapping"
    return "any value"


def _path(parts: list[str | int]) -> str:
    text = ""
    for part in parts:
        if isinstance(part, int):
            text += f"[{part}]"
        elif part.isidentifier() and not keyword.iskeyword(part):
            text += f".{part}" if text else part
        else:
            text += f"[{part!r}]"
    return text


def _walk(loc: tuple[Any, ...], raw: Any, missing: bool) -> tuple[list[str | int], bool]:
    """The loc's segments that are the file's keys and indexes (pydantic adds union tags; a scalar given for a
    list is validated as its item [0]), and whether the error is about a key of the last mapping."""
    parts: list[str | int] = []
    for i, seg in enumerate(loc):
        if seg == "[key]":
            return parts[:-1], True
        mapped = isinstance(raw, dict) and seg in raw
        if mapped or (isinstance(raw, list) and isinstance(seg, int) and 0 <= seg < len(raw)):
            raw = raw[seg]
        elif not (missing and i == len(loc) - 1):
            continue
        parts.append(seg)
    return parts, False


def _message(errors: list[Any], raw: Any, model: type[BaseModel], prefix: tuple[str | int, ...]) -> str:
    # an unknown key first (a misspelling explains the rest), a missing one last (a wrong value is more telling)
    errors = sorted(errors, key=lambda e: {"extra_forbidden": 0, "missing": 2}.get(e["type"], 1))
    error = errors[0]
    root = _schema_of(model)
    parts, about_key = _walk(error["loc"], raw, error["type"] == "missing")
    if error["type"] == "extra_forbidden":
        parent = parts[:-1]
        extra = [e for e in errors if e["type"] == "extra_forbidden"]
        unknown = [str(e["loc"][-1]) for e in extra if _walk(e["loc"], raw, False)[0][:-1] == parent]
        node = root
        for seg in parent:
            node = _child(node, seg, root)
        known = sorted(_properties(node, root))
        if not parent and not prefix:
            return f"sweep: unknown field(s) {sorted(unknown)}; known: {known}"
        return f"sweep field '{_path([*prefix, *parent])}': unknown key(s) {sorted(unknown)}; known: {known}"
    node = root
    for seg in parts:
        node = _child(node, seg, root)
    where = _path([*prefix, *parts])
    head = f"sweep field '{where}'" if where else "trtsweep_sweep"
    if about_key:
        patterns = list(_resolve(node, root).get("patternProperties", {}))
        expected = f"a name matching {patterns[0]!r}" if patterns else "a string"
        return f"{head}: expected keys that are {expected}, got {error['input']!r}"
    if error["type"] == "value_error":  # the models' own checks say what they expected
        problem = error["ctx"]["error"]
        if isinstance(problem, _At):  # a check between fields names the field it is about
            return f"sweep field '{_path([*prefix, *parts, *problem.path])}': {problem}"
        return f"{head}: {problem}"
    got = "nothing (the field is required)" if error["type"] == "missing" else repr(error["input"])
    return f"{head}: expected {describe(node, root)}, got {got}"


def validate_section(model: type[BaseModel], raw: Any, *prefix: str | int) -> Any:
    """`raw` checked against `model` (a sweep, or the part of one at `prefix`); returned unchanged."""
    try:
        model.model_validate(raw)
    except ValidationError as exc:
        raise TrtsweepError(_message(exc.errors(include_url=False), raw, model, prefix)) from None
    return raw


def validate(raw: Any) -> dict[str, Any]:
    """The sweep checked against `Sweep`, returned unchanged; TrtsweepError naming the field in one line otherwise."""
    return validate_section(Sweep, raw)
