"""Sweep planning: one YAML sweep definition -> a list of points, each one dict of resolved settings.

Every stage reads a point (through the mapping of `trtsweep.lane.point.PointRun`), and every
result is stored per point, so fleets, resume and reports can build on the same data.

Sweep definition (``trtsweep_sweep``)::

    name: smollm2-cpu-demo              # results/<name>/
    backend: hf                         # hf | tensorrtllm
    trtllm: {version: "0.11.0", family: qwen, dir: /app/tensorrt_llm}   # tensorrtllm only (see TRTLLM_KEYS)
    models:                             # one or more
      - {repo_id: HuggingFaceTB/SmolLM2-135M-Instruct, name: smollm2-135m, revision: null}
        # extra_inputs: {repetition_penalty: 1.1}  # request inputs of this model's points, over the benchmark's
    precisions: [float32]               # hf: float32 | bfloat16 | float16 | int8 (weight-only, CPU)
    parallelism: [{tp: 1, pp: 1}]
    max_batch_sizes: [4]
    lengths: [{input: 1024, output: 256}]   # engine limits (max_input_len / output); hf: one entry (no engine)
    streaming: [true]
    triton: {}                          # extra triton_repo parameters for every point
    benchmark: {protocol: grpc, concurrency: [1, 2, 4], input_data: data/prompts.jsonl, ...}   # BENCHMARK_KEYS
      # or, instead of concurrency: load: {search: slo, variable: concurrency, max: 64, max_levels: 8}
      # workloads: shared_prefix: {count: 4, tokens: 512}; or, instead of concurrency, a trace replay:
      # trace: {path: traces/tuesday.jsonl, format: auto, speed: [1, 2], block_size: 512}
    placement:                          # where points run (see trtsweep.fleet.placement)
      mode: exclusive                   # exclusive: one point per host at a time | pack: side by side
      gpus_per_point: 0                 # backend hf only: GPUs an hf point takes (0 = CPU point)
      gpu_type: null                    # substring of the GPU name a point needs, e.g. H100
      min_gpu_memory_gb: null           # smallest GPU memory a point needs
      weights: {}                       # point-id glob -> expected work (default 1.0 per point)

`expand` checks everything it can before a host is touched, each problem one line naming the field: first the
file against its schema (trtsweep.sweep.schema: every key, type and range, declared once; `trtsweep schema` prints
it for editors), then what one field cannot say alone: precisions against the backend and flows, the prompts file
(read with llm-perf's own loader; a relative path starts at `base_dir`), the `triton:` keys and values as the
serving TensorRT-LLM version's repository takes them, request inputs against the served ensemble. Every point
carries `input_data_sha256`, the prompts file's content hash, so a rerun after the file was edited reruns its
points (resume compares settings hashes, `trtsweep.fleet.status`). `tests/unit/test_schema_reaches.py`
proves that every key reaches the role, module or plan it configures.

`benchmark.load` (a capacity search, llm-perf --search slo) is carried into each point's `benchmark` with its
defaults and the sweep's SLO limits the search judges by (`load.slo`), so a changed limit changes the point's
settings hash and reruns it; such a point's benchmark has no `concurrency` (the search picks its levels). A sweep
without `load` plans points exactly as before (no `load` key in their benchmark, the same hashes).

The workloads likewise (`benchmark.shared_prefix`, `benchmark.trace`) are in a point's benchmark only when the sweep
gives them. The trace file is read here as llm-perf reads it; the point carries its absolute path and content hash
(`trace.sha256`, so an edited trace reruns its points) and, being a replay, no `concurrency`. A conversations file
(`benchmark.conversations`) is read here as llm-perf reads it (with its history: recorded answers need a reference on
every turn but the last); the point carries its absolute path and content hash (`conversations.sha256`).
"""

from __future__ import annotations

import difflib
import fnmatch
import itertools
import os
import re
from pathlib import Path
from typing import Any

