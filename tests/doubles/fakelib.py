"""Shared by the TRT-LLM tool doubles (tests only; TensorRT-LLM cannot run on the test machines).

Each double parses its argv with trtsweep's accepted-flag table for the release named by
TRTSWEEP_FAKE_TRTLLM_VERSION (argparse exits 2 on an unknown flag or a bad choice, as the real tools do),
appends {"tool", "argv", "version"} to the JSON-lines file TRTSWEEP_FAKE_RECORD, and writes plausible
outputs. TRTSWEEP_FAKE_FAIL=crash writes half the outputs and exits 1, =hang writes half and sleeps until killed
(``<mode>:engine`` or ``<mode>:safetensors``: only the tool writing those); TRTSWEEP_FAKE_ECHO_TOKEN=1 prints
HF_TOKEN (to prove the log is scrubbed); TRTSWEEP_FAKE_ENGINE_TP overrides the engine's tp_size.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

from trtsweep.toolchain import versions


def version() -> versions.Version:
    return versions.parse(os.environ["TRTSWEEP_FAKE_TRTLLM_VERSION"])


def parse(prog: str, table: versions.Table, argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog=prog, allow_abbrev=False)
    for flag, spec in table.flags.items():
        if spec.takes_value:
            parser.add_argument(flag, choices=spec.choices, nargs=spec.nargs)
        else:
            parser.add_argument(flag, action="store_true")
    return parser.parse_args(argv)


def start(tool: str, argv: list[str]) -> None:
    record = os.environ.get("TRTSWEEP_FAKE_RECORD")
    if record:
        with open(record, "a", encoding="utf-8") as out:
            out.write(
                json.dumps(
                    {
                        "tool": tool,
                        "argv": argv,
                        "version": os.environ["TRTSWEEP_FAKE_TRTLLM_VERSION"],
                        "pid": os.getpid(),
                    }
                )
            )
            out.write("\n")
    print(f"[TensorRT-LLM] fake {tool} {os.environ['TRTSWEEP_FAKE_TRTLLM_VERSION']}")
    if os.environ.get("TRTSWEEP_FAKE_ECHO_TOKEN") == "1":
        print(f"HF_TOKEN seen by the tool: {os.environ.get('HF_TOKEN')}")


def write_ranks(out: Path, config: dict, suffix: str, world_size: int) -> None:
    """config.json and one placeholder file per rank; a crash leaves rank 0 only and no config.json."""
    out.mkdir(parents=True, exist_ok=True)
    (out / f"rank0.{suffix}").write_bytes(b"\0" * 1024)
    mode, _, only = os.environ.get("TRTSWEEP_FAKE_FAIL", "").partition(":")
    mode = mode if only in ("", suffix) else ""
    if mode == "crash":
        print("RuntimeError: CUDA out of memory (simulated)", file=sys.stderr)
        sys.exit(1)
    if mode == "hang":
        sys.stdout.flush()
        time.sleep(3600)
    for rank in range(1, world_size):
        (out / f"rank{rank}.{suffix}").write_bytes(b"\0" * 1024)
    (out / "config.json").write_text(json.dumps(config, indent=2) + "\n")


def checkpoint(out: Path, architecture: str, dtype: str, tp: int, pp: int, quantization: dict) -> None:
    config = {
        "architecture": architecture,
        "dtype": dtype,
        "mapping": {"world_size": tp * pp, "tp_size": tp, "pp_size": pp},
        "quantization": quantization,
    }
    write_ranks(out, config, "safetensors", tp * pp)


def check_calib_dir(path: str, split: str, must_contain: str = "") -> None:
    """A local calibration dataset as the real loaders need it: <dir>/<split>.jsonl with a text column."""
    data = Path(path) / f"{split}.jsonl"
    if must_contain and must_contain not in path:
        sys.exit(f"ValueError: calibration dataset {path}: split and column unknown")
    if not data.is_file():
        sys.exit(f"ValueError: Unknown split {split!r} in {path}")
    for line in data.read_text(encoding="utf-8").splitlines():
        if "text" not in json.loads(line):
            sys.exit(f"KeyError: 'text' in {data}")
