"""A stand-in fleet for the configuration search: each configuration a server of known capacity (a queue).

A configuration serves `slots` requests at once (its batch); a request takes `service_s` in a slot, its prefill
`prefill_s` of it; a closed-loop level of concurrency x keeps x requests in flight, so beyond the slots a request
queues for (x - slots) / slots service times. TTFT p99 at x is the prefill plus that queueing, scaled up as the
batch fills (`prefill_s * (1 + crowding * min(x, slots) / slots)`); throughput is x / (service time + queueing)
requests/s. A measured p99 carries noise that shrinks with the level's requests (sigma / sqrt(requests)), seeded per
(configuration, level, requests, round), so a short screening level is less sure than a long one. The true
capacity under a TTFT limit is known (`true_capacity`), and so is the true best configuration.

`measure` runs trtsweep's own capacity search (trtsweep.perf.search.Search) against it and returns what a round
point would have recorded (trtsweep.search.strategy.Outcome), with the GPU-seconds it would have held: a model
load plus each level's requests over its throughput.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from typing import Any

from trtsweep.perf.search import Search, SearchSpec
from trtsweep.search.strategy import Drop, Outcome, Strategy, Task

OUTPUT_TOKENS = 128


@dataclass(frozen=True)
class Config:
    name: str
    slots: int
    service_s: float
    prefill_s: float
    gpus: int = 1
    crowding: float = 1.0
    load_s: float = 60.0  # model load before the first level

    def ttft_s(self, x: float) -> float:
        queue = max(0.0, x - self.slots) / self.slots * self.service_s
        return self.prefill_s * (1 + self.crowding * min(x, self.slots) / self.slots) + queue

    def request_rate(self, x: float) -> float:
        queue = max(0.0, x - self.slots) / self.slots * self.service_s
        return x / (self.service_s + queue)

    def tokens_per_gpu(self, x: float) -> float:
        return self.request_rate(x) * OUTPUT_TOKENS / self.gpus

    def true_capacity(self, limit_s: float, maximum: int) -> int:
        return max((x for x in range(1, maximum + 1) if self.ttft_s(x) <= limit_s), default=0)


def level(config: Config, x: float, requests: int, noise: float, seed: str) -> dict[str, Any]:
    """A level summary as llm-perf writes it, as far as the search reads it."""
    rng = random.Random(seed)
    p99 = config.ttft_s(x) * (1 + rng.gauss(0.0, noise / math.sqrt(requests)))
    rate = config.request_rate(x)
    return {"requests": requests, "succeeded": requests, "ttft_ms": {"p99": p99 * 1000.0},
            "request_throughput": rate, "output_token_throughput": rate * OUTPUT_TOKENS}  # fmt: skip


def measure(config: Config, task: Task, number: int, *, limit_ms: float, maximum: int, requests: int,
            noise: float = 0.5, max_levels: int = 10) -> Outcome:  # fmt: skip
    """One round point of `task`: the capacity search at the task's fidelity, as an Outcome."""
    n = max(8, round(requests * task.fidelity))
    spec = SearchSpec(slo={"ttft_p99_ms": limit_ms}, maximum=maximum, max_levels=max_levels, hint=task.hint)
    search = Search(spec)
    held = config.load_s
    while (x := search.next_value()) is not None:
        summary = level(config, x, n, noise, f"{config.name}/{x}/{n}/{number}")
        held += n / summary["request_throughput"]
        search.record(x, summary, None)
    best = search.capacity()
    failed = [s.value for s in search.steps if not s.met and best is not None and s.value > best.value]
    return Outcome(
        config=config.name, round=number, point=config.name if task.fidelity == 1 else f"{config.name}_s{number}",
        ok=True, tokens_per_gpu=best.output_token_throughput / config.gpus if best else None,
        capacity_rps=best.request_throughput if best else None, capacity_concurrency=best.value if best else None,
        failed_level=min(failed) if failed else None, bound=search.bound(), levels=len(search.steps),
        latency={"ttft_p99_ms": config.ttft_s(best.value) * 1000.0} if best else {}, gpu_s=held * config.gpus,
        fidelity=task.fidelity,
    )  # fmt: skip


def fleet(count: int, seed: int = 0) -> list[Config]:
    """`count` configurations of different batch sizes, speeds and GPU counts (a seeded mix)."""
    rng = random.Random(seed)
    out = []
    for i in range(count):
        gpus = rng.choice((1, 1, 2, 4))
        out.append(Config(name=f"cfg{i:02d}", slots=rng.choice((8, 16, 32, 64)), gpus=gpus,
                          service_s=rng.uniform(2.0, 6.0) / math.sqrt(gpus), prefill_s=rng.uniform(0.05, 0.3),
                          crowding=rng.uniform(0.5, 2.0)))  # fmt: skip
    return out


def simulate(strategy: Strategy, configs: list[Config], **measure_args: Any) -> tuple[dict[int, dict[str, Outcome]],
                                                                                     list[Drop]]:  # fmt: skip
    """Every round of `strategy` against the stand-in configurations: the outcomes by round, and the drops."""
    by_name = {c.name: c for c in configs}
    history: dict[int, dict[str, Outcome]] = {}
    drops: list[Drop] = []
    number = 1
    while True:
        tasks, dropped = strategy.round(number, history)
        drops += dropped
        if not tasks:
            return history, drops
        history[number] = {t.config: measure(by_name[t.config], t, number, **measure_args) for t in tasks}
        number += 1