from trtsweep.common.fileio import file_sha256
from trtsweep.errors import TrtsweepError
from trtsweep.perf.dataset import load_jsonl
from trtsweep.sweep import disaggregated, draftcheck, flows, pytorch_axes, schema
from trtsweep.sweep.paths import default_base_dir, model_dirs, sweep_path
from trtsweep.sweep.slo import search_limits
from trtsweep.toolchain.precisions import PRECISIONS as TRTLLM_PRECISIONS
from trtsweep.triton import interface as triton_interface
from trtsweep.triton import repository as triton_repository
from trtsweep.triton import versions as triton_versions

BACKENDS = ("hf", "tensorrtllm")
PRECISIONS = {"hf": schema.HF_PRECISIONS, "tensorrtllm": TRTLLM_PRECISIONS}
# the keys of each part of the sweep, as its schema declares them (with their descriptions)
TRTLLM_KEYS = {key: field.description for key, field in schema.Trtllm.model_fields.items()}
AXES = ("models", "precisions", "parallelism", "max_batch_sizes", "lengths", "streaming")
KNOWN = set(schema.Sweep.model_fields)
PLACEMENT_KEYS = set(schema.Placement.model_fields)
BENCHMARK_KEYS = set(schema.Benchmark.model_fields)
# a point has these only when the sweep gives them: `load` when it searches, the workloads when it asks for them
OPTIONAL_WORKLOADS = ("load", "shared_prefix", "trace", "conversations", "synthetic")
# what a point's benchmark holds when the sweep leaves a key out (llm-perf's own defaults)
BENCHMARK_DEFAULTS: dict[str, Any] = {
    key: field.get_default(call_default_factory=True)
    for key, field in schema.Benchmark.model_fields.items()
    if not field.is_required() and key not in OPTIONAL_WORKLOADS
}
LOAD_DEFAULTS: dict[str, Any] = {
    key: field.get_default(call_default_factory=True)
    for key, field in schema.Load.model_fields.items()
    if not field.is_required()
}
TRACE_DEFAULTS: dict[str, Any] = {
    key: field.get_default(call_default_factory=True)
    for key, field in schema.Trace.model_fields.items()
    if not field.is_required()
}
CONVERSATIONS_DEFAULTS: dict[str, Any] = {
    key: field.get_default(call_default_factory=True)
    for key, field in schema.Conversations.model_fields.items()
    if not field.is_required()
}
NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
# engine / tokenizer directory while planning: not built yet (repository checks against it are skipped)
PLAN_ENGINE_DIR = "/nonexistent/trtsweep-plan/engine"


def _not_found_hint(value: str, path: Path, base_dir: Path) -> str:
    """For a relative path missing next to the sweep file but present in the checkout (where a sweep file's relative
    paths used to start): how to write it now."""
    old = default_base_dir() / value
    if Path(value).is_absolute() or path.exists() or old == path or not old.exists():
        return ""
    relative = os.path.relpath(old, base_dir)
    written = relative if not relative.startswith(os.path.join("..", "..", "..")) else str(old)
    return f" (relative paths start at the sweep file's directory, {base_dir}: write {written} for the checkout's file)"


def check_input_data(input_data: str, base_dir: Path, field: str = "benchmark.input_data") -> Path:
    """The prompts file must load as llm-perf loads it (perf.dataset: one JSON object per line with `input` or
    `messages`, at least one record); the first problem raises one line naming the file and line."""
    path = sweep_path(input_data, base_dir)
    try:
        load_jsonl(path)
    except TrtsweepError as exc:
        raise _fail(field, f"{exc}{_not_found_hint(input_data, path, base_dir)}") from exc
    return path


def check_conversations(conversations: dict[str, Any], base_dir: Path) -> dict[str, Any]:
    """The conversations with their defaults, read as llm-perf will (the first bad line fails the plan, naming file
    and line); the path made absolute and the content hash added (an edited file reruns its points)."""
    from trtsweep.perf.conversations import load_conversations  # the client's runner (aiohttp): only when used

    conversations = {**CONVERSATIONS_DEFAULTS, **conversations}
    path = sweep_path(conversations["path"], base_dir)
    try:
        load_conversations(path, conversations["history"])
    except TrtsweepError as exc:
        hint = _not_found_hint(conversations["path"], path, base_dir)
        raise _fail("benchmark.conversations.path", f"{exc}{hint}") from exc
    return {**conversations, "path": str(path), "sha256": file_sha256(path)}


