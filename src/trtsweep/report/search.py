"""The search's account in the report: what each round measured, what was dropped when and on what evidence, the
answer, the GPU-minutes spent, and (strategy predicted) AIConfigurator's prediction next to the measurement.

Read from `results/<sweep>/search.json` (the rounds' tasks and drops, trtsweep.search.rounds) and the round points'
own records and capacity searches, so the account is as current as the records. A sweep without a search (grid)
has none. Pure of side effects: lines out.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from trtsweep.common.fileio import read_json
from trtsweep.search import rounds
from trtsweep.search.predicted import PREDICTIONS
from trtsweep.search.strategy import Outcome, answer


def _measured(outcome: Outcome) -> str:
    if outcome.lost:
        return f"{outcome.config}: lost with its host ({outcome.point}: {outcome.cause})"
    if not outcome.ok or outcome.tokens_per_gpu is None:
        return f"{outcome.config}: {outcome.evidence().split(': ', 1)[-1]}"
    return (f"{outcome.config}: {outcome.tokens_per_gpu:.1f} tok/s/GPU at {outcome.at()} ({outcome.bound}, "
            f"{outcome.levels} levels)")  # fmt: skip


def history(results_dir: Path, ledger: dict[str, Any]) -> dict[int, dict[str, Outcome]]:
    """Round -> config -> what its round point measured (points not finished are left out)."""
    out: dict[int, dict[str, Outcome]] = {}
    for entry in ledger.get("rounds", []):
        number = entry["round"]
        for task in entry["tasks"]:
            point = {"id": task["point"], "search": {"config": task["config"], "fidelity": task["fidelity"]}}
            if (outcome := rounds.outcome(results_dir, point, number)) is not None:
                out.setdefault(number, {})[task["config"]] = outcome
    return out


def _when(number: int) -> str:
    return f"after round {number}" if number else "before round 1"


def _budget(ledger: dict[str, Any], spent: float) -> list[str]:
    """What the budget left unmeasured (nothing without a budget)."""
    budget = (ledger.get("spec") or {}).get("budget_gpu_minutes")
    if budget is None:
        return []
    left = [d["config"] for d in ledger.get("dropped", []) if d.get("budget")]
    said = f"left unmeasured: {', '.join(left)}" if left else "it left no configuration unmeasured"
    return [f"budget: {budget:g} GPU-minutes, {spent:.1f} spent; {said}"]


def _error(predicted: float | None, measured: float | None) -> str:
    if not predicted or measured is None:
        return "-"
    return f"{(measured - predicted) / predicted:+.1%}"


def lines(results_dir: Path) -> list[str]:
    """The search's account (empty without a search.json)."""
    ledger = read_json(results_dir / rounds.LEDGER)
    if not isinstance(ledger, dict):
        return []
    measured = history(results_dir, ledger)
    points = sum(not o.lost for r in measured.values() for o in r.values())
    lost = sum(len(r) for r in measured.values()) - points
    spent = sum(o.gpu_s for r in measured.values() for o in r.values()) / 60.0
    full = [o for r in measured.values() for o in r.values() if o.fidelity >= 1 and not o.lost]
    head = (f"search {ledger['strategy']}: {len(ledger['configs'])} configurations, {len(measured)} rounds, "
            f"{points} points measured{f' ({lost} more lost with their host)' if lost else ''}, {spent:.1f} "
            f"GPU-minutes")  # fmt: skip
    if full:
        grid = len(ledger["configs"]) * sum(o.gpu_s for o in full) / len(full) / 60.0
        head += f" (the grid, every configuration at the full benchmark: about {grid:.1f})"
    out = [head, *([ledger["chosen"]] if ledger.get("chosen") else [])]
    for number, outcomes in sorted(measured.items()):
        fidelity = next(iter(outcomes.values())).fidelity
        kind = f"screening, {fidelity:.0%} of the requests per level" if fidelity < 1 else "full benchmark"
        out.append(f"round {number} ({kind}): " + "; ".join(_measured(o) for o in outcomes.values()))
    out += [f"dropped {_when(d['round'])}: {d['config']}: {d['why']}" for d in ledger.get("dropped", [])]
    out += _budget(ledger, spent)
    best = answer(measured)
    out.append(f"answer: {_measured(best)}" if best else "answer: none (no configuration met the SLOs at the full "
               "benchmark)")  # fmt: skip
    kept = (read_json(results_dir / PREDICTIONS) or {}) if ledger.get("predictions") else {}
    made = kept.get("predictions")
    for system, db in sorted((kept.get("databases") or {}).items()) if made else []:  # what the predictions read
        out.append(f"predicted by {db.get('tool')} from its {db.get('backend')} database {db.get('version') or '?'} "
                   f"for {system} ({db.get('note')})")  # fmt: skip
    for outcome in full if made else []:
        guess = made.get(outcome.config) or {}
        if not guess.get("supported"):
            out.append(f"predicted vs measured: {outcome.config}: not predicted ({guess.get('reason')})")
            continue
        tokens, concurrency = guess.get("tokens_per_s_per_gpu"), guess.get("concurrency")
        out.append(f"predicted vs measured: {outcome.config}: {tokens or 0:.1f} vs "
                   f"{outcome.tokens_per_gpu or 0:.1f} tok/s/GPU ({_error(tokens, outcome.tokens_per_gpu)}), "
                   f"concurrency {concurrency} vs {outcome.capacity_concurrency} "
                   f"({_error(concurrency, outcome.capacity_concurrency)})")  # fmt: skip
    return out
