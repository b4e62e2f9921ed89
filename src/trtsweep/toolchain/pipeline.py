"""The two build steps the Ansible modules run: HF model -> TRT-LLM checkpoint, checkpoint -> engine.

Each step validates everything first (version, precision/family/version combination, every flag), then
derives its content-keyed output directory: a complete one (marker present) is reused and nothing runs;
one that another process on the host is making is waited for, then reused (or, if that process died, made);
a half one is removed and the tool runs again. Check mode stops after planning: it returns the command
that would run and whether anything would change. With ``results_dir`` a step records its command,
timings and log into the point's results (``checkpoint.json``/``.log``, ``trtllm_build.json``/``.log``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from trtsweep.errors import TrtsweepError
from trtsweep.toolchain import artifacts, calibration, commands, engine, precisions, runner, versions


@dataclass(frozen=True)
class Outcome:
    """``path``: the artifact; ``command``: the argv that ran (or would run); ``changed``: something was (check
    mode: would be) built; ``reused``: complete already; ``removed_partial``: a half artifact was removed;
    ``entry``: what was recorded into the results (timings, sizes)."""

    path: str
    command: list[str]
    changed: bool
    reused: bool
    log_file: str
    removed_partial: bool = False
    entry: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class EngineSpec:
    """One engine: a checkpoint made by `prepare_checkpoint`, the tools' release, the build options, and the
    TP/PP and dtype of the checkpoint (checked against the built engine)."""

    checkpoint_dir: str
    version: str
    options: commands.BuildOptions
    tp: int = 1
    pp: int = 1
    dtype: str = "float16"


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def _finish(out: Path, log: Path, argv: list[str], results_dir: str | None, name: str, entry: dict) -> Outcome:
    if results_dir:
        engine.record(Path(results_dir), name, entry, log)
    return Outcome(str(out), argv, not entry["reused"], entry["reused"], str(log), entry.get("removed_partial", False),
                   entry)  # fmt: skip


def _make(
    out: Path, argv: list[str], log: Path, inputs: dict, runtime: runner.Runtime, tool: str,
    check: Callable[[], dict[str, Any]], env: dict[str, str] | None = None,
) -> dict[str, Any]:  # fmt: skip
    """Run one step under the artifact's lock: remove a half artifact, run the tool, check what it made and
    write the marker last. If another process (a lane sharing the checkpoint, another sweep) completed it
    between our marker check and the lock, or while we waited for its lock, it is reused; the wait is recorded."""
    # a holder making the same artifact runs the same step: it ends within the step's bound (plus a minute)
    with artifacts.lock(out, None if runtime.timeout_s is None else runtime.timeout_s + 60) as held:
        waited = {"waited_for": held.waited_for, "waited_s": held.waited_s} if held.waited_for else {}
        done = artifacts.marker(out)
        if done is not None:
            return {"reused": True, "duration_s": done.get("duration_s"), **waited, **check()}
        removed = artifacts.reset(out)
        duration = runner.run(argv, log, tool=tool, runtime=runtime, extra_env=env, name=f"trtsweep-{out.name}",
                              keep_fds=(held.fd,))  # fmt: skip
        summary = check()
        artifacts.complete(out, {"inputs": inputs, "command": argv, "duration_s": duration, "finished_at": _now(),
                                 "log": log.name, **summary})  # fmt: skip
    return {"reused": False, "removed_partial": removed, "duration_s": duration, **waited, **summary}


def _known_checkpoint(out: Path, log: Path, argv: list[str], results_dir: str | None, base: dict[str, Any],
                      check_mode: bool) -> Outcome | None:  # fmt: skip
    """A complete checkpoint (its marker written) reused, or check mode's plan; None: it is to be made."""
    done = artifacts.marker(out)
    if done is not None:
        return _finish(out, log, argv, results_dir, "checkpoint",
                       {**base, "reused": True, "duration_s": done.get("duration_s")})  # fmt: skip
    return Outcome(str(out), argv, True, False, str(log)) if check_mode else None


