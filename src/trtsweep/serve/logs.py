"""The server's log: its tail for an error message, and the cause of a failed model load."""

from __future__ import annotations

import re
from pathlib import Path

LOG_TAIL_LINES = 25


def log_tail(log_file: Path, lines: int = LOG_TAIL_LINES) -> str:
    try:
        text = log_file.read_text(errors="replace")
    except OSError:
        return "(no server log)"
    return "\n".join(text.splitlines()[-lines:])


MODEL_LOAD_FAILURE = re.compile(r"failed to load '([^']+)' version \d+: (.*?)(?:\\n|\"$|$)")


def failure_cause(log_file: Path) -> str:
    """The most telling line of a failed start: a model's load error if any, else the last log line."""
    try:
        lines = log_file.read_text(errors="replace").splitlines()
    except OSError:
        return "(no server log)"
    for line in lines:
        match = MODEL_LOAD_FAILURE.search(line)
        if match:
            return f"model '{match.group(1)}' failed to load: {match.group(2)}"
    return next((line.strip() for line in reversed(lines) if line.strip()), "(empty server log)")
