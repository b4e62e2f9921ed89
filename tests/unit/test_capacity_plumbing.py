"""Issue 25, the capacity of one configuration: the sweep's `benchmark.load` (schema, plan), the llm-perf command
line built from it (trtsweep.perf.argv: the lane's and the trtsweep_llm_perf module's), results.csv's capacity
columns from a summary's `search` object, and the report's sizing for `slo.target_request_rate`
(trtsweep.report.sizing)."""

from __future__ import annotations

import ast
import copy
import csv
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from trtsweep.errors import TrtsweepError
from trtsweep.fleet.status import settings_hash
from trtsweep.perf import argv as perf_argv
from trtsweep.perf import cli
from trtsweep.perf import search as perf_search
from trtsweep.report import results_table, sizing, writer
from trtsweep.sweep import planning, schema, slo

from .test_schema_reaches import llm_perf_argv, point_run

ROOT = Path(__file__).resolve().parents[2]
LLM_PERF_ROLE = ROOT / "roles" / "llm_perf"
LLM_PERF_MODULE = ROOT / "library" / "trtsweep_llm_perf.py"
DATA = ROOT / "tests" / "data" / "report_results" / "smollm2-cpu-demo"
FP32 = "smollm2-135m_float32_tp1pp1_bs4_isl1024osl128_stream"
INT8 = "smollm2-135m_int8_tp1pp1_bs4_isl1024osl128_stream"
LOAD = {"search": "slo", "variable": "concurrency", "max": 64}


def sweep(load: dict[str, Any] | None = LOAD, slo_: dict[str, Any] | None = None, **benchmark: Any) -> dict[str, Any]:
    return {
        "name": "cap",
        "models": [{"repo_id": "HuggingFaceTB/SmolLM2-135M-Instruct", "name": "smollm2"}],
        "precisions": ["float32"],
        "parallelism": [{"tp": 1, "pp": 1}],
        "max_batch_sizes": [4],
        "lengths": [{"input": 512, "output": 64}],
        "streaming": [True],
        "benchmark": {"input_data": "data/prompts.jsonl", **({"load": load} if load else {}), **benchmark},
        **({"slo": slo_} if slo_ is not None else {"slo": {"ttft_p99_ms": 1000}}),
    }


def error_of(raw: dict[str, Any]) -> str:
    with pytest.raises(TrtsweepError) as caught:
        schema.validate(raw)
    text = str(caught.value)
    assert "\n" not in text
    return text


# -- the sweep file ----------------------------------------------------------------------------------------------


def test_the_schema_takes_a_load_search_with_a_slo_limit():
    for load in (LOAD, {"search": "slo", "variable": "concurrency", "max": 16, "max_levels": 5}):
        assert schema.validate(sweep(load)) == sweep(load)  # unchanged
    assert schema.validate(sweep(slo_={"min_success_rate": 0.99, "target_request_rate": 300}))


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (sweep(concurrency=[1, 2]), "sweep field 'benchmark.load': a load search chooses its own levels: give load "
         "or concurrency, not both"),
        (sweep(slo_={}), "sweep field 'slo': benchmark.load searches for the highest load within the SLOs: give at "
         "least one of ttft_p99_ms, tpot_p99_ms, e2e_p99_ms, min_success_rate"),
        (sweep(slo_={"min_accuracy": 0.2, "target_request_rate": 10}), "sweep field 'slo': benchmark.load searches "
         "for the highest load within the SLOs: give at least one of ttft_p99_ms, tpot_p99_ms, e2e_p99_ms, "
         "min_success_rate"),
        ({k: v for k, v in sweep().items() if k != "slo"}, "sweep field 'slo': benchmark.load searches for the "
         "highest load within the SLOs: give at least one of ttft_p99_ms, tpot_p99_ms, e2e_p99_ms, min_success_rate"),
        (sweep({**LOAD, "max": 8.5}), "sweep field 'benchmark.load.max': expected a whole number (variable "
         "concurrency: requests in flight), got 8.5"),
        (sweep({**LOAD, "max": 0}), "sweep field 'benchmark.load.max': expected a positive number, got 0"),
        (sweep({**LOAD, "variable": "qps"}), "sweep field 'benchmark.load.variable': expected 'concurrency', got "
         "'qps'"),
        # llm-perf searches a request rate too; the sweep's report keys a point's levels by concurrency
        (sweep({**LOAD, "variable": "request_rate", "max": 7.5}), "sweep field 'benchmark.load.variable': expected "
         "'concurrency', got 'request_rate'"),
        (sweep({**LOAD, "search": "max"}), "sweep field 'benchmark.load.search': expected 'slo', got 'max'"),
        (sweep({**LOAD, "max_levels": 0}), "sweep field 'benchmark.load.max_levels': expected a positive integer, "
         "got 0"),
        (sweep({"search": "slo", "variable": "concurrency"}), "sweep field 'benchmark.load.max': expected a positive "
         "number, got nothing (the field is required)"),
        (sweep({**LOAD, "levels": 3}), "sweep field 'benchmark.load': unknown key(s) ['levels']; known: ['max', "
         "'max_levels', 'search', 'variable']"),
        (sweep(slo_={"ttft_p99_ms": 1, "target_request_rate": 0}), "sweep field 'slo.target_request_rate': expected "
         "a positive number, got 0"),
    ],
)  # fmt: skip
def test_the_schema_refuses_a_load_search_in_one_line_naming_the_field(raw, message):
    assert error_of(raw) == message


