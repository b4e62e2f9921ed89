"""The user's own prompts as a local calibration dataset that the TRT-LLM tools can read.

Input: a prompts jsonl as used by the benchmark (``{"input": ..., "output": <reference>}`` per line). Each
record becomes one calibration text: the prompt followed by its reference answer (what the served model
sees and produces), so the activation statistics come from the user's own traffic.

How the tools read a local dataset directory (each with ``datasets.load_dataset``):

- quantize.py (``tensorrt_llm/quantization/quantize_by_modelopt.py``, ``get_calib_dataloader``): a local
  directory whose name mentions neither cnn_dailymail, pileval nor scienceqa is loaded with
  ``split="train"`` and read from column ``text``: ``<root>/modelopt/train.jsonl``.
- convert_checkpoint.py (``tensorrt_llm/models/convert_utils.py``, ``load_calib_dataset``): split and column
  come from ``DEFAULT_HF_DATASET_META``, matched by substring of the path; without a match both are None and
  the load fails, so the directory's name contains ``lambada`` (split ``validation``, column ``text``):
  ``<root>/lambada/validation.jsonl``.
- hf_ptq.py (ModelOpt ``examples/llm_ptq``, the PyTorch flow; ``modelopt/torch/utils/dataset_utils.py``):
  ``--dataset`` takes only names of its dataset table, loaded with ``load_dataset(<path>, name=..., split="train",
  streaming=True)``; a local directory at that path relative to the working directory wins over the Hub, so the
  tool runs in ``<root>`` with ``--dataset pg19`` (column ``text``): ``<root>/pg19/train.jsonl``, next to the
  dataset card that llmapi.modelopt writes (ModelOpt 0.35+ ask for config ``v1.0``).

All files hold the same texts, cycled up to the calibration size (SmoothQuant calibration indexes
``calib_size`` samples and would run past a shorter list). The directory is keyed by the content's hash.
"""

from __future__ import annotations

import hashlib
import itertools
import json
from dataclasses import dataclass
from pathlib import Path

from trtsweep.common.fileio import atomic_write_text
from trtsweep.errors import TrtsweepError

DEFAULT_SIZE = 512
LAYOUT = {
    "quantize.py": Path("modelopt") / "train.jsonl",
    "convert_checkpoint.py": Path("lambada") / "validation.jsonl",
    "hf_ptq.py": Path("pg19") / "train.jsonl",
}


@dataclass(frozen=True)
class CalibrationSet:
    """A prepared dataset: ``root`` holds one directory per tool; ``sha256`` is the hash of its texts."""

    root: Path
    sha256: str
    records: int

    def directory(self, tool: str) -> Path:
        """The directory to pass to ``tool``'s ``--calib_dataset``."""
        return self.root / LAYOUT[tool].parent


def texts(prompts: Path) -> list[str]:
    """One calibration text per prompt record; TrtsweepError naming the line of a bad record."""
    try:
        lines = prompts.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise TrtsweepError(f"calib_data {prompts}: cannot read it ({exc.strerror})") from None
    out = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            raise TrtsweepError(f"calib_data {prompts}:{number}: not a JSON object") from None
        if not isinstance(record, dict) or not isinstance(record.get("input"), str) or not record["input"].strip():
            raise TrtsweepError(f'calib_data {prompts}:{number}: expected {{"input": <text>, "output": <text>}}')
        answer = record.get("output")
        out.append(record["input"] + (f"\n{answer}" if isinstance(answer, str) and answer.strip() else ""))
    if not out:
        raise TrtsweepError(f"calib_data {prompts}: no prompts in it")
    return out


def prepare(prompts: Path, cache_dir: Path, size: int | None = None, *, write: bool = True) -> CalibrationSet:
    """The dataset for ``prompts`` cycled to ``size`` records under ``<cache_dir>/calibration/``, written
    once (``write=False`` only computes where it goes, for check mode)."""
    if size is not None and size < 1:
        raise TrtsweepError(f"calib_size {size}: expected a positive number of samples")
    records = list(itertools.islice(itertools.cycle(texts(prompts)), size or DEFAULT_SIZE))
    content = "".join(json.dumps({"text": t}, ensure_ascii=False) + "\n" for t in records)
    digest = hashlib.sha256(content.encode("utf-8")).hexdigest()
    root = cache_dir / "calibration" / digest[:12]
    for relative in LAYOUT.values() if write else ():
        target = root / relative
        if not target.is_file() or target.read_text(encoding="utf-8") != content:
            atomic_write_text(target, content)
    return CalibrationSet(root, digest, len(records))