def check_trace(trace: dict[str, Any], base_dir: Path) -> tuple[dict[str, Any], str, int]:
    """The trace with its defaults, read as llm-perf will (the first bad line fails the plan, naming file and line);
    its speeds a list, its path made absolute and its content hash added (an edited trace reruns its points). Also
    where its longest request is ("file:line") and its input tokens."""
    from trtsweep.perf.workloads import TraceSpec, load_trace  # the client's runner (aiohttp): only when used

    trace = {**TRACE_DEFAULTS, **trace}
    path = sweep_path(trace["path"], base_dir)
    try:
        rows = load_trace(TraceSpec(path, trace["format"], trace["block_size"]))
    except TrtsweepError as exc:
        raise _fail("benchmark.trace.path", f"{exc}{_not_found_hint(trace['path'], path, base_dir)}") from exc
    speed = trace["speed"] if isinstance(trace["speed"], list) else [trace["speed"]]
    longest = max(rows, key=lambda row: row.input_tokens)
    trace = {**trace, "path": str(path), "speed": speed, "sha256": file_sha256(path)}
    return trace, f"{path}:{longest.lineno}", longest.input_tokens


def _check_workload_lengths(benchmark: dict[str, Any], longest: tuple[str, int] | None, isl: int) -> None:
    """A trace request or a shared prefix longer than the points' max_input_len fails the plan (a prompts file's
    prompts are checked with the tokenizer, trtsweep.sweep.promptcheck)."""
    if longest is not None and longest[1] > isl:
        raise _fail("benchmark.trace.path", f"{longest[0]}: input_length {longest[1]} is more than max_input_len {isl} "
                    "(lengths[].input)")  # fmt: skip
    prefix = benchmark.get("shared_prefix")
    if prefix and prefix["tokens"] >= isl:
        raise _fail("benchmark.shared_prefix.tokens", f"{prefix['tokens']} tokens leave no room for the prompts within "
                    f"max_input_len {isl} (lengths[].input)")  # fmt: skip


def _fail(field: str, problem: str) -> TrtsweepError:
    return TrtsweepError(f"sweep field '{field}': {problem}")


def _model(index: int, entry: dict[str, Any]) -> dict[str, Any]:
    field = f"models[{index}]"
    name = entry.get("name") or entry["repo_id"].split("/")[-1].lower()
    if not NAME.match(name):  # derived from repo_id
        raise _fail(f"{field}.name", f"{name!r} must be letters, digits, '.', '_' or '-'")
    model = {"repo_id": entry["repo_id"], "name": name, "revision": entry.get("revision")}
    if entry.get("flow") is not None:  # this model's flows, over the sweep's
        model["flow"] = flows.parse_flows(entry["flow"])
    if entry.get("extra_inputs") is not None:  # this model's points only, over benchmark.extra_inputs
        model["extra_inputs"] = entry["extra_inputs"]
    return model


# a request input's Triton type -> the values a sweep may give it (llm-perf sends one value of that type)
INPUT_VALUES: dict[str, tuple[tuple[type, ...], str]] = {
    "TYPE_BOOL": ((bool,), "true or false"),
    "TYPE_INT32": ((int,), "an integer"),
    "TYPE_UINT64": ((int,), "an integer"),
    "TYPE_FP32": ((int, float), "a number"),
    "TYPE_FP16": ((int, float), "a number"),
    "TYPE_STRING": ((str,), "a string"),
}