def test_an_unknown_key_of_an_optional_section_lists_the_known_ones():
    assert error_of(sweep(slo_={"ttft": 1})).startswith("sweep field 'slo': unknown key(s) ['ttft']; known: ['accuracy")


def test_the_schema_file_says_the_same_between_fields():
    jsonschema = pytest.importorskip("jsonschema")
    validator = jsonschema.Draft202012Validator(json.loads((ROOT / "sweep.schema.json").read_text()))
    assert validator.is_valid({"trtsweep_sweep": sweep()})
    for bad in (sweep(concurrency=[1]), sweep(slo_={}), sweep(slo_={"min_accuracy": 0.2})):
        assert not validator.is_valid({"trtsweep_sweep": bad})


def test_slo_check_takes_the_target_rate_and_the_search_takes_only_the_latency_and_success_limits():
    given = {"ttft_p99_ms": 1000, "min_accuracy": 0.2, "min_success_rate": 0.99, "target_request_rate": 300}
    assert slo.check(given) == given
    assert slo.search_limits(given) == {"ttft_p99_ms": 1000, "min_success_rate": 0.99}
    assert slo.search_limits(None) == {}


def test_a_point_carries_its_load_search_with_its_limits_in_its_settings_hash():
    (point,) = planning.expand(sweep(slo_={"tpot_p99_ms": 50, "min_accuracy": 0.2}, num_requests=40))
    assert point["benchmark"]["load"] == {**LOAD, "max_levels": 8, "slo": {"tpot_p99_ms": 50}}
    assert "concurrency" not in point["benchmark"] and point["benchmark"]["num_requests"] == 40
    (other,) = planning.expand(sweep(slo_={"tpot_p99_ms": 40}, num_requests=40))
    (more,) = planning.expand(sweep({**LOAD, "max": 128}, slo_={"tpot_p99_ms": 50}, num_requests=40))
    hashes = {settings_hash(p) for p in (point, other, more)}
    assert len(hashes) == 3  # a changed limit or max measures something else
    (plain,) = planning.expand(sweep(None, concurrency=[1, 2]))
    assert "load" not in plain["benchmark"] and plain["benchmark"]["concurrency"] == [1, 2]  # as before


# -- the lane and the module ------------------------------------------------------------------------------------


def _argument_spec(path: Path) -> dict[str, Any]:
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "AnsibleModule":
            return ast.literal_eval(next(k.value for k in node.keywords if k.arg == "argument_spec"))
    raise AssertionError(f"{path}: no AnsibleModule(argument_spec=...)")


# the role variables a caller of the llm_perf role sets besides the search (its prompts and export file)
ROLE_VARS = {
    "llm_perf_input_data": "data/prompts.jsonl",
    "llm_perf_work_dir": "/r",
    "llm_perf_export_file": "/r/p.json",
}


