"""A Triton python model with known timing, for calibrating llm-perf (selftest, benchmarks, tests).

The model `paced` takes the ensemble's request tensors (text_input, max_tokens, optional stream) and
answers with `max_tokens` chunks "t0 ", "t1 ", ...: the first after `first_ms`, each next one `gap_ms`
later (sleeps measured from the request's arrival, so scheduling delays do not accumulate). With
decoupled=False (or stream=false) it sends one response with all chunks after first_ms + (n-1)*gap_ms.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from trtsweep.common.fileio import atomic_write_text

CONFIG = """name: "{name}"
backend: "python"
max_batch_size: 0
model_transaction_policy {{ decoupled: {decoupled} }}
input [
  {{ name: "text_input" data_type: TYPE_STRING dims: [ 1 ] }},
  {{ name: "max_tokens" data_type: TYPE_INT32 dims: [ 1 ] }},
  {{ name: "stream" data_type: TYPE_BOOL dims: [ 1 ] optional: true }}
]
output [ {{ name: "text_output" data_type: TYPE_STRING dims: [ 1 ] }} ]
parameters {{ key: "first_ms" value: {{ string_value: "{first_ms}" }} }}
parameters {{ key: "gap_ms" value: {{ string_value: "{gap_ms}" }} }}
instance_group [ {{ kind: KIND_CPU count: 1 }} ]
"""


def write_paced_model(
    repo: Path, name: str = "paced", first_ms: float = 0.0, gap_ms: float = 0.0, decoupled: bool = True
) -> Path:
    """Write the model into `repo` (a Triton model repository directory) and return its directory."""
    model_dir = repo / name
    atomic_write_text(
        model_dir / "config.pbtxt",
        CONFIG.format(name=name, decoupled=str(decoupled).lower(), first_ms=first_ms, gap_ms=gap_ms),
    )
    code = (resources.files("trtsweep.perf.paced") / "model.py").read_text(encoding="utf-8")
    atomic_write_text(model_dir / "1" / "model.py", code)
    return model_dir
