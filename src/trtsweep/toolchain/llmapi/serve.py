"""The `trtllm-serve` command of a PyTorch-flow point (OpenAI-compatible server), checked per release.

Argument list only (never a shell string): `trtllm-serve <model> --backend pytorch --host H --port P
--tp_size N --pp_size M [--ep_size E] --extra_llm_api_options <options.yaml> [--log_level L]`. The options file
(options.build) carries the rest of the LLM API settings and wins over the command-line values where both set
one, as trtllm-serve merges it last; tp/pp are given on both so the command says what it serves. Every option
is checked against the click options of `trtllm-serve serve` in the release's table (args.table()['serve']).

In 1.0 and 1.1 trtllm-serve builds a `build_config` from its --max_batch_size / --max_num_tokens / --max_seq_len flags
(their defaults when not given) and BaseLlmArgs.set_runtime_knobs_from_build_config sets the top-level values from it
with the PyTorch backend, over the options file's: `build_config_flags` gives those options as flags (the release
table's `disaggregated.worker_flags` names them, with the source), as a disaggregated worker's command does.

The proxy of a disaggregated point is `trtllm-serve disaggregated -c <config.yaml>`, its options checked against the
release's `disaggregated` table (args.table()['disaggregated']['options']); its config and its workers' commands are
toolchain.llmapi.disagg's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from trtsweep.errors import TrtsweepError
from trtsweep.toolchain.llmapi import args


@dataclass(frozen=True)
class ServeSpec:
    model: str  # HF model directory or pre-quantized ModelOpt checkpoint
    options_file: str
    port: int
    host: str = "127.0.0.1"
    tp: int = 1
    pp: int = 1
    ep: int | None = None
    log_level: str | None = None
    executable: str = "trtllm-serve"


def _option(release: str, options: dict[str, dict[str, object]], flag: str, value: object,
            command: str = "trtllm-serve") -> list[str]:  # fmt: skip
    spec = options.get(flag)
    if spec is None:
        raise TrtsweepError(f"{command} of TensorRT-LLM {release} has no option {flag}")
    choices = spec.get("choices")
    if isinstance(choices, list) and value not in choices:
        raise TrtsweepError(f"{command} {flag}: expected one of {', '.join(map(str, choices))}, got {value!r}")
    return [flag, str(value)]


def argv(release: str, spec: ServeSpec) -> list[str]:
    options = args.table(release)["serve"]["options"]
    out = [spec.executable, spec.model]
    out += _option(release, options, "--backend", "pytorch")
    out += _option(release, options, "--host", spec.host)
    out += _option(release, options, "--port", spec.port)
    out += _option(release, options, "--tp_size", spec.tp)
    out += _option(release, options, "--pp_size", spec.pp)
    if spec.ep is not None:
        out += _option(release, options, "--ep_size", spec.ep)
    if spec.log_level is not None:
        out += _option(release, options, "--log_level", spec.log_level)
    out += _option(release, options, "--extra_llm_api_options", spec.options_file)
    return out


def build_config_flags(release: str, options: dict[str, Any]) -> list[str]:
    """The flags trtllm-serve builds its build_config from (1.0, 1.1), with the options' values; [] in 1.2."""
    keys = args.table(release)["disaggregated"]["worker_flags"]
    return [part for key in keys if options.get(key) is not None for part in option(release, f"--{key}", options[key])]


def option(release: str, flag: str, value: object) -> list[str]:
    """`[flag, value]` of `trtllm-serve serve`, checked against the release's options."""
    return _option(release, args.table(release)["serve"]["options"], flag, value)


def disaggregated_argv(release: str, config_file: str, executable: str = "trtllm-serve") -> list[str]:
    """`trtllm-serve disaggregated -c <config_file>`, checked against the release's `disaggregated` options."""
    options = args.table(release)["disaggregated"]["options"]
    return [executable, "disaggregated", *_option(release, options, "-c", config_file, "trtllm-serve disaggregated")]