def role_argv(variables: dict[str, Any]) -> list[str]:
    """The llm_perf role's module call with these role variables over its defaults (evaluated with Ansible's own
    templating, validated by the module's argument spec), as the llm-perf command line the module builds."""
    # Ansible is imported only when this runs, never at collection: importing it patches sys.intern, which breaks
    # torch._dynamo for every test of the session that loads a model in-process (see pyproject's pytest addopts).
    from ansible.module_utils.common.arg_spec import ArgumentSpecValidator
    from ansible.parsing.dataloader import DataLoader
    from ansible.template import Templar, trust_as_template

    def trusted(value: Any) -> Any:  # a role's YAML is trusted as templates, as Ansible trusts its role files
        if isinstance(value, str):
            return trust_as_template(value)
        if isinstance(value, dict):
            return {k: trusted(v) for k, v in value.items()}
        return [trusted(v) for v in value] if isinstance(value, list) else value

    defaults = trusted(yaml.safe_load((LLM_PERF_ROLE / "defaults" / "main.yml").read_text()))
    tasks = trusted(yaml.safe_load((LLM_PERF_ROLE / "tasks" / "main.yml").read_text()))
    templar = Templar(loader=DataLoader())
    templar.available_variables = {**defaults, **variables}
    args = templar.template(next(t for t in tasks if "trtsweep_llm_perf" in t)["trtsweep_llm_perf"])
    checked = ArgumentSpecValidator(_argument_spec(LLM_PERF_MODULE)).validate(args)
    assert not checked.error_messages, checked.error_messages
    return perf_argv.command(checked.validated_parameters)


def test_the_command_line_has_the_search_flags_and_no_concurrency():
    # the module builds its command line with llm-perf's own mapping, the one the lane uses
    imports = [node for node in ast.walk(ast.parse(LLM_PERF_MODULE.read_text())) if isinstance(node, ast.ImportFrom)]
    assert any(n.module == "trtsweep.perf.argv" and [a.name for a in n.names] == ["command"] for n in imports)
    assert schema.SEARCH_LIMITS is perf_search.KEYS  # one list of the keys a search judges by: llm-perf's
    params = {"url": "h:8001", "input_data": "/p.jsonl", "export_file": "/r/llm_perf.json", "num_requests": 100,
              "concurrency": [1], "streaming": True, "chat_template": False, "extra_inputs": {},
              "search": {"search": "slo", "variable": "concurrency", "max": 64.0, "max_levels": 6,
                         "slo": {"min_success_rate": 0.99, "ttft_p99_ms": 1000.0, "min_accuracy": 0.2,
                                 "e2e_p99_ms": 20000, "tpot_p99_ms": 50}}}  # fmt: skip
    argv = perf_argv.command(params)
    tail = argv[argv.index("--search") :]
    assert tail[:10] == ["--search", "slo", "--search-variable", "concurrency", "--search-slo",
                         "ttft_p99_ms=1000,tpot_p99_ms=50,e2e_p99_ms=20000,min_success_rate=0.99",
                         "--search-max", "64", "--search-max-levels", "6"]  # fmt: skip
    assert "--concurrency" not in argv and argv[argv.index("--num-requests") + 1] == "100"
    rate = perf_argv.command({**params, "search": {**params["search"], "variable": "request_rate", "max": 2.5}})
    assert rate[rate.index("--search-max") + 1] == "2.5"
    hinted = perf_argv.command({**params, "search": {**params["search"], "hint": [24.0, 25.0]}})
    assert hinted[hinted.index("--search-hint") + 1] == "24,25"
    assert cli.search_from_args(cli.parser().parse_args([*hinted[3:], "-m", "ensemble"])).hint == (24, 25)
    plain = perf_argv.command({**params, "search": None})
    assert plain[plain.index("--concurrency") + 1] == "1" and "--search" not in plain
    with pytest.raises(ValueError, match=r"search\.slo needs at least one of"):
        perf_argv.command({**params, "search": {**params["search"], "slo": {"min_accuracy": 0.2}}})


