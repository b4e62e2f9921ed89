"""Grid vs halving vs predicted on a stand-in fleet: what each search measures and how close its answer is.

    python benchmarks/search.py [--configs 12,16,24] [--seeds 5] [--prediction-error 0.15]

The fleet is tests/doubles/queue_model.py: each configuration a queue of known capacity (slots, service time,
prefill, GPUs), its levels' p99 noisy by sigma / sqrt(requests); a level costs its requests over its throughput
and a point a 60 s model load, in GPU-seconds. Each strategy is trtsweep's own (trtsweep.search.strategy) driving
trtsweep's own capacity search (trtsweep.perf.search) under a TTFT p99 limit of 1 s, concurrency up to 128, 400
requests per full level. `predicted` gets the true tokens/s per GPU at capacity times (1 + N(0, error)) as its
predictions (one configuration in six unpredicted), so its table says what a predictor that far off buys.

Columns: points and levels measured, requests measured, simulated GPU-minutes and their share of the grid's, how
often the answer is the true best, and the answer's shortfall from the true best's tokens/s per GPU (mean, worst).
Target (issue 25): the grid's answer for at most 40% of its GPU-minutes.
"""

from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.doubles.queue_model import fleet, simulate

from trtsweep.perf.selftest import format_rows
from trtsweep.search.strategy import SearchSpec, Strategy, answer

LIMIT_MS, MAXIMUM, REQUESTS = 1000.0, 128, 400
MEASURE = {"limit_ms": LIMIT_MS, "maximum": MAXIMUM, "requests": REQUESTS}


def run(count: int, seeds: int, error: float) -> list[dict[str, object]]:
    totals: dict[str, dict[str, float]] = {}
    for seed in range(seeds):
        configs = fleet(count, seed)
        names = [c.name for c in configs]
        truth = {c.name: c.tokens_per_gpu(c.true_capacity(LIMIT_MS / 1000, MAXIMUM)) for c in configs}
        best = max(truth.values())
        rng = random.Random(seed)
        guesses: dict[str, float | None] = {n: v * (1 + rng.gauss(0, error)) for n, v in truth.items()}
        for name in names[::6]:
            guesses[name] = None
        strategies = {"grid": Strategy(SearchSpec(), names),
                      "halving": Strategy(SearchSpec(strategy="halving"), names),
                      "predicted": Strategy(SearchSpec(strategy="predicted", batch=2), names, guesses)}  # fmt: skip
        grid_minutes = None
        for label, strategy in strategies.items():
            history, _ = simulate(strategy, configs, **MEASURE)
            outcomes = [o for r in history.values() for o in r.values()]
            minutes = sum(o.gpu_s for o in outcomes) / 60
            grid_minutes = minutes if label == "grid" else grid_minutes
            found = answer(history)
            shortfall = 1 - truth[found.config] / best if found else 1.0
            t = totals.setdefault(label, {"points": 0, "levels": 0, "requests": 0, "minutes": 0, "share": 0,
                                          "right": 0, "short": 0, "worst": 0})  # fmt: skip
            t["points"] += len(outcomes)
            t["levels"] += sum(o.levels for o in outcomes)
            t["requests"] += sum(o.levels * max(8, round(REQUESTS * o.fidelity)) for o in outcomes)
            t["minutes"] += minutes
            t["share"] += minutes / (grid_minutes or minutes)
            t["right"] += found is not None and truth[found.config] == best
            t["short"] += shortfall
            t["worst"] = max(t["worst"], shortfall)
    return [{"configs": count, "strategy": label, "points": f"{t['points'] / seeds:.1f}",
             "levels": f"{t['levels'] / seeds:.0f}", "requests": f"{t['requests'] / seeds:.0f}",
             "gpu_min": f"{t['minutes'] / seeds:.0f}", "of_grid": f"{t['share'] / seeds:.0%}",
             "true_best": f"{t['right']:.0f}/{seeds}", "short_mean": f"{t['short'] / seeds:.1%}",
             "short_worst": f"{t['worst']:.1%}"} for label, t in totals.items()]  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--configs", default="12,16,24", help="configurations per fleet, comma-separated")
    parser.add_argument("--seeds", type=int, default=5, help="fleets per size")
    parser.add_argument("--prediction-error", type=float, default=0.15, help="predicted: relative error (sigma)")
    args = parser.parse_args()
    rows = [row for count in args.configs.split(",") for row in run(int(count), args.seeds, args.prediction_error)]
    print(format_rows(rows))


if __name__ == "__main__":
    main()
