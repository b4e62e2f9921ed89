"""The search over configurations (trtsweep.search.strategy) against a stand-in fleet of known capacities
(tests/doubles/queue_model.py: a queue per configuration, noise shrinking with a level's requests), and the round
points it becomes (trtsweep.search.rounds)."""

from __future__ import annotations

import dataclasses

import pytest

from tests.doubles.queue_model import fleet, simulate
from trtsweep.errors import TrtsweepError
from trtsweep.search.costs import Basis, Size, point_s
from trtsweep.search.rounds import round_point
from trtsweep.search.strategy import Outcome, SearchSpec, Strategy, Task, answer, dominates, spent_minutes

LIMIT_MS, MAXIMUM, REQUESTS = 1000.0, 128, 400
MEASURE = {"limit_ms": LIMIT_MS, "maximum": MAXIMUM, "requests": REQUESTS}


def true_best(configs):
    return max(configs, key=lambda c: c.tokens_per_gpu(c.true_capacity(LIMIT_MS / 1000, MAXIMUM))).name


def cost(history):
    """(GPU-minutes, requests measured, levels measured) of a search."""
    outcomes = [o for r in history.values() for o in r.values()]
    requests = sum(o.levels * max(8, round(REQUESTS * o.fidelity)) for o in outcomes)
    return sum(o.gpu_s for o in outcomes) / 60, requests, sum(o.levels for o in outcomes)


@pytest.mark.parametrize("seed", range(4))
def test_halving_finds_the_grids_answer_for_a_fraction_of_its_cost(seed):
    configs = fleet(16, seed)
    names = [c.name for c in configs]
    grid, _ = simulate(Strategy(SearchSpec(), names), configs, **MEASURE)
    halving, drops = simulate(Strategy(SearchSpec(strategy="halving"), names), configs, **MEASURE)
    assert answer(grid).config == answer(halving).config == true_best(configs)
    grid_cost, halving_cost = cost(grid), cost(halving)
    assert halving_cost[0] < 0.4 * grid_cost[0]  # GPU-minutes
    assert halving_cost[1] < 0.5 * grid_cost[1]  # requests measured: a screening level is an eighth of a full one
    # 16 -> 8 -> 4 screened (an eighth, a quarter, half the requests), then at most 2 finalists at the full
    # benchmark; dropping the dominated may leave fewer sooner, and then the finalists' round comes sooner
    sizes = [len(r) for r in halving.values()]
    assert sizes[0] == 16 and sizes[-1] <= 2 and all(n <= most for n, most in zip(sizes, [16, 8, 4, 2], strict=False))
    fidelities = [{o.fidelity for o in r.values()} for r in halving.values()]
    assert fidelities == [{0.125 * 2**r} for r in range(len(sizes) - 1)] + [{1.0}]
    assert len(drops) == 16 - sizes[-1] and all(d.why for d in drops)
    # the finalists start from their screening capacity: mostly two levels
    assert min(o.levels for o in halving[len(halving)].values()) == 2


def test_the_search_capacity_is_within_5_percent_of_the_truth():
    configs = fleet(12, 7)
    history, _ = simulate(Strategy(SearchSpec(), [c.name for c in configs]), configs, **MEASURE)
    for config in configs:
        found = history[1][config.name].capacity_concurrency or 0
        truth = config.true_capacity(LIMIT_MS / 1000, MAXIMUM)
        assert abs(found - truth) <= max(1, 0.05 * truth), (config, found, truth)


