"""The sweep's one answer (trtsweep.report.answer): the report, `trtsweep handoff --point best` and `trtsweep compare`
name the same configuration, judged from the full measurements of the sweep's current plan only.

Fails on the judging before it: handoff and compare judged every row of results.csv, so they named a search's
screening point (`<id>_s1`) the report never named, and a point removed from the sweep or measured with other
settings (an old run's) stayed a candidate everywhere."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from trtsweep.errors import TrtsweepError
from trtsweep.handoff.select import best_point
from trtsweep.report import writer
from trtsweep.report.answer import NO_PLAN
from trtsweep.report.compare import compare

DATA = Path(__file__).resolve().parent.parent / "data" / "report_results" / "smollm2-cpu-demo"
FP32 = "smollm2-135m_float32_tp1pp1_bs4_isl1024osl128_stream"  # the best: int8 drops too much accuracy against it
INT8 = "smollm2-135m_int8_tp1pp1_bs4_isl1024osl128_stream"


def sweep_results(tmp_path: Path) -> Path:
    results = tmp_path / DATA.name
    shutil.copytree(DATA, results)
    return results


def settings_hash(results: Path, point: str) -> str:
    return json.loads((results / point / "status.json").read_text())["settings_hash"]


def plan(results: Path, current: dict[str, str]) -> None:
    (results / "plan.json").write_text(json.dumps({"run_id": "r", "current": current}))


def screening(results: Path, point: str) -> str:
    """The point as a halving search's round-1 screening measurement of it (a quarter of the requests)."""
    screened = f"{point}_s1"
    (results / point).rename(results / screened)
    for name, extra in (("point.json", {"id": screened, "search": {"strategy": "halving", "round": 1, "config": point,
                                                                    "fidelity": 0.25}}),
                        ("status.json", {"point": screened})):  # fmt: skip
        path = results / screened / name
        path.write_text(json.dumps({**json.loads(path.read_text()), **extra}))
    return screened


def named(results: Path) -> dict[str, str]:
    """The first verdict line of the report, of the handoff and of compare (or the error that says there is none)."""
    out = {"report": writer.write(results).verdict[0]}
    try:
        out["handoff"] = best_point(results)[1]
    except TrtsweepError as exc:
        out["handoff"] = str(exc)
    try:
        out["compare"] = compare(results, results)["verdicts"]["a"][0]
    except TrtsweepError as exc:
        out["compare"] = str(exc)
    return out


def test_the_report_handoff_and_compare_name_the_same_best(tmp_path):
    results = sweep_results(tmp_path)
    plan(results, {p: settings_hash(results, p) for p in (FP32, INT8)})
    said = named(results)
    assert said["report"].startswith(f"best under the SLOs: {FP32} at concurrency")
    assert said["handoff"] == said["compare"] == said["report"]
    assert best_point(results)[0] == FP32


def test_screening_measurements_alone_are_no_answer_anywhere(tmp_path):
    """A halving search whose budget ran out after screening: nothing was measured at the full benchmark."""
    results = sweep_results(tmp_path)
    screened = [screening(results, p) for p in (FP32, INT8)]
    plan(results, {p: settings_hash(results, p) for p in screened})
    said = named(results)
    first = "no configuration was measured at the full benchmark of this sweep"
    assert said["report"] == first
    assert said["handoff"] == f"{results}: {first}; nothing to hand off (give --point to choose one)"
    assert said["compare"] == f"{results}: {first}: nothing to compare"
    report = writer.write(results)
    assert report.verdict[-1] == ("not judged: 2 screening measurement(s) of the search (its evidence, at a share "
                                  f"of the requests), never an answer: {', '.join(screened)}")  # fmt: skip
    assert "not judged" in (results / "report.md").read_text() and "not judged" in (results / "report.html").read_text()


@pytest.mark.parametrize(
    ("current", "why"),
    [
        ({INT8: None},
         "stale: not a point of the sweep's current plan (removed from the sweep, or an earlier search's)"),
        ({FP32: "0123456789abcdef", INT8: None},
         "stale: measured other settings (settings hash {fp32}, the sweep's is 0123456789abcdef): rerun it"),
    ],
    ids=["removed-from-the-sweep", "other-settings"],
)  # fmt: skip
def test_a_stale_point_is_listed_and_never_judged(tmp_path, current, why):
    results = sweep_results(tmp_path)
    plan(results, {FP32: settings_hash(results, FP32), INT8: settings_hash(results, INT8)})
    assert writer.write(results).verdict[0].startswith(f"best under the SLOs: {FP32}")
    # the sweep changed: the report of the same folders is judged again (the plan is one of its inputs)
    plan(results, {p: h or settings_hash(results, p) for p, h in current.items()})
    said = named(results)
    # without fp32 (the accuracy reference) int8 is judged against itself and meets every SLO
    assert said["report"].startswith(f"best under the SLOs: {INT8} at concurrency")
    assert said["handoff"] == said["compare"] == said["report"]
    assert f"{FP32}: not judged: {why.format(fp32=settings_hash(results, FP32))}" in writer.write(results).verdict
    rows = json.loads((results / "results.json").read_text())["rows"]
    assert {r["point"] for r in rows} == {FP32, INT8}  # results.csv keeps every measurement


def test_results_without_a_plan_are_judged_whole_saying_so(tmp_path):
    results = sweep_results(tmp_path)
    said = named(results)
    assert said["report"].startswith(f"best under the SLOs: {FP32}")
    assert said["handoff"] == said["compare"] == said["report"]
    assert writer.write(results).verdict[-1] == NO_PLAN


def test_a_search_point_lost_with_its_host_and_measured_again_is_not_a_point_the_run_failed(tmp_path):
    """A host went away during a search's round 1 (its point lost); round 2 measured the configuration again on a
    healthy host. The run measured every configuration: the lost point says where it was measured again, and is not
    among the points not ok (which fail the sweep's last task). A lost point never measured again still is."""
    results = sweep_results(tmp_path)
    lost, again, never = f"{FP32}_s1", f"{FP32}_s2", f"{INT8}_s1"
    for point, config, number, state in ((lost, FP32, 1, "lost"), (again, FP32, 2, "ok"), (never, INT8, 1, "lost")):
        (results / point).mkdir()
        search = {"strategy": "halving", "round": number, "config": config, "fidelity": 0.25}
        (results / point / "point.json").write_text(json.dumps({"id": point, "search": search}))
        cause = "host h2 stopped running the sweep" if state == "lost" else None
        record = {"point": point, "status": state, "host": "h1", "gpus": [0], "stage": "serve", "cause": cause}
        (results / point / "status.json").write_text(json.dumps(record))
    report = writer.write(results)
    assert [line.split(":")[0] for line in report.not_ok] == [never]
    assert f"{lost}: lost on h1 gpus 0 at stage serve: host h2 stopped running the sweep; measured again as {again} " \
           "(ok)" in report.text  # fmt: skip