def test_the_lane_and_the_role_hand_the_points_search_to_llm_perf(tmp_path):
    (point,) = planning.expand(sweep({**LOAD, "max_levels": 4}, slo_={"e2e_p99_ms": 20000}, num_requests=30))
    assert point_run(point, tmp_path).benchmark_params()["search"] == point["benchmark"]["load"]
    lane = llm_perf_argv(point, tmp_path)
    # the llm_perf role, given the point's search as the lane gives it, passes it to the module the same way
    role = role_argv({**ROLE_VARS, "llm_perf_search": point["benchmark"]["load"], "llm_perf_num_requests": 30})
    flags = ("--search", "--search-variable", "--search-slo", "--search-max", "--search-max-levels", "--num-requests")
    for argv in (lane, role):
        assert "--concurrency" not in argv
        found = {flag: argv[argv.index(flag) + 1] for flag in flags}
        assert found == {"--search": "slo", "--search-variable": "concurrency", "--search-slo": "e2e_p99_ms=20000",
                         "--search-max": "64", "--search-max-levels": "4", "--num-requests": "30"}  # fmt: skip
    assert "--search" not in role_argv({**ROLE_VARS, "llm_perf_search": None})


# -- results.csv ---------------------------------------------------------------------------------------------------

SEARCH = {
    "variable": "concurrency",
    "slo": {"ttft_p99_ms": 5000},
    "levels": [
        {"value": 1, "met": True, "misses": [], "stopped_early": None, "request_throughput": 0.4,
         "output_token_throughput": 40.0},
        {"value": 4, "met": False, "misses": ["TTFT p99 6000 ms > 5000 ms"], "stopped_early": "ttft_p99_ms",
         "request_throughput": 0.9, "output_token_throughput": 90.0},
        {"value": 2, "met": True, "misses": [], "stopped_early": None, "request_throughput": 0.7,
         "output_token_throughput": 70.0},
    ],
    "capacity": {"value": 2, "concurrency": 2, "request_rate": 0.7, "output_token_throughput": 70.0},
    "bound": "tight",
    "budget_levels": 8,
}  # fmt: skip


def searched_results(tmp_path: Path, search: dict[str, Any] = SEARCH, gpus: list[int] | None = None) -> Path:
    results = Path(shutil.copytree(DATA, tmp_path / "smollm2-cpu-demo"))
    summary_file = results / INT8 / "llm_perf.summary.json"
    summary_file.write_text(json.dumps({**json.loads(summary_file.read_text()), "search": search}))
    if gpus is not None:
        status_file = results / INT8 / "status.json"
        status_file.write_text(json.dumps({**json.loads(status_file.read_text()), "gpus": gpus}))
    return results