def test_a_failed_or_dominated_configuration_is_dropped_with_its_evidence():
    spec = SearchSpec(strategy="halving", finalists=2, keep=0.75)
    names = ["a", "b", "c", "d"]
    strategy = Strategy(spec, names)
    tasks, drops = strategy.round(1, {})
    assert [t.config for t in tasks] == names and not drops and tasks[0].screening

    def outcome(config, tokens, ttft, ok=True):
        return Outcome(config=config, round=1, point=f"{config}_s1", ok=ok, cause=None if ok else "failed at stage "
                       "serve: out of memory", tokens_per_gpu=tokens, capacity_concurrency=8, failed_level=9,
                       bound="tight", levels=5, latency={"ttft_p99_ms": ttft}, fidelity=0.125)  # fmt: skip

    history = {1: {"a": outcome("a", 100.0, 500.0), "b": outcome("b", 90.0, 600.0),
                   "c": outcome("c", 80.0, 400.0), "d": outcome("d", None, None, ok=False)}}  # fmt: skip
    tasks, drops = strategy.round(2, history)
    # keep 3 of 4: d failed; b is dominated by a (fewer tok/s per GPU, a higher TTFT p99); c trades TTFT for tokens
    assert [t.config for t in tasks] == ["a", "c"] and {t.hint for t in tasks} == {(8, 9)}
    why = {d.config: d.why for d in drops}
    assert "failed at stage serve: out of memory" in why["d"]
    assert why["b"].startswith("dominated by a") and "90.0 output tok/s/GPU" in why["b"]
    assert dominates(history[1]["a"], history[1]["b"]) and not dominates(history[1]["a"], history[1]["c"])


def test_predicted_measures_the_predicted_best_first_and_stops_on_the_margin():
    configs = fleet(12, 3)
    truth = {c.name: c.tokens_per_gpu(c.true_capacity(LIMIT_MS / 1000, MAXIMUM)) for c in configs}
    predictions = {name: value * 1.05 for name, value in truth.items()}  # a predictor 5% optimistic
    predictions["cfg00"] = None  # one it cannot predict: measured as in grid, in the first round
    spec = SearchSpec(strategy="predicted", margin=0.1, batch=2)
    history, drops = simulate(Strategy(spec, [c.name for c in configs], predictions), configs, **MEASURE)
    assert "cfg00" in history[1] and len(history[1]) == 3
    assert answer(history).config == true_best(configs)
    measured = sum(len(r) for r in history.values())
    assert measured < len(configs) / 2 and len(drops) == len(configs) - measured
    assert all("beats every remaining prediction by more than 10%" in d.why for d in drops)


SIZE = Size(gpus=1, requests=100, levels=4)
BASIS = Basis(load_s=60.0, request_s=0.15, source="test")  # a full point: 60 + 4 x 100 x 0.15 = 120 GPU-seconds


def done(config, number, tokens, fidelity=1.0, lost=False, hinted=False):
    """An outcome that held its GPUs exactly as long as the budget priced it."""
    gpu_s = point_s(SIZE, BASIS, fidelity, hinted)
    cause = "lost at stage benchmark: host b unreachable" if lost else None
    return Outcome(config=config, round=number, point=config, ok=not lost, lost=lost, tokens_per_gpu=None if lost
                   else tokens, capacity_concurrency=4, failed_level=5, bound="tight", levels=3, gpu_s=gpu_s,
                   fidelity=fidelity, cause=cause)  # fmt: skip


def budgeted(strategy, names, minutes, predictions=None, batch=1, **spec):
    spec = SearchSpec(strategy=strategy, budget_gpu_minutes=minutes, **spec)
    return Strategy(spec, names, predictions, batch, dict.fromkeys(names, SIZE), BASIS)


def test_the_budget_trims_the_first_round_and_the_grid_too():
    names = [f"c{i}" for i in range(8)]
    # grid: 8 full points of 2 GPU-minutes; 9 GPU-minutes buy the first 4 in the sweep's order
    tasks, drops = budgeted("grid", names, 9.0).round(1, {})
    assert [t.config for t in tasks] == names[:4] and [d.config for d in drops] == names[4:]
    assert all(d.budget and d.round == 0 and "round 1 could measure 4 of its 8 configurations" in d.why
               for d in drops)  # fmt: skip
    # halving keeps what its later steps need: 8 screened (1.1 each), 4 (1.2, hinted), 2 finalists (1.75) need 17.2
    halving = budgeted("halving", names, 9.0)
    tasks, drops = halving.round(1, {})
    assert len(tasks) < 8 and len(drops) == 8 - len(tasks) and all(d.budget for d in drops)
    total = sum(halving.cost_s(t, {}) for t in tasks) + halving._after(1, tasks[0].fidelity, len(tasks),
                                                                        [t.config for t in tasks], {})  # fmt: skip
    assert total <= 9.0 * 60
    assert budgeted("halving", names, 17.3).round(1, {})[1] == []  # enough for the whole schedule: nothing trimmed