def _check_extra_inputs(point: dict[str, Any], field: str, inputs: dict[str, Any]) -> None:
    """Every extra input is an input of the ensemble the point serves (its TensorRT-LLM version's interface),
    with a value of its type: a misspelled sampling setting would otherwise fail every request of the point."""
    served = point["triton"].get("trtllm_version") or point["trtllm"].get("version")
    facts = triton_versions.facts(served or triton_repository.HF_INTERFACE_VERSION)
    version = facts.version
    tensors = {t["name"]: t for t in triton_interface.load(version).ensemble_inputs}
    renamed = {"seed": facts.seed_input, "random_seed": facts.seed_input}
    renamed |= {"min_tokens": facts.min_tokens_input, "min_length": facts.min_tokens_input}
    for key, value in inputs.items():
        if key not in tensors:
            guess = [renamed[key]] if key in renamed else difflib.get_close_matches(key, sorted(tensors), n=1)
            hint = f"; did you mean {guess[0]!r}?" if guess else f"; it has {', '.join(sorted(tensors))}"
            raise _fail(f"{field}.{key}", f"the ensemble of TensorRT-LLM {version} has no input {key!r}{hint}")
        kind, dims = tensors[key]["data_type"], tensors[key]["dims"]
        types, expected = INPUT_VALUES.get(kind, ((), "a value llm-perf cannot send"))
        items = value if isinstance(value, list) else [value]
        if isinstance(value, list) and (len(dims) != 1 or dims[0] != -1):
            raise _fail(f"{field}.{key}", f"{key} takes one value (dims {dims}), got the list {value!r}")
        if any(not isinstance(i, types) or (isinstance(i, bool) and bool not in types) for i in items):
            raise _fail(f"{field}.{key}", f"{key} is {kind}: expected {expected}, got {value!r}")


def _benchmark(
    value: dict[str, Any], base_dir: Path, slo: dict[str, Any] | None
) -> tuple[dict[str, Any], Path, tuple[str, int] | None]:
    """The benchmark with llm-perf's defaults filled in, the prompts file it reads (checked) and, for a trace replay,
    where its longest request is and its input tokens. A load search takes its defaults and the SLO limits it judges
    levels by (`load.slo`) and no concurrency list; a replay no concurrency list either."""
    value = {**BENCHMARK_DEFAULTS, **value}
    load = value.pop("load", None)
    if load is not None:
        value.pop("concurrency")
        value["load"] = {**LOAD_DEFAULTS, **load, "slo": search_limits(slo)}
    longest = None
    if value.get("trace") is not None:  # a replay: its levels are its speeds
        value.pop("concurrency")
        value["trace"], where, tokens = check_trace(value["trace"], base_dir)
        longest = (where, tokens)
    if value.get("conversations") is not None:
        value["conversations"] = check_conversations(value["conversations"], base_dir)
    if (value.get("synthetic") or {}).get("lengths_from") is not None:  # read on the controller, like the prompts
        drawn = check_input_data(value["synthetic"]["lengths_from"], base_dir, "benchmark.synthetic.lengths_from")
        # its content hash in the point, as the trace's and the conversations': an edited file reruns its points
        value["synthetic"] = {**value["synthetic"], "sha256": file_sha256(drawn)}
    return value, check_input_data(value["input_data"], base_dir), longest


def _trtllm(backend: str, value: dict[str, Any] | None) -> dict[str, Any]:
    """The installation with its defaults; the keys a tensorrtllm sweep needs (the schema says which exist)."""
    if backend != "tensorrtllm":
        if value:
            raise _fail("trtllm", "only used with backend: tensorrtllm")
        return {}
    if value is None:
        raise _fail("trtllm", f"backend tensorrtllm needs a mapping with {sorted(TRTLLM_KEYS)}")
    if value.get("version") is None:
        raise _fail("trtllm.version", "expected the TensorRT-LLM version as a string, e.g. '0.11.0'")
    flows.release_key(value["version"])  # each flow checks the release it needs (flows.release)
    if value.get("family") is None:
        raise _fail("trtllm.family", f"backend tensorrtllm needs one of {schema.FAMILIES}")
    return {"runtime": "native", "python": "python3", "calibrate_on_prompts": False, **value}