def prepare_checkpoint(
    spec: commands.CheckpointSpec, cache_dir: Path, runtime: runner.Runtime, *, results_dir: str | None = None,
    hf_token: str | None = None, check_mode: bool = False,
) -> Outcome:  # fmt: skip
    """Make (or reuse) the checkpoint of ``spec`` under ``<cache_dir>/checkpoints/``."""
    version = versions.parse(spec.version)
    recipe = precisions.recipe(
        spec.precision, spec.family, version, kv_cache_dtype=spec.kv_cache_dtype, dtype=spec.dtype,
        smoothquant_alpha=spec.smoothquant_alpha, awq_block_size=spec.awq_block_size,
    )  # fmt: skip
    calib = None
    if spec.calib_data and recipe.calibrates:
        if recipe.calib_flag is None:
            raise TrtsweepError(
                f"calib_data: {recipe.tool} of TensorRT-LLM {spec.version} has no --calib_dataset (it calibrates on "
                "its default dataset); leave calib_data unset"
            )
        calib = calibration.prepare(Path(spec.calib_data), cache_dir, spec.calib_size, write=False)
    relative = (
        versions.convert_script(version, spec.family)
        if recipe.tool == precisions.CONVERT
        else versions.quantize_script(version)
    )

    def command(output_dir: str) -> commands.Command:
        return commands.checkpoint_command(
            spec, recipe, python=runtime.python, script=runtime.script(relative), output_dir=output_dir,
            calib_dir=str(calib.directory(recipe.tool)) if calib else None, calib_size=spec.calib_size,
        )  # fmt: skip

    inputs = {
        "kind": "checkpoint", "trtllm_version": spec.version.strip(), "tool": recipe.tool, "family": spec.family,
        "precision": spec.precision, "kv_cache_dtype": spec.kv_cache_dtype, "tp": spec.tp, "pp": spec.pp,
        "dtype": recipe.dtype, "model": spec.model_id or str(Path(spec.model_dir).resolve()),
        "revision": spec.model_revision, "calibration": calib.sha256 if calib else None,
        "options": command("-").options,
    }  # fmt: skip
    kv = f"-kv{spec.kv_cache_dtype}" if spec.kv_cache_dtype else ""
    out = artifacts.directory(cache_dir, "checkpoints", f"{spec.family}-{spec.precision}{kv}-tp{spec.tp}pp{spec.pp}",
                              inputs)  # fmt: skip
    argv = runtime.wrap(command(str(out)).argv, [spec.model_dir, str(cache_dir)], f"trtsweep-{out.name}")
    log = out / f"trtsweep-{Path(recipe.tool).stem}.log"
    base = {"checkpoint_dir": str(out), "tool": recipe.tool, "trtllm_version": spec.version.strip(), "command": argv}
    known = _known_checkpoint(out, log, argv, results_dir, base, check_mode)
    if known is not None:
        return known
    if calib:
        calibration.prepare(Path(spec.calib_data or ""), cache_dir, spec.calib_size)
    env = {"HF_TOKEN": hf_token} if hf_token else None
    made = _make(out, argv, log, inputs, runtime, recipe.tool, lambda: engine.check_checkpoint(out, spec.tp, spec.pp),
                 env)  # fmt: skip
    return _finish(out, log, argv, results_dir, "checkpoint", {**base, **made})


def build_engine(
    spec: EngineSpec, cache_dir: Path, runtime: runner.Runtime, *, results_dir: str | None = None,
    check_mode: bool = False,
) -> Outcome:  # fmt: skip
    """Build (or reuse) the engine of ``spec`` under ``<cache_dir>/engines/`` and check its config.json."""
    version = versions.parse(spec.version)
    checkpoint = Path(spec.checkpoint_dir)
    if artifacts.marker(checkpoint) is None and not check_mode:
        raise TrtsweepError(
            f"checkpoint_dir {checkpoint}: not a complete checkpoint (no {artifacts.MARKER}); "
            "run the quantize step first"
        )
    opts = spec.options
    flags = commands.build_options(version, opts, spec.dtype)
    seq = opts.max_seq_len or opts.max_input_len + opts.max_output_len
    inputs = {"kind": "engine", "trtllm_version": spec.version.strip(), "checkpoint": checkpoint.name,
              "tp": spec.tp, "pp": spec.pp, "options": flags}  # fmt: skip
    prefix = f"{artifacts.strip_key(checkpoint.name)}-bs{opts.max_batch_size}-isl{opts.max_input_len}-seq{seq}"
    out = artifacts.directory(cache_dir, "engines", prefix, inputs)
    command = commands.build_command(version, opts, dtype=spec.dtype, trtllm_build=runtime.trtllm_build,
                                     checkpoint_dir=str(checkpoint), output_dir=str(out))  # fmt: skip
    argv = runtime.wrap(command.argv, [str(checkpoint), str(cache_dir)], f"trtsweep-{out.name}")
    log = out / "trtsweep-trtllm-build.log"
    base = {"engine_dir": str(out), "checkpoint_dir": str(checkpoint), "trtllm_version": spec.version.strip(),
            "command": argv}  # fmt: skip
    done = artifacts.marker(out)
    if done is not None:
        summary = engine.check_engine(out, spec.tp, spec.pp, opts.max_batch_size, opts.max_input_len, seq)
        entry = {**base, "reused": True, "duration_s": done.get("duration_s"), **summary}
        return _finish(out, log, argv, results_dir, "trtllm_build", entry)
    if check_mode:
        return Outcome(str(out), argv, True, False, str(log))
    made = _make(
        out,
        argv,
        log,
        inputs,
        runtime,
        "trtllm-build",
        lambda: engine.check_engine(out, spec.tp, spec.pp, opts.max_batch_size, opts.max_input_len, seq),
    )
    return _finish(out, log, argv, results_dir, "trtllm_build", {**base, **made})