def test_a_search_never_spends_past_its_budget():
    names = [f"c{i}" for i in range(8)]
    for minutes in (3.0, 5.0, 8.0, 12.0):
        for kind in ("grid", "halving", "predicted"):
            strategy = budgeted(kind, names, minutes, {n: 100.0 - i for i, n in enumerate(names)}, batch=2)
            history, number = {}, 1
            while tasks := strategy.round(number, history)[0]:
                history[number] = {t.config: done(t.config, number, 100.0 - names.index(t.config), t.fidelity,
                                                  hinted=t.hint is not None) for t in tasks}  # fmt: skip
                number += 1
            assert 0 < spent_minutes(history) <= minutes, (kind, minutes, spent_minutes(history))


def test_predicted_measures_its_best_predicted_first_within_the_budget():
    names = ["u1", "u2", "p1", "p2", "p3"]
    guesses = {"u1": None, "u2": None, "p1": 50.0, "p2": 90.0, "p3": 70.0}
    # 5 GPU-minutes buy two full points: the predicted best first, then what AIConfigurator could not predict; p1
    # waits for a later round, which the budget will decide
    strategy = budgeted("predicted", names, 5.0, guesses, batch=2)
    tasks, drops = strategy.round(1, {})
    assert [t.config for t in tasks] == ["p2", "p3"]
    assert {d.config for d in drops} == {"u1", "u2"} and all(d.budget for d in drops)
    history = {1: {t.config: done(t.config, 1, 10.0) for t in tasks}}  # 4 GPU-minutes spent: p1 does not fit
    tasks, drops = strategy.round(2, history)
    assert tasks == [] and [d.config for d in drops] == ["p1"] and drops[0].budget


def test_a_lost_point_is_measured_again_and_never_dropped_for_it():
    names = ["a", "b", "c", "d"]
    halving = Strategy(SearchSpec(strategy="halving", finalists=2, keep=0.5), names)
    first = {"a": done("a", 1, 100.0, 0.125), "b": done("b", 1, 90.0, 0.125), "c": done("c", 1, None, 0.125, True),
             "d": done("d", 1, 80.0, 0.125)}  # fmt: skip
    tasks, drops = halving.round(2, {1: first})
    # the step is not judged with c's host gone: c alone again, as it was to be measured
    assert tasks == [Task("c", 0.125, None, again=True)] and drops == []
    again = {"c": done("c", 2, 95.0, 0.125)}
    tasks, drops = halving.round(3, {1: first, 2: again})
    assert [t.config for t in tasks] == ["a", "c"] and {t.fidelity for t in tasks} == {1.0}  # the finalists
    assert {d.config for d in drops} == {"b", "d"} and all(d.round == 2 and d.why.startswith("rank") for d in drops)
    # grid and predicted: the lost configuration in the next round, again
    grid = Strategy(SearchSpec(strategy="grid"), names)
    assert grid.round(2, {1: {"a": done("a", 1, 1.0), "b": done("b", 1, None, lost=True)}})[0] == [
        Task("b", 1.0, again=True)]  # fmt: skip
    predicted = Strategy(SearchSpec(strategy="predicted", batch=1), names, {"a": 50.0, "b": 40.0, "c": 30.0,
                                                                               "d": None})  # fmt: skip
    lost = {1: {"a": done("a", 1, None, lost=True), "d": done("d", 1, None, lost=True)}}
    assert predicted.round(2, lost)[0] == [Task("d", 1.0, again=True)]  # the unpredicted first, then the batch
    lost[1]["d"] = done("d", 1, 10.0)
    assert predicted.round(2, lost)[0] == [Task("a", 1.0, again=True)]