def _triton(backend: str, trtllm: dict[str, Any], value: Any, engine: bool) -> dict[str, Any]:
    """triton_repo parameters for every engine-flow point: keys trtsweep.triton.repository knows, extra_parameters
    keys of the serving version's tensorrt_llm model; tensorrtllm: a version the repository step has facts for.
    (The pytorch flow's Triton model takes its settings from model.yaml: `pytorch:` and `llm_api:`.)"""
    value = value or {}
    if not engine:
        if value:
            raise _fail("triton", "only for the engine flow's repository; the pytorch flow takes pytorch: and llm_api:")
        return value
    version = value.get("trtllm_version") or trtllm.get("version")
    if backend == "tensorrtllm":
        try:
            triton_versions.version_key(str(version))
        except TrtsweepError as exc:
            field = "triton.trtllm_version" if value.get("trtllm_version") else "trtllm.version"
            raise _fail(field, f"the Triton repository step cannot serve it: {exc}") from exc
    try:
        triton_repository.check_keys(value, backend, version)
        triton_repository.check_text(value)
    except TrtsweepError as exc:
        raise _fail("triton", str(exc)) from exc
    return value


def _placement(backend: str, value: dict[str, Any] | None) -> dict[str, Any]:
    value = value or {}
    gpus = value.get("gpus_per_point", 0)
    if gpus and backend != "hf":
        raise _fail("placement.gpus_per_point", "only for backend hf (tensorrtllm points take tp x pp GPUs)")
    return {"mode": value.get("mode", "exclusive"), "gpus_per_point": gpus, "gpu_type": value.get("gpu_type"),
            "min_gpu_memory_gb": value.get("min_gpu_memory_gb"), "weights": value.get("weights") or {}}  # fmt: skip


def _weight(point_id: str, weights: dict[str, float]) -> float:
    """The expected work of a point: the last matching glob's weight, else 1.0."""
    matched = [float(w) for glob, w in weights.items() if fnmatch.fnmatchcase(point_id, glob)]
    return matched[-1] if matched else 1.0


