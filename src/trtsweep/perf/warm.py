"""llm-perf started before its server is ready, so a benchmark does not begin with a Python start.

    python -m trtsweep.perf.warm --profile-export-file E [--protocol P] [--tokenizer-path T]

imports llm-perf (and the protocol's client), loads the tokenizer, then waits for its command line: llm-perf's
arguments as one JSON list on stdin, for the benchmark that writes E (its command line names the point, in `ps`
too). It then runs them as `python -m trtsweep.perf.cli` would (the same output, exit status and signals); stdin
closed without a line ends it at once, status 0. A lane starts one as its point's server
starts (`started`), while the server loads (minutes for a real model), and hands it the benchmark's arguments once
the server is ready (`Warm.go`): the imports and the tokenizer (about 0.5 CPU-s; more where a host starts a benchmark
per GPU at once) are off the point's time.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO

from trtsweep.common.procs import Started, bound_child

CLI = ["-m", "trtsweep.perf.cli"]
EXPORT = "--profile-export-file"


class Warm:
    """A warm llm-perf process started by this process (it dies with it), its output going to files of its own."""

    def __init__(self, python: str, export_file: str, proc: subprocess.Popen[bytes], out: IO[bytes],
                 err: IO[bytes]) -> None:  # fmt: skip
        self.python, self.export_file, self.proc, self.out, self.err = python, export_file, proc, out, err

    def takes(self, argv: list[str]) -> bool:
        """Whether `argv` is an llm-perf command line of this process's Python writing this process's export file,
        and the process still waits."""
        export = argv[argv.index(EXPORT) + 1] if EXPORT in argv[:-1] else None
        return (argv[:3] == [self.python, *CLI] and export == self.export_file and self.proc.poll() is None
                and not self._told)  # fmt: skip

    @property
    def _told(self) -> bool:
        return self.proc.stdin is None or self.proc.stdin.closed

    def go(self, argv: list[str]) -> Started:
        """Run `argv` (see `takes`) in the warm process; returns it, running."""
        assert self.proc.stdin is not None
        self.proc.stdin.write((json.dumps(argv[3:]) + "\n").encode())
        self.proc.stdin.close()
        return Started(self.proc, self.out, self.err)

    def end(self) -> None:
        """End the process: one never told its benchmark (its server failed to start, the lane was stopped) is
        killed, it has measured nothing; one that was has ended (the caller followed it to its end)."""
        if not self._told or self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()
        if self.proc.stdin is not None:
            self.proc.stdin.close()


@contextlib.contextmanager
def started(python: str, export_file: str, protocol: str | None, tokenizer_path: str | None) -> Iterator[Warm]:
    """A warm llm-perf for the benchmark that writes `export_file`, for the block (ended with it)."""
    argv = [python, "-m", "trtsweep.perf.warm", EXPORT, export_file]
    argv += ["--protocol", protocol] if protocol else []
    argv += ["--tokenizer-path", tokenizer_path] if tokenizer_path else []
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=out, stderr=err, **bound_child())
        warm = Warm(python, export_file, proc, out, err)
        try:
            yield warm
        finally:
            warm.end()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m trtsweep.perf.warm")
    parser.add_argument(EXPORT, required=True, help="the export file of the benchmark it waits for")
    parser.add_argument("--protocol", choices=("grpc", "http", "openai"))
    parser.add_argument("--tokenizer-path")
    args = parser.parse_args(argv)
    sys.modules.setdefault("torch", None)  # as llm-perf's entry: a tokenizer needs none of it
    os.environ.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")
    from trtsweep.errors import TrtsweepError
    from trtsweep.perf import cli, tokenizer
    from trtsweep.perf.protocols import protocol_class

    if args.protocol:
        protocol_class(args.protocol)
    with contextlib.suppress(TrtsweepError):  # llm-perf itself says what is wrong with it, once it runs
        if args.tokenizer_path and Path(args.tokenizer_path).is_dir():
            tokenizer.load(args.tokenizer_path)
    line = sys.stdin.readline()
    if not line:
        return 0
    return cli.main(json.loads(line))


if __name__ == "__main__":
    sys.exit(main())