def test_predicted_with_a_wrong_ranking_the_margin_decides_whether_the_best_is_found():
    truth = {"a": 100.0, "b": 120.0, "c": 60.0}
    guesses = {"a": 110.0, "b": 100.0, "c": 70.0}  # a predicted above b: the ranking is wrong

    def search(margin):
        strategy = Strategy(SearchSpec(strategy="predicted", margin=margin, batch=1), list(truth), guesses)
        history, drops, number = {}, [], 1
        while True:
            tasks, dropped = strategy.round(number, history)
            drops += dropped
            if not tasks:
                return history, drops
            history[number] = {t.config: done(t.config, number, truth[t.config]) for t in tasks}
            number += 1

    # no margin: a's 100 equals b's prediction, the search stops on the wrong answer
    history, drops = search(0.0)
    assert answer(history).config == "a" and {d.config for d in drops} == {"b", "c"}
    # 10%: 100 does not beat b's 100 by 10%, b is measured and is the best; c (70) is not measured
    history, drops = search(0.1)
    assert answer(history).config == "b" and [d.config for d in drops] == ["c"]
    assert "beats every remaining prediction by more than 10%" in drops[0].why


def test_predicted_needs_predictions_and_an_unknown_strategy_is_refused():
    with pytest.raises(TrtsweepError, match="no predictions"):
        Strategy(SearchSpec(strategy="predicted"), ["a"])
    with pytest.raises(TrtsweepError, match=r"sweep field 'search\.strategy'"):
        SearchSpec.from_sweep({"strategy": "bayes"})


def test_a_round_point_is_the_grid_point_with_its_round_its_share_and_its_hint():
    grid = {"id": "m_fp8_tp1pp1_bs64", "benchmark": {"num_requests": None, "load": {"search": "slo", "max": 64}}}
    spec = SearchSpec(strategy="halving")
    screening = round_point(grid, Task("m_fp8_tp1pp1_bs64", 0.125), 1, spec, requests=200)
    assert screening["id"] == "m_fp8_tp1pp1_bs64_s1" and screening["benchmark"]["num_requests"] == 25
    assert screening["search"] == {"strategy": "halving", "round": 1, "config": grid["id"], "fidelity": 0.125}
    final = round_point(grid, Task(grid["id"], 1.0, (24, 25)), 4, spec, requests=200)
    assert final["id"] == grid["id"] and final["benchmark"]["num_requests"] is None
    assert final["benchmark"]["load"]["hint"] == [24, 25] and "hint" not in grid["benchmark"]["load"]
    assert round_point(grid, Task(grid["id"], 1.0), 1, SearchSpec(), requests=200) == grid  # grid: as it is


def test_every_search_key_reaches_the_rounds(tmp_path, monkeypatch):
    from trtsweep.search import predicted
    from trtsweep.sweep.schema import Search

    names = [f"c{i}" for i in range(8)]
    base = SearchSpec.from_sweep({"strategy": "halving"})

    def with_(**over):
        return dataclasses.replace(base, **over)

    def done(config, tokens):
        return Outcome(config=config, round=1, point=config, ok=True, tokens_per_gpu=tokens, capacity_concurrency=4,
                       failed_level=5, bound="tight", levels=3, gpu_s=60.0, fidelity=1.0)  # fmt: skip

    walked = {
        "strategy": Strategy(with_(strategy="grid"), names).round(1, {})[0][0].fidelity == 1.0,
        "keep": Strategy(with_(keep=0.25), names).survivors(2) == 2 != Strategy(base, names).survivors(2),
        "finalists": Strategy(with_(finalists=4), names).screening_rounds() == 1,
        "screening": Strategy(with_(screening=0.25), names).round(1, {})[0][0].fidelity == 0.25,
        "budget_gpu_minutes": Strategy(with_(budget_gpu_minutes=1), names).round(1, {})[0] == [],
        "margin": Strategy(with_(strategy="predicted", margin=2.0), names, dict.fromkeys(names, 50.0)).round(
            2, {1: {"c0": done("c0", 120.0)}})[0] != [],  # 120 does not beat 50 by 200%: go on
        "batch": len(Strategy(with_(strategy="predicted", batch=3), names, dict.fromkeys(names, 1.0)).round(1, {})[0])
        == 3,
    }  # fmt: skip
    # predictor and model_dirs: what AIConfigurator is run as, and where config.json is
    asked = {}
    monkeypatch.setattr(predicted.predict, "predict", lambda entries, **kw: asked.update(kw) or {})
    grid = [{"id": "q_fp8", "precision": "fp8", "tp": 1, "pp": 1, "max_batch_size": 8, "max_input_len": 64,
             "max_output_len": 8, "trtllm": {}, "model": {"name": "q", "repo_id": "o/q"},
             "resources": {"gpus": 1}}]  # fmt: skip
    hosts = {"h": {"gpus": [{"index": 0, "name": "NVIDIA H100 80GB HBM3"}]}}
    predicted.predictions(grid, {"predictor": "/opt/aic/bin/aiconfigurator", "model_dirs": {"q": "models/q"}},
                          None, hosts, tmp_path, tmp_path)  # fmt: skip
    walked["predictor"] = asked["executable"] == "/opt/aic/bin/aiconfigurator"
    walked["model_dirs"] = asked["model_dir"] == tmp_path / "models/q"
    assert set(walked) == set(Search.model_fields), "walk every search key"
    assert all(walked.values()), walked


