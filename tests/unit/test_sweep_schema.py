"""The sweep file's schema (trtsweep.sweep.schema): one-line errors naming the path, the examples valid against the
model and against the committed sweep.schema.json, which is the `trtsweep schema` output."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
import yaml

from trtsweep import cli
from trtsweep.errors import TrtsweepError
from trtsweep.sweep import schema
from trtsweep.sweep.planning import expand

ROOT = Path(__file__).resolve().parents[2]
SCHEMA_FILE = ROOT / "sweep.schema.json"
EXAMPLES = [*sorted((ROOT / "sweeps").glob("*.yml")), ROOT / "group_vars" / "all" / "sweep.yml"]


def example(name: str = "qwen2_7b_engine_vs_pytorch.yml") -> dict:
    return copy.deepcopy(yaml.safe_load((ROOT / "sweeps" / name).read_text())["trtsweep_sweep"])


def error_of(sweep: dict) -> str:
    with pytest.raises(TrtsweepError) as caught:
        schema.validate(sweep)
    text = str(caught.value)
    assert "\n" not in text
    return text


def test_a_misspelled_key_deep_in_the_file_fails_in_one_line_naming_its_path():
    sweep = example()
    sweep["lengths"][0]["outptu"] = sweep["lengths"][0].pop("output")
    assert error_of(sweep) == "sweep field 'lengths[0]': unknown key(s) ['outptu']; known: ['input', 'output']"
    sweep = example()
    sweep["models"][0]["extra_inputs"] = {"top_k": 1}
    sweep["models"][0]["revison"] = "main"
    assert error_of(sweep).startswith("sweep field 'models[0]': unknown key(s) ['revison']; known: [")
    sweep = example()
    sweep["benchmark"]["warmup"] = 2
    assert error_of(sweep).startswith("sweep field 'benchmark': unknown key(s) ['warmup']; known: [")
    with pytest.raises(TrtsweepError, match=r"^sweep field 'lengths\[0\]': unknown key\(s\) \['outptu'\]"):
        expand({**example(), "lengths": [{"input": 8, "outptu": 8}]})  # the planner validates first


def test_a_negative_max_batch_size_names_the_field_and_the_range():
    sweep = example()
    sweep["max_batch_sizes"] = [8, -4]
    assert error_of(sweep) == "sweep field 'max_batch_sizes[1]': expected a positive integer, got -4"


@pytest.mark.parametrize(
    ("path", "value", "message"),
    [
        (("benchmark", "concurrency"), "4", "sweep field 'benchmark.concurrency': expected a non-empty list, each a "
         "positive integer, got '4'"),
        (("benchmark", "seed"), True, "sweep field 'benchmark.seed': expected an integer, got True"),
        (("benchmark", "request_timeout"), float("inf"), "sweep field 'benchmark.request_timeout': expected a "
         "positive number, got inf"),
        (("trtllm", "runtime"), "k8s", "sweep field 'trtllm.runtime': expected one of 'native', 'container', 'pyxis', "
         "got 'k8s'"),
        (("slo",), {"min_success_rate": 1.5}, "sweep field 'slo.min_success_rate': expected a fraction in [0, 1], "
         "got 1.5"),
        (("models",), [{"name": "x"}], "sweep field 'models[0].repo_id': expected a string matching '/', got "
         "nothing (the field is required)"),
        (("benchmark", "extra_inputs"), {"top k": 1}, "sweep field 'benchmark.extra_inputs': expected keys that are "
         "a name matching '^[A-Za-z_][A-Za-z0-9_]*$', got 'top k'"),
        (("placement",), {"weights": {"*fp8*": 0}}, "sweep field 'placement.weights['*fp8*']': expected a positive "
         "number, got 0"),
    ],
)  # fmt: skip
def test_each_problem_names_its_path_what_is_expected_and_what_was_given(path, value, message):
    sweep = example()
    target = sweep
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    assert error_of(sweep) == message


def test_not_a_mapping():
    expected = "trtsweep_sweep: expected a mapping with keys from ['attention_dp', 'backend', 'benchmark'"
    assert error_of([1]).startswith(expected)


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_every_example_validates_against_the_model_and_the_schema_file(path):
    text = path.read_text()
    relative = Path("..") if path.parent.name == "sweeps" else Path("..") / ".."
    assert text.splitlines()[0] == f"# yaml-language-server: $schema={relative / 'sweep.schema.json'}"
    assert (path.parent / relative / "sweep.schema.json").resolve() == SCHEMA_FILE
    data = yaml.safe_load(text)
    assert schema.validate(data["trtsweep_sweep"]) is data["trtsweep_sweep"]  # returned unchanged
    schema.SweepFile.model_validate(data)
    jsonschema = pytest.importorskip("jsonschema")
    document = json.loads(SCHEMA_FILE.read_text())
    jsonschema.Draft202012Validator.check_schema(document)
    jsonschema.Draft202012Validator(document).validate(data)


def test_the_schema_file_rejects_what_the_model_rejects():
    jsonschema = pytest.importorskip("jsonschema")
    validator = jsonschema.Draft202012Validator(json.loads(SCHEMA_FILE.read_text()))
    for bad in ({"max_batch_sizes": [-1]}, {"colour": 1}, {"backend": "tensorrtllm", "trtllm": None},
                {"benchmark": {"input_data": "p.jsonl", "extra_inputs": {"top k": 1}}}):  # fmt: skip
        sweep = {**example("smollm2_cpu_flows.yml"), **bad}
        assert not validator.is_valid({"trtsweep_sweep": sweep}), bad
        with pytest.raises(TrtsweepError):
            expand(sweep)  # the model, or the planner's cross-field check (a tensorrtllm sweep needs trtllm)


def test_the_schema_file_is_current(capsys):
    assert cli.main(["schema"]) == 0
    printed = capsys.readouterr().out
    document = json.loads(printed)
    assert document["$schema"] == "https://json-schema.org/draft/2020-12/schema" and document["title"]
    assert "$id" not in document and list(document["properties"]) == ["trtsweep_sweep"]
    assert SCHEMA_FILE.read_text() == printed, "sweep.schema.json is stale: run `trtsweep schema > sweep.schema.json`"


def test_the_benchmark_defaults_the_planner_fills_in_are_the_models():
    from trtsweep.sweep import planning

    assert planning.BENCHMARK_DEFAULTS == {  # the model's defaults are llm-perf's
        "protocol": "grpc", "concurrency": [1], "num_requests": None, "warmup_requests": 1, "max_tokens": None,
        "chat_template": False, "seed": 0, "extra_inputs": {}, "request_timeout": 600, "stall_timeout": 60,
        "connect_timeout": 10,
    }  # fmt: skip


def test_openai_is_the_protocol_of_a_sweep_trtllm_serve_serves_alone():
    serve_only = {**example(), "flow": "pytorch", "servers": ["trtllm-serve"]}
    serve_only["benchmark"] = {**serve_only["benchmark"], "protocol": "openai"}
    schema.validate(serve_only)  # was refused: "expected 'grpc' or 'http'"
    for other in ({"servers": ["triton", "trtllm-serve"]}, {"flow": ["engine", "pytorch"]}):
        refused = error_of({**serve_only, **other})
        assert "sweep field 'benchmark.protocol': openai is trtllm-serve's endpoint" in refused, refused
