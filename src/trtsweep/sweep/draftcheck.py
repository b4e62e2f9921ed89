"""A speculative variant's draft model against the model: the same tokenizer, compared where the controller has both.

A draft proposes token ids that the model verifies, so both must map text to the same ids. Each tokenizer is read
where the controller already has it (the model's `search.model_dirs` entry, the demo model, a hub cache: the places
trtsweep.sweep.promptcheck.local_tokenizer looks; nothing is downloaded while planning), and what decides the ids is
compared:

- `tokenizer.json` (the fast tokenizers' file): its `model` type, its vocabulary (token -> id; a Unigram model's
  pieces and scores in id order), its BPE merges (a list of pairs or of "a b" strings: the same merges either way)
  and every added token's id, text and `special` flag;
- without tokenizer.json: `vocab.json` + `merges.txt` (slow BPE tokenizers) and the added tokens of
  `added_tokens.json` / tokenizer_config.json's `added_tokens_decoder`;
- a SentencePiece `tokenizer.model` on both sides: the file's bytes (differing bytes are not taken for differing
  pieces: not checked then).

The normalizer, pre-tokenizer and post-processor are not compared (their serialized form changes between releases of
the tokenizers library for the same behaviour). A pair that differs is refused at plan time in one line naming the
field and the first difference; a pair whose tokenizers are not both at hand (an EAGLE-3 draft usually ships none) or
are of different formats is a plan note saying it was not checked, never a refusal.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trtsweep.errors import TrtsweepError
from trtsweep.sweep import promptcheck

if TYPE_CHECKING:
    from trtsweep.sweep.pytorch_axes import Variant


@dataclass(frozen=True)
class Tokenizer:
    """What decides a tokenizer's ids: `source` names the files read."""

    source: str
    kind: str  # the model type (BPE, Unigram, WordPiece, WordLevel), "sentencepiece" for tokenizer.model
    pieces: dict[int, str] = field(default_factory=dict)  # id -> token (the vocabulary)
    scores: tuple[float, ...] = ()  # a Unigram model's piece scores, in id order
    merges: tuple[str, ...] = ()
    added: dict[int, tuple[str, bool]] = field(default_factory=dict)  # id -> (text, special)
    digest: str = ""  # sentencepiece: the file's sha256


@dataclass(frozen=True)
class Outcome:
    """A comparison: `difference` (None: the same, or not compared) and what the plan notes of it."""

    checked: bool
    difference: str | None
    note: str


def tokenizer_dir(model: dict[str, Any], model_dirs: dict[str, str] | None = None) -> Path | None:
    """A directory of the model's tokenizer files on this machine: its model_dirs entry (when it holds one), else
    the demo model or a hub cache (trtsweep.sweep.promptcheck.local_tokenizer); None where none has it."""
    name = model.get("name")
    if model_dirs and name in model_dirs and _has_tokenizer(Path(model_dirs[name])):
        return Path(model_dirs[name])
    found = promptcheck.local_tokenizer(model)
    return Path(found) if found is not None and _has_tokenizer(Path(found)) else None


def _has_tokenizer(folder: Path) -> bool:
    return any((folder / name).is_file() for name in ("tokenizer.json", "vocab.json", "tokenizer.model"))


