"""Command lines (argv lists, never shell strings) for the checkpoint step and for trtllm-build, from
structured options, each validated against the configured version's tables in `versions`.

A `Command` carries the full ``argv`` and the ``options`` that define the artifact (every flag except the
input/output paths): the cache key of the output directory is computed from the options, so the same
request always lands in the same directory whatever the host's paths.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from trtsweep.errors import TrtsweepError
from trtsweep.toolchain import precisions, versions

PATH_FLAGS = ("--model_dir", "--output_dir", "--checkpoint_dir", "--calib_dataset")


@dataclass(frozen=True)
class Command:
    """``argv``: the whole command; ``options``: its flags without paths (what the artifact depends on)."""

    tool: str
    argv: list[str]
    options: list[str]


@dataclass(frozen=True)
class CheckpointSpec:
    """One checkpoint: model, precision (see `precisions`), parallelism and calibration settings.

    ``version`` is the TensorRT-LLM release of the tools; ``model_id``/``model_revision`` name the model in
    the cache key (else the directory does); ``calib_data`` is a prompts jsonl (None: the tool's default
    dataset); ``calib_size`` the number of calibration samples (None: the tool's default)."""

    family: str
    precision: str
    version: str
    model_dir: str
    tp: int = 1
    pp: int = 1
    kv_cache_dtype: str | None = None
    dtype: str = "float16"
    model_id: str | None = None
    model_revision: str | None = None
    calib_data: str | None = None
    calib_size: int | None = None
    smoothquant_alpha: float = 0.5
    awq_block_size: int = 128
    extra_flags: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class BuildOptions:
    """trtllm-build settings. Lengths: ``max_seq_len`` defaults to input + output; releases before 0.11
    take ``--max_output_len`` instead. Plugins: a dtype, ``auto`` (the checkpoint's dtype before 0.11) or
    ``disable``; None leaves a setting at the tool's default. ``paged_kv_cache`` becomes ``--kv_cache_type
    paged|continuous`` from 0.13, ``--paged_kv_cache enable|disable`` before."""

    max_batch_size: int
    max_input_len: int
    max_output_len: int
    max_seq_len: int | None = None
    max_num_tokens: int | None = None
    gemm_plugin: str | None = "auto"
    gpt_attention_plugin: str | None = "auto"
    paged_kv_cache: bool | None = True
    remove_input_padding: bool | None = True
    context_fmha: bool | None = True
    use_fp8_context_fmha: bool | None = None
    multiple_profiles: bool | None = None
    workers: int = 1
    extra_flags: Mapping[str, Any] = field(default_factory=dict)


def _name(version: versions.Version) -> str:
    return f"{version[0]}.{version[1]}"


def _arity(spec: versions.Flag) -> str:
    if spec.nargs == "+":
        return "one or more values"
    if spec.nargs == "?":
        return "at most one value"
    if isinstance(spec.nargs, int):
        return f"exactly {spec.nargs} values"
    return "one value"


def _taken(spec: versions.Flag, available: int) -> int | None:
    """How many of the ``available`` values after the flag argparse would take (None: too few)."""
    if spec.nargs == "+":
        return available or None
    if spec.nargs == "?":
        return min(available, 1)
    wanted = spec.nargs if isinstance(spec.nargs, int) else 1
    return wanted if available >= wanted else None


def validate(tool: str, table: versions.Table, version: versions.Version, args: Sequence[str]) -> None:
    """Every flag in ``args`` exists in ``table``, switches stand alone, each option gets as many values as its
    ``nargs`` takes (argparse's rules), values respect the choices."""
    i = 0
    while i < len(args):
        flag = args[i]
        spec = table.flags.get(flag)
        if spec is None:
            raise TrtsweepError(f"{tool} of TensorRT-LLM {_name(version)} has no option {flag} ({table.source})")
        if not spec.takes_value:
            i += 1
            continue
        available = 0
        while i + 1 + available < len(args) and not _is_option(table, args[i + 1 + available]):
            available += 1
        taken = _taken(spec, available)
        if taken is None:
            needs = "a value" if spec.nargs in (None, "+") else _arity(spec)
            raise TrtsweepError(f"{tool} option {flag} needs {needs} (TensorRT-LLM {_name(version)})")
        for value in args[i + 1 : i + 1 + taken]:
            if spec.choices is not None and value not in spec.choices:
                raise TrtsweepError(
                    f"{tool} option {flag} {value!r}: TensorRT-LLM {_name(version)} accepts one of {list(spec.choices)}"
                )
        i += 1 + taken


def _is_option(table: versions.Table, arg: str) -> bool:
    return arg in table.flags or arg.startswith("--")


def extra_args(tool: str, table: versions.Table, extra: Mapping[str, Any], generated: Sequence[str]) -> list[str]:
    """``extra_flags`` (flag -> value; True for a switch or for an option whose value is optional; None/False to
    leave out; a list gives an option that takes several values all of them) as arguments; a flag trtsweep
    already sets must be set through its option instead."""
    out: list[str] = []
    for key, value in extra.items():
        flag = key if str(key).startswith("-") else f"--{key}"
        if flag in generated or flag in PATH_FLAGS:
            raise TrtsweepError(f"extra_flags: {flag} is set by trtsweep for {tool}; use its option instead")
        if value is None or value is False:
            continue
        spec = table.flags.get(flag)
        if spec is not None and not spec.takes_value:
            if value is not True:
                raise TrtsweepError(f"extra_flags: {tool} option {flag} is a switch; give it the value true")
            out.append(flag)
        elif value is True:
            if spec is None or spec.nargs != "?":
                raise TrtsweepError(f"extra_flags: {tool} option {flag} needs a value, not true")
            out.append(flag)
        else:
            values = value if isinstance(value, list) else [value]
            if spec is not None and isinstance(value, list) and _taken(spec, len(values)) != len(values):
                raise TrtsweepError(
                    f"extra_flags: {tool} option {flag} takes {_arity(spec)}, got a list of {len(values)}"
                )
            out += [flag, *(str(v) for v in values)]
    return out


def _flags_of(args: Sequence[str]) -> list[str]:
    return [a for a in args if a.startswith("--")]


def _positive(name: str, value: Any) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise TrtsweepError(f"{name}: expected a positive integer, got {value!r}")
    return value


def checkpoint_command(
    spec: CheckpointSpec, recipe: precisions.Recipe, *, python: str, script: str, output_dir: str,
    calib_dir: str | None, calib_size: int | None,
) -> Command:  # fmt: skip
    """``python <script> --model_dir .. --output_dir .. <precision flags> --tp_size N --pp_size M ...``."""
    version = versions.parse(spec.version)
    table = (
        versions.convert_table(version, spec.family)
        if recipe.tool == precisions.CONVERT
        else versions.quantize_table(version)
    )
    options = [*recipe.flags, "--tp_size", str(_positive("tp", spec.tp)), "--pp_size", str(_positive("pp", spec.pp))]
    if recipe.calibrates and calib_size is not None:
        if "--calib_size" not in table.flags:
            raise TrtsweepError(
                f"calib_size: {recipe.tool} of TensorRT-LLM {_name(version)} has no --calib_size; leave it unset"
            )
        options += ["--calib_size", str(calib_size)]
    options += extra_args(recipe.tool, table, spec.extra_flags, _flags_of(options))
    paths = ["--model_dir", spec.model_dir, "--output_dir", output_dir]
    if calib_dir is not None:
        paths += ["--calib_dataset", calib_dir]
    validate(recipe.tool, table, version, [*paths, *options])
    return Command(recipe.tool, [python, script, *paths, *options], options)


def _plugin(value: str, flag: str, table: versions.Table, dtype: str) -> str:
    choices = table.flags[flag].choices if flag in table.flags else None
    return dtype if value == "auto" and choices is not None and "auto" not in choices else value


def build_options(version: versions.Version, options: BuildOptions, dtype: str) -> list[str]:
    """The trtllm-build flags (no paths) for ``options`` in this release."""
    table = versions.build_table(version)
    batch = _positive("max_batch_size", options.max_batch_size)
    isl = _positive("max_input_len", options.max_input_len)
    osl = _positive("max_output_len", options.max_output_len)
    seq = isl + osl if options.max_seq_len is None else _positive("max_seq_len", options.max_seq_len)
    if seq <= isl:
        raise TrtsweepError(f"max_seq_len {seq}: must exceed max_input_len {isl}")
    args = ["--max_batch_size", str(batch), "--max_input_len", str(isl)]
    if "--max_seq_len" in table.flags:
        args += ["--max_seq_len", str(seq)]
    else:
        args += ["--max_output_len", str(seq - isl)]
    if options.max_num_tokens is not None:
        args += ["--max_num_tokens", str(_positive("max_num_tokens", options.max_num_tokens))]
    for name in ("gemm_plugin", "gpt_attention_plugin"):
        value = getattr(options, name)
        if value is not None:
            args += [f"--{name}", _plugin(value, f"--{name}", table, dtype)]
    if options.paged_kv_cache is not None:
        if "--kv_cache_type" in table.flags:
            args += ["--kv_cache_type", "paged" if options.paged_kv_cache else "continuous"]
        else:
            args += ["--paged_kv_cache", "enable" if options.paged_kv_cache else "disable"]
    for name in ("remove_input_padding", "context_fmha", "use_fp8_context_fmha", "multiple_profiles"):
        value = getattr(options, name)
        if value is not None:
            args += [f"--{name}", "enable" if value else "disable"]
    args += ["--workers", str(_positive("workers", options.workers))]
    return args + extra_args("trtllm-build", table, options.extra_flags, _flags_of(args))


def build_command(
    version: versions.Version, options: BuildOptions, *, dtype: str, trtllm_build: str, checkpoint_dir: str,
    output_dir: str,
) -> Command:  # fmt: skip
    """``trtllm-build --checkpoint_dir .. --output_dir .. <options>``, validated for the release."""
    flags = build_options(version, options, dtype)
    paths = ["--checkpoint_dir", checkpoint_dir, "--output_dir", output_dir]
    validate("trtllm-build", versions.build_table(version), version, [*paths, *flags])
    return Command("trtllm-build", [trtllm_build, *paths, *flags], flags)