def test_the_plan_estimates_each_strategy_from_defaults_then_from_the_sweeps_own_records(tmp_path):
    from trtsweep.search.estimate import estimates

    grid = [{"id": f"c{i}", "benchmark": {"num_requests": 100, "load": {"max_levels": 6}}, "resources": {"gpus": 1}}
            for i in range(16)]  # fmt: skip
    lines = estimates(grid, SearchSpec(), 60, tmp_path)
    # grid: 16 x (120 s + 6 levels x 100 requests x 1 s) = 192 GPU-minutes
    assert lines[0] == "estimate, grid: 16 points, about 192 GPU-minutes"
    assert lines[1].startswith("estimate, halving: at most 30 points in 4 rounds, about ")
    assert lines[-1].startswith("estimates defaults: 120 s before the benchmark, 1.0 s per request")
    point = tmp_path / "c0"
    point.mkdir()
    (point / "status.json").write_text('{"status": "ok", "stages": {"serve": 20.0, "build": 10.0, "benchmark": 60.0}}')
    (point / "llm_perf.summary.json").write_text('{"levels": [{"summary": {"requests": 100}}, '
                                                 '{"summary": {"requests": 200}}]}')  # fmt: skip
    learned = estimates(grid, SearchSpec(), 60, tmp_path)
    # 16 x (30 s + 600 requests x 0.2 s) = 40 GPU-minutes
    assert learned[0] == "estimate, grid: 16 points, about 40 GPU-minutes"
    assert learned[-1].startswith("estimates from 1 earlier points of this sweep: 30 s before the benchmark, 0.20 s")
    # no capacity search: the grid of fixed levels alone, priced the same way (1 x (30 s + 2 levels x 60 x 0.2 s))
    fixed = estimates([{**grid[0], "benchmark": {"concurrency": [1, 4]}}], SearchSpec(), 60, tmp_path)
    assert fixed[0] == "estimate: 1 points, about 1 GPU-minutes" and "2 levels per point, 60 requests" in fixed[1]
    # before anything runs: what a budget buys (the first round, trimmed as the search trims it), and auto's choice
    spent = estimates(grid, SearchSpec(strategy="auto", budget_gpu_minutes=12), 60, tmp_path)
    assert spent[0] == learned[0]  # the estimates are the whole search's, whatever the budget
    assert "search auto: halving, the cheaper estimate (grid about 40.0 GPU-minutes, halving about " in spent[-2]
    assert spent[-1].startswith("budget 12 GPU-minutes: grid measures 4 of 16 configurations (left unmeasured: c4, ")
    # halving: 8 screened (44 s each), then 4 (45 s), then 2 finalists (90 s): 715 of the 720 GPU-seconds
    assert "; halving screens 8 of 16, keeping what its later rounds need" in spent[-1]