def expand(sweep: Any, base_dir: Path | None = None) -> list[dict[str, Any]]:
    """All points of the sweep matrix, in a stable order; raises TrtsweepError naming the bad field.

    `base_dir`: where a relative `benchmark.input_data` is (default: `default_base_dir()`); the prompts file is
    read here, so a missing or malformed one fails the plan, not the benchmark of every point."""
    schema.validate(sweep)  # every key, type and range (the slo too: a bad SLO fails the plan, not the report)
    name, backend = sweep["name"], sweep.get("backend", "hf")
    models = [_model(i, m) for i, m in enumerate(sweep["models"])]
    sweep_flows = flows.parse_flows(sweep.get("flow", "engine"))
    servers = flows.parse_servers(sweep.get("servers"))
    used_flows = {f for m in models for f in m.get("flow", sweep_flows)}
    precisions = sweep["precisions"]
    known = PRECISIONS[backend] + (
        flows.PYTORCH_PRECISIONS if backend == "tensorrtllm" and "pytorch" in used_flows else ()
    )
    for p in precisions:
        if p not in known:
            raise _fail(
                "precisions", f"{p!r} is not supported by backend {backend}; expected {tuple(dict.fromkeys(known))}"
            )
    parallelism = [(par.get("tp", 1), par.get("pp", 1)) for par in sweep["parallelism"]]
    if backend == "hf" and any(tp * pp != 1 for tp, pp in parallelism):
        raise _fail("parallelism", "backend hf serves one rank; use tp: 1, pp: 1 (TP/PP need tensorrtllm)")
    batch_sizes = sweep["max_batch_sizes"]
    lengths = [(ln["input"], ln["output"]) for ln in sweep["lengths"]]
    if backend == "hf" and len(lengths) > 1:  # they are trtllm-build's engine limits; the hf backend has none
        raise _fail("lengths", "backend hf has no engine length limits, so more than one entry measures the same")
    streaming = sweep["streaming"]
    trtllm = _trtllm(backend, sweep.get("trtllm"))
    for flow in sorted(used_flows):  # a release without a flow the sweep asks for fails before anything else
        flows.release(backend, trtllm.get("version"), flow, "trtllm.version")
    triton = _triton(backend, trtllm, sweep.get("triton"), "engine" in used_flows)
    pytorch, llm_api = sweep.get("pytorch") or {}, sweep.get("llm_api") or {}
    base = default_base_dir() if base_dir is None else base_dir
    benchmark, prompts, longest = _benchmark(sweep["benchmark"], base, sweep.get("slo"))
    for isl, _ in lengths:
        _check_workload_lengths(benchmark, longest, isl)
    prompts_sha256 = file_sha256(prompts)  # in every point: an edited prompts file changes its settings hash
    placement = _placement(backend, sweep.get("placement"))
    pytorch_axes.check_sweep(sweep, backend, used_flows, parallelism, servers)
    axes = pytorch_axes.combos(sweep)
    configs = _model_configs(models, axes, model_dirs(sweep, base))

    points = []
    for model, precision, (layout, (entry_tp, entry_pp)), bs, (isl, osl), stream in itertools.product(
        models, precisions, enumerate(parallelism), batch_sizes, lengths, streaming
    ):
        field = f"models[{models.index(model)}].flow" if "flow" in model else "flow"
        pairs = flows.variants(model.get("flow", sweep_flows), servers, field)
        for (flow, server), combo in ((pair, c) for pair in pairs
                                      for c in pytorch_axes.of_point(axes, *pair, entry_tp, layout == 0)):  # fmt: skip
            tp, pp = pytorch_axes.parallelism(combo, entry_tp, entry_pp)
            stem = f"{model['name']}_{precision}_tp{tp}pp{pp}_bs{bs}_isl{isl}osl{osl}_{'stream' if stream else 'sync'}"
            stem += pytorch_axes.id_part(combo)
            point_id = stem + flows.id_suffix(flow, server)
            if flow == "engine" and precision not in PRECISIONS[backend]:
                raise _fail("precisions", f"{precision!r} has no engine-flow recipe; expected {PRECISIONS[backend]}")
            flows.check_precision(backend, flow, precision, trtllm.get("kv_cache_dtype"))
            release = flows.release(backend, trtllm.get("version"), flow, field)
            point = _point(point_id, name, backend, model, precision, (tp, pp), bs, (isl, osl), stream,
                           triton if flow == "engine" else {}, benchmark, trtllm, placement)  # fmt: skip
            point |= {"flow": flow, "server": server, "config": stem, "input_data_sha256": prompts_sha256}
            point |= pytorch_axes.point_fields(combo)
            point["resources"] |= pytorch_axes.resources(combo)
            if combo.disaggregated is not None:  # every worker's GPUs, on one host
                point["resources"]["gpus"] = disaggregated.point_gpus(combo.disaggregated.shape, backend,
                                                                      placement["gpus_per_point"])  # fmt: skip
            if flow == "pytorch":
                pytorch_axes.check_point(combo, str(release), tp)
                model_config, draft_config = configs.get(_config_key(model, combo), (None, None))
                pytorch_axes.check_model(model, model_config, draft_config, combo)
                if model_config is not None and draft_config is not None:  # and the draft's tokenizer (where at hand)
                    draftcheck.check(model, combo.speculative, model_dirs(sweep, base))
                point["llm_api_release"] = release
                point["benchmark"] = pytorch_axes.benchmark(combo, tp, point["benchmark"])
                axis_options = {**llm_api, **pytorch_axes.options(combo)}
                point["llm_api"] = flows.llm_api_options(point, str(release), pytorch, axis_options)
                inputs = point["benchmark"]["extra_inputs"]
                extra_field = (
                    f"models[{models.index(model)}].extra_inputs"
                    if "extra_inputs" in model
                    else "benchmark.extra_inputs"
                )
                point["benchmark"]["extra_inputs"] = flows.request_inputs(server, str(release), inputs, extra_field)
            points.append(point)
    ids = [p["id"] for p in points]
    if len(set(ids)) != len(ids):
        raise _fail("models", "two models share a name; give each a distinct 'name'")
    _check_triton_values([p for p in points if p["flow"] == "engine"], triton)
    for point in points:
        if point["flow"] != "engine":
            continue  # flows.request_inputs named them for the point's server
        index = models.index(point["model"])
        _check_extra_inputs(point, "benchmark.extra_inputs", benchmark["extra_inputs"])
        _check_extra_inputs(point, f"models[{index}].extra_inputs", point["model"].get("extra_inputs", {}))
    return points