@dataclass(frozen=True)
class ModeloptSpec:
    """The PyTorch flow's checkpoint: the HF model as it is (bf16/fp16, or already quantized by ModelOpt as the point
    asks), else exported by ModelOpt's hf_ptq.py (llmapi.modelopt) into ``<cache>/checkpoints/modelopt-...``."""

    release: str  # TensorRT-LLM major.minor (its ModelOpt and hf_ptq.py options)
    precision: str
    model_dir: str
    modelopt_dir: str = ""  # ModelOpt's checkout (examples/llm_ptq/hf_ptq.py) as the tool sees it
    kv_cache_dtype: str | None = None
    model_id: str | None = None
    model_revision: str | None = None
    calib_data: str | None = None  # the user's prompts: calibrate on them
    calib_size: int | None = None
    extra_flags: dict[str, Any] = field(default_factory=dict)


def prepare_modelopt_checkpoint(
    spec: ModeloptSpec, cache_dir: Path, runtime: runner.Runtime, *, results_dir: str | None = None,
    hf_token: str | None = None, check_mode: bool = False,
) -> Outcome:  # fmt: skip
    """The checkpoint a PyTorch-flow point serves: reused as downloaded when it already is what the point asks for
    (a pre-quantized ModelOpt checkpoint, or bf16/fp16), else made (or reused) under the artifact lock."""
    from trtsweep.toolchain.llmapi import modelopt

    found = modelopt.check_prequantized(spec.release, Path(spec.model_dir), spec.precision, spec.kv_cache_dtype)
    if found is not None or (modelopt.PRECISIONS[spec.precision] is None and not spec.kv_cache_dtype):
        entry = {"checkpoint_dir": spec.model_dir, "tool": None, "reused": True, "prequantized": found, "command": []}
        return _finish(Path(spec.model_dir), Path(spec.model_dir) / "-", [], results_dir, "checkpoint", entry)
    calib = None
    if spec.calib_data:
        calib = modelopt.prepare_calibration(Path(spec.calib_data), cache_dir, spec.calib_size, write=False)
    quantize = modelopt.QuantizeSpec(
        precision=spec.precision, model_dir=spec.model_dir, tool_dir=spec.modelopt_dir, python=runtime.python,
        kv_cache_dtype=spec.kv_cache_dtype, model_id=spec.model_id, model_revision=spec.model_revision, calib=calib,
        calib_size=spec.calib_size, extra_flags=spec.extra_flags,
    )  # fmt: skip
    if not spec.modelopt_dir:
        raise TrtsweepError(f"precision {spec.precision} is quantized with ModelOpt: set trtllm.modelopt_dir (its "
                            "checkout holding examples/llm_ptq)")  # fmt: skip
    out = modelopt.output_dir(cache_dir, spec.release, quantize)
    inner = modelopt.command(spec.release, replace(quantize, export_dir=str(out)))
    paths = [spec.model_dir, str(cache_dir), spec.modelopt_dir]
    argv = runtime.wrap(inner, paths, f"trtsweep-{out.name}")
    log = out / "trtsweep-hf_ptq.log"
    base = {"checkpoint_dir": str(out), "tool": "hf_ptq.py", "trtllm_version": spec.release, "command": argv}
    known = _known_checkpoint(out, log, argv, results_dir, base, check_mode)
    if known is not None:
        return known
    if calib:
        modelopt.prepare_calibration(Path(spec.calib_data or ""), cache_dir, spec.calib_size)

    def check() -> dict[str, Any]:
        made = modelopt.check_prequantized(spec.release, out, spec.precision, spec.kv_cache_dtype)
        if made is None:
            raise TrtsweepError(f"hf_ptq.py finished but {out} carries no ModelOpt quantization (hf_quant_config.json)")
        return {"quantization": made}

    env = {"HF_TOKEN": hf_token} if hf_token else None
    made = _make(out, argv, log, modelopt.inputs(spec.release, quantize), runtime, "hf_ptq.py", check, env)
    return _finish(out, log, argv, results_dir, "checkpoint", {**base, **made})