def _load(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def _merge(item: Any) -> str:
    return " ".join(item) if isinstance(item, list) else str(item)


def _added_of_config(folder: Path) -> dict[int, tuple[str, bool]]:
    """Added tokens of a tokenizer without tokenizer.json: added_tokens.json, tokenizer_config.json's decoder."""
    added: dict[int, tuple[str, bool]] = {}
    if (folder / "added_tokens.json").is_file():
        added |= {int(i): (str(text), False) for text, i in _load(folder / "added_tokens.json").items()}
    if (folder / "tokenizer_config.json").is_file():
        decoder = _load(folder / "tokenizer_config.json").get("added_tokens_decoder") or {}
        added |= {int(i): (str(t.get("content")), bool(t.get("special"))) for i, t in decoder.items()}
    return added


@cache
def read(folder: str) -> Tokenizer:
    """The tokenizer of `folder` (tokenizer.json first, then vocab.json + merges.txt, then tokenizer.model)."""
    path = Path(folder)
    if (path / "tokenizer.json").is_file():
        data = _load(path / "tokenizer.json")
        model = data.get("model") or {}
        vocab = model.get("vocab") or {}
        if isinstance(vocab, list):  # Unigram: [[piece, score], ...], the id is the position
            pieces, scores = {i: str(p[0]) for i, p in enumerate(vocab)}, tuple(float(p[1]) for p in vocab)
        else:
            pieces, scores = {int(i): str(t) for t, i in vocab.items()}, ()
        added = {int(t["id"]): (str(t["content"]), bool(t.get("special"))) for t in data.get("added_tokens") or []}
        merges = tuple(_merge(m) for m in model.get("merges") or [])
        return Tokenizer("tokenizer.json", str(model.get("type")), pieces, scores, merges, added)
    if (path / "vocab.json").is_file():
        pieces = {int(i): str(t) for t, i in _load(path / "vocab.json").items()}
        merges_file = path / "merges.txt"
        lines = merges_file.read_text(encoding="utf-8").splitlines() if merges_file.is_file() else []
        merges = tuple(line for line in lines if line and not line.startswith("#version"))
        return Tokenizer("vocab.json + merges.txt", "BPE", pieces, (), merges, _added_of_config(path))
    digest = hashlib.sha256((path / "tokenizer.model").read_bytes()).hexdigest()
    return Tokenizer("tokenizer.model", "sentencepiece", added=_added_of_config(path), digest=digest)


def _first(ours: dict[int, Any], theirs: dict[int, Any]) -> int | None:
    """The lowest id whose entry differs (or is on one side only)."""
    return min((i for i in ours.keys() | theirs.keys() if ours.get(i) != theirs.get(i)), default=None)


def difference(model: Tokenizer, draft: Tokenizer) -> str | None:
    """The first thing that maps text to other ids in the draft than in the model (None: nothing)."""
    if model.kind != draft.kind:
        return f"its tokenizer is {draft.kind}, the model's {model.kind}"
    if model.digest != draft.digest:
        return "its tokenizer.model differs"  # only where both are sentencepiece files; see compare
    if (at := _first(model.pieces, draft.pieces)) is not None:
        return (f"its vocabulary has {draft.pieces.get(at)!r} at id {at}, the model's {model.pieces.get(at)!r} "
                f"({len(draft.pieces)} and {len(model.pieces)} tokens)")  # fmt: skip
    if model.scores != draft.scores:
        return "its Unigram piece scores differ"
    if model.merges != draft.merges:
        at = next((i for i, (a, b) in enumerate(zip(model.merges, draft.merges, strict=False)) if a != b),
                  min(len(model.merges), len(draft.merges)))  # fmt: skip
        return f"its BPE merges differ from merge {at} on ({len(draft.merges)} and {len(model.merges)} merges)"
    if (at := _first(model.added, draft.added)) is not None:
        (ours, ours_special), (theirs, theirs_special) = (t.added.get(at, ("", False)) for t in (model, draft))
        what = "special token" if ours_special or theirs_special else "added token"
        return (
            f"its {what} at id {at} is {theirs!r} (special: {theirs_special}), the model's {ours!r} "
            f"(special: {ours_special})"
        )
    return None


def what_was_compared(tokenizer: Tokenizer) -> str:
    if tokenizer.kind == "sentencepiece":
        return f"tokenizer.model bytes, {len(tokenizer.added)} added tokens' ids"
    merges = f" + {len(tokenizer.merges)} merges" if tokenizer.merges else ""
    return (f"{tokenizer.source}: {tokenizer.kind} vocabulary of {len(tokenizer.pieces)}{merges}, "
            f"{len(tokenizer.added)} added/special tokens' ids")  # fmt: skip


@cache
def _compare(model_dir: str, draft_dir: str) -> tuple[bool, str | None, str]:
    ours, theirs = read(model_dir), read(draft_dir)
    if ours.source != theirs.source:
        return False, None, f"not checked: the draft's tokenizer is {theirs.source}, the model's {ours.source}"
    if ours.kind == "sentencepiece" and ours.digest != theirs.digest:
        return False, None, "not checked: the tokenizer.model files differ in bytes (their pieces were not compared)"
    found = difference(ours, theirs)
    return True, found, f"{'differs' if found else 'the same'} ({what_was_compared(ours)} compared)"


def compare(model: dict[str, Any], draft: dict[str, Any], model_dirs: dict[str, str] | None = None) -> Outcome:
    """The draft's tokenizer against the model's, where the controller has both."""
    ours, theirs = tokenizer_dir(model, model_dirs), tokenizer_dir(draft)
    missing = [m["repo_id"] for m, d in ((model, ours), (draft, theirs)) if d is None]
    if missing:
        return Outcome(False, None, f"not checked: no tokenizer of {' and '.join(missing)} on the controller")
    assert ours is not None and theirs is not None
    checked, found, note = _compare(str(ours), str(theirs))
    return Outcome(checked, found, note)


def check(model: dict[str, Any], spec: Variant | None, model_dirs: dict[str, str] | None = None) -> Outcome:
    """Refuse a speculative variant whose draft's tokenizer differs from the model's, in one line naming
    `speculative[i].draft`; the outcome otherwise (checked, or not checked and why)."""
    if spec is None or spec.draft is None:
        return Outcome(False, None, "no draft model")
    outcome = compare(model, spec.draft, model_dirs)
    if outcome.difference is not None:
        raise TrtsweepError(f"sweep field 'speculative[{spec.index}].draft': {spec.draft['repo_id']} does not share "
                            f"{model['repo_id']}'s tokenizer: {outcome.difference}")  # fmt: skip
    return outcome


def plan_notes(points: list[dict[str, Any]], model_dirs: dict[str, str] | None = None) -> list[str]:
    """One line per (model, draft) pair of the points: whether their tokenizers were compared, and how."""
    lines: dict[tuple[str, str], str] = {}
    for point in points:
        draft = point.get("draft_model")
        if draft is None:
            continue
        key = (point["model"]["repo_id"], draft["repo_id"])
        if key not in lines:
            outcome = compare(point["model"], draft, model_dirs)
            lines[key] = f"draft tokenizer of {draft['repo_id']} against {key[0]}: {outcome.note}"
    return list(lines.values())
