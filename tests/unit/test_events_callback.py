"""The trtsweep_events callback driven as Ansible drives it (plan result, an unreachable host, the run's stats) and
the host's collector driven by its lanes' journal lines, over a real run's results (tests/data/report_results): the
report written when no report play ran, and the stage a lost point is reported in."""

from __future__ import annotations

import importlib.util
import json
import shutil
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from trtsweep.fleet import status
from trtsweep.fleet.collect import Collector

ROOT = Path(__file__).resolve().parent.parent.parent
DATA = ROOT / "tests" / "data" / "report_results" / "smollm2-cpu-demo"
FP32 = "smollm2-135m_float32_tp1pp1_bs4_isl1024osl128_stream"
INT8 = "smollm2-135m_int8_tp1pp1_bs4_isl1024osl128_stream"
NEVER = "smollm2-135m_int4_tp1pp1_bs4_isl1024osl128_stream"  # planned after int8 on the same lane
LANE = "localhost--lane0"
RUN_ID = json.loads((DATA / FP32 / "status.json").read_text())["run_id"]


def load_callback() -> Any:
    spec = importlib.util.spec_from_file_location("trtsweep_events", ROOT / "callback_plugins" / "trtsweep_events.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class Display:
    def __init__(self) -> None:
        self.warnings: list[str] = []

    def warning(self, msg: str) -> None:
        self.warnings.append(msg)


def point(point_id: str) -> dict[str, Any]:
    return {"id": point_id, "host": "localhost", "lane": LANE, "gpus": []}


@pytest.fixture
def run(tmp_path: Path) -> tuple[Any, Path, Display]:
    """The callback after the plan task of a run of three points on one lane (float32 finished ok, as the data
    says), with its warnings kept."""
    results = Path(shutil.copytree(DATA, tmp_path / "smollm2-cpu-demo"))
    shutil.rmtree(results / INT8)
    plan = {"run_id": RUN_ID, "results_dir": str(results), "points": [point(FP32), point(INT8), point(NEVER)],
            "kept": [], "lanes": [{"name": LANE, "host": "localhost", "points": [FP32, INT8, NEVER]}]}  # fmt: skip
    callback = load_callback().CallbackModule()
    display = Display()
    callback._display = display
    callback.v2_runner_on_ok(SimpleNamespace(_task=SimpleNamespace(action="trtsweep_plan"), _result=plan))
    (results / "plan-for-test.json").write_text(json.dumps(plan))
    return callback, results, display


def journal(results: Path, *lines: dict[str, Any]) -> None:
    """The host's collector takes these journal lines of the lane (no point ends here: nothing to fetch)."""
    plan = json.loads((results / "plan-for-test.json").read_text())
    Collector(results, plan, "localhost").take({LANE: list(lines)}, fetch=lambda remote, local: None)


def unreachable(callback: Any) -> None:
    callback.v2_runner_on_unreachable(SimpleNamespace(_host=SimpleNamespace(get_name=lambda: "localhost"),
                                                      _result={"msg": "ssh: connection refused"}))  # fmt: skip


def test_with_every_host_gone_the_callback_writes_the_report(run):
    callback, results, display = run
    unreachable(callback)
    callback.v2_playbook_on_stats(None)
    assert all((results / name).is_file() for name in ("report.html", "report.md", "results.csv", "report.csv"))
    (warning,) = display.warnings
    assert warning.startswith("the report play did not run; report written by trtsweep_events:\n")
    assert f"{INT8}: lost on localhost" in warning
    events = json.loads((results / "events.json").read_text())
    assert events["lanes"][LANE]["unreachable"] is True  # the host's lanes are shown unreachable


def test_a_point_lost_early_is_lost_at_its_own_stage_and_a_point_never_started_at_none(run):
    callback, results, display = run
    journal(results, {"event": "start", "point": INT8, "t": 1.0}, {"event": "stage", "point": INT8,
                                                                   "stage": "download", "t": 2.0})  # fmt: skip
    unreachable(callback)
    callback.v2_playbook_on_stats(None)
    lost = status.read(results, INT8)
    assert lost is not None and (lost["status"], lost["stage"]) == ("lost", "download")
    assert lost["cause"] == "host localhost unreachable: ssh: connection refused (during stage download)"
    never = status.read(results, NEVER)
    assert never is not None and (never["status"], never["stage"]) == ("lost", None)
    assert never["cause"] == "host localhost unreachable: ssh: connection refused (before the point started)"
    assert status.read(results, FP32)["status"] == "ok"  # type: ignore[index]
    assert not any("could not write" in w for w in display.warnings)
