#!/usr/bin/env python3
"""Accuracy scoring speed (src/trtsweep/perf/accuracy.py): what a level's post-processing pays per request.

    python benchmarks/accuracy_speed.py [--short N]

Rows: N short English responses scored (every built-in score), in one process and as a level's post-processing
scores them (accuracy.Scoring: a worker process per core); one long Chinese response (10,000 characters,
one token per character) scored; the LCS alone of that long pair (compiled; the textbook O(n*m) Python LCS it
replaced took 28 s for such a response). Targets (issue 10): 100k short responses in under 10 s, one
10k-token response in under 0.5 s.
"""

from __future__ import annotations

import argparse
import random
import time

from trtsweep.perf import accuracy


def timed(func) -> float:  # type: ignore[no-untyped-def]
    start = time.perf_counter()
    func()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--short", type=int, default=100_000)
    args = parser.parse_args()
    rng = random.Random(0)
    words = ["the", "capital", "of", "france", "is", "paris", "berlin", "rome", "madrid", "city", "river", "answer"]
    pairs = [(" ".join(rng.choices(words, k=12)), " ".join(rng.choices(words, k=10))) for _ in range(args.short)]
    han = [chr(0x4E00 + rng.randrange(3000)) for _ in range(10_000)]
    long_pred, long_ref = "".join(han), "".join(rng.sample(han, len(han)))
    accuracy.score("warm", "up")  # sacrebleu's objects are built once
    scoring = accuracy.Scoring(None)  # what a level's post-processing uses: one worker process per core
    rows = [
        (
            f"{args.short:,} short responses, every score, one process",
            timed(lambda: [accuracy.score(p, r) for p, r in pairs]),
        ),
        (
            f"{args.short:,} short responses, every score, {scoring.workers} processes (pool start included)",
            timed(lambda: scoring.map(pairs)),
        ),
        ("one 10,000-token Chinese response, every score", timed(lambda: accuracy.score(long_pred, long_ref))),
        ("LCS of that pair (compiled)", timed(lambda: accuracy.lcs_length(list(long_pred), list(long_ref)))),
    ]
    scoring.close()
    width = max(len(name) for name, _ in rows)
    print(f"{'case':<{width}}  seconds")
    for name, seconds in rows:
        print(f"{name:<{width}}  {seconds:8.3f}")


if __name__ == "__main__":
    main()