def _config_key(model: dict[str, Any], combo: pytorch_axes.Combo) -> tuple[str, str | None]:
    draft = combo.speculative.draft if combo.speculative is not None else None
    return model["name"], draft["repo_id"] if draft else None


def _model_configs(models: list[dict[str, Any]], axes: list[pytorch_axes.Combo],
                   dirs: dict[str, str] | None) -> dict[tuple[str, str | None], tuple[Any, Any]]:  # fmt: skip
    """(model name, draft repo) -> (the model's config.json, the draft's) where the controller has them (a sweep's
    search.model_dirs, the hub cache; never the network): MoE fields and drafts are checked against them."""
    if not any(pytorch_axes.needs_config(c) for c in axes):
        return {}
    out: dict[tuple[str, str | None], tuple[Any, Any]] = {}
    for model, combo in itertools.product(models, axes):
        key = _config_key(model, combo)
        if key not in out:
            draft = combo.speculative.draft if combo.speculative is not None else None
            out[key] = (pytorch_axes.read_config(model["repo_id"], model["revision"], dirs, model["name"]),
                        pytorch_axes.read_config(draft["repo_id"], draft["revision"]) if draft else None)  # fmt: skip
    return out


def _point(point_id: str, name: str, backend: str, model: dict[str, Any], precision: str, par: tuple[int, int],
           bs: int, lengths: tuple[int, int], stream: bool, triton: dict[str, Any], benchmark: dict[str, Any],
           trtllm: dict[str, Any], placement: dict[str, Any]) -> dict[str, Any]:  # fmt: skip
    (tp, pp), (isl, osl) = par, lengths
    extra = {**benchmark["extra_inputs"], **model.get("extra_inputs", {})}  # the model's over the sweep's
    return {
        "id": point_id,
        "sweep": name,
        "backend": backend,
        "model": model,
        "precision": precision,
        "tp": tp,
        "pp": pp,
        "world_size": tp * pp,
        "max_batch_size": bs,
        "max_input_len": isl,
        "max_output_len": osl,
        "streaming": stream,
        "triton": dict(triton),
        "benchmark": {**benchmark, "extra_inputs": extra},
        "trtllm": dict(trtllm),
        "resources": {
            "gpus": tp * pp if backend == "tensorrtllm" else placement["gpus_per_point"],
            "gpu_type": placement["gpu_type"],
            "min_gpu_memory_gb": placement["min_gpu_memory_gb"],
        },
        "weight": _weight(point_id, placement["weights"]),
        "placement_mode": placement["mode"],
    }


def _check_triton_values(points: list[dict[str, Any]], triton: dict[str, Any]) -> None:
    """The Triton repository parameters of every distinct (backend, version, batch size, streaming), resolved as
    the triton_repo role will (roles/triton_repo/tasks/main.yml: the point's values, then `triton:`), so a value
    out of range or a combination the serving version refuses fails the plan, not the repository stage after
    the engine was built. The engine directory does not exist yet: the checks against its config.json wait."""
    seen: set[tuple[Any, ...]] = set()
    for point in points:
        key = (point["backend"], point["trtllm"].get("version"), point["max_batch_size"], point["streaming"])
        if key in seen:
            continue
        seen.add(key)
        params = {
            "backend": point["backend"],
            "engine_dir": PLAN_ENGINE_DIR,
            "tokenizer_dir": PLAN_ENGINE_DIR,
            "triton_max_batch_size": point["max_batch_size"],
            "decoupled_mode": point["streaming"],
            "streaming": point["streaming"],
            "trtllm_version": point["trtllm"].get("version"),
            **triton,
        }
        try:
            triton_repository.resolve(params)
        except TrtsweepError as exc:
            raise _fail("triton", f"{exc} (point {point['id']})") from exc