def read_csv(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as handle:
        return list(csv.DictReader(handle))


def test_results_csv_has_the_capacity_on_each_row_of_a_searched_point_and_empty_elsewhere(tmp_path):
    results = searched_results(tmp_path, gpus=[0, 1])
    writer.write(results)
    rows = read_csv(results / "results.csv")
    assert list(rows[0]) == list(results_table.COLUMNS)
    searched = [r for r in rows if r["point"] == INT8]
    assert searched and all(
        [r[c] for c in results_table.CAPACITY] == ["0.7", "2", "35", "3", "tight"] for r in searched
    )
    assert all(r[c] == "" for r in rows if r["point"] == FP32 for c in results_table.CAPACITY)


def test_results_csv_leaves_an_unknown_capacity_empty_never_zero(tmp_path):
    none = {**SEARCH, "capacity": None, "bound": "none", "levels": SEARCH["levels"][1:2]}
    writer.write(results := searched_results(tmp_path, none))
    row = next(r for r in read_csv(results / "results.csv") if r["point"] == INT8)
    assert [row[c] for c in results_table.CAPACITY] == ["", "", "", "1", "none"]
    capacity = {"value": 2.0, "concurrency": None, "request_rate": 1.9, "output_token_throughput": None}
    by_rate = {**SEARCH, "variable": "request_rate", "bound": "open", "capacity": capacity}
    columns = results_table.capacity_columns(by_rate, 0)
    assert columns == {"capacity_rps": 1.9, "capacity_concurrency": None, "capacity_out_tok_s_per_gpu": None,
                       "capacity_levels": 3, "capacity_bound": "open"}  # fmt: skip


# -- sizing ------------------------------------------------------------------------------------------------------


def row(point: str, bound: str | None, rate: float | None, gpus: int, concurrency: int | None = 8) -> dict[str, Any]:
    return {"point": point, "point_status": "ok", "concurrency": 1, "gpus": gpus, "capacity_bound": bound,
            "capacity_rps": rate, "capacity_concurrency": concurrency}  # fmt: skip


def test_sizing_names_the_configuration_needing_the_fewest_gpus():
    rows = [row("a_tp1", "tight", 80.0, 2, 16), row("a_tp1", "tight", 80.0, 2, 16), row("b_tp4", "tight", 200.0, 4),
            row("c_open", "open", 50.0, 1), row("d_none", "none", None, 1), row("e_plain", None, None, 1)]  # fmt: skip
    assert sizing.lines(rows, 300) == [
        "serving 300 req/s within the SLOs: c_open needs 6 replicas, 6 GPUs (fewest) "
        "(at least: the search max met the SLOs)",
        "  c_open: 50 req/s per replica at concurrency 8 (at least: the search max met the SLOs) -> 6 replicas, "
        "6 GPUs (fewest)",
        "  b_tp4: 200 req/s per replica at concurrency 8 -> 2 replicas, 8 GPUs",
        "  a_tp1: 80 req/s per replica at concurrency 16 -> 4 replicas, 8 GPUs",
        "  d_none: cannot meet the SLOs at any load measured",
    ]
    sized = {e["point"]: (e["replicas"], e["total_gpus"]) for e in sizing.size(rows, 300)}
    assert sized == {"a_tp1": (4, 8), "b_tp4": (2, 8), "c_open": (6, 6), "d_none": (None, None)}  # e: no search
    assert sizing.lines(rows, 80)[0] == "serving 80 req/s within the SLOs: a_tp1 needs 1 replica, 2 GPUs (fewest)"


def test_sizing_without_a_target_a_search_or_a_capacity():
    assert sizing.lines([row("a", "tight", 1.0, 1)], None) == []
    assert sizing.lines([row("a", None, None, 1)], 5) == [
        "serving 5 req/s within the SLOs: no configuration was measured with a capacity search (benchmark.load)"
    ]
    failed = {**row("b", "tight", 9.0, 1), "point_status": "failed"}
    assert sizing.lines([row("a", "none", None, 1), failed], 5) == [
        "serving 5 req/s within the SLOs: no configuration can (cannot meet the SLOs at any load measured, "
        "or not sized)",
        "  a: cannot meet the SLOs at any load measured",
        "  b: not sized: the point did not finish ok (failed)",
    ]
    cpu = sizing.lines([row("cpu", "tight", 2.0, 0, None)], 5)
    assert cpu == ["serving 5 req/s within the SLOs: cpu needs 3 replicas, no GPU (fewest)",
                   "  cpu: 2 req/s per replica -> 3 replicas, no GPU (fewest)"]  # fmt: skip


def test_the_report_adds_the_sizing_lines_for_the_target_rate(tmp_path):
    results = searched_results(tmp_path, gpus=[0, 1])
    target = {**json.loads((DATA / "slo.json").read_text()), "target_request_rate": 3}
    report = writer.write(results, copy.deepcopy(target))
    assert report.verdict[-2:] == [
        f"serving 3 req/s within the SLOs: {INT8} needs 5 replicas, 10 GPUs (fewest)",
        f"  {INT8}: 0.7 req/s per replica at concurrency 2 -> 5 replicas, 10 GPUs (fewest)",
    ]
    assert "serving 3 req/s within the SLOs" in (results / "report.md").read_text()
    page = (results / "report.html").read_text()  # the page's Sizing section, after the verdict
    sized = page.index("<h2>Sizing</h2>")
    assert page.index("<h2>Verdict</h2>") < sized < page.index("needs 5 replicas, 10 GPUs (fewest)", sized)
    assert json.loads((results / "slo.json").read_text())["target_request_rate"] == 3
    without = writer.write(searched_results(tmp_path / "again"))  # the kept slo.json has no target
    assert not any(line.startswith("serving") for line in without.verdict)
    assert "<h2>Sizing</h2>" not in (tmp_path / "again" / "smollm2-cpu-demo" / "report.html").read_text()
