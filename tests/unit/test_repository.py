from __future__ import annotations

import pytest

from trtsweep.errors import TrtsweepError
from trtsweep.triton import repository

BASE = {"engine_dir": "/models/m", "tokenizer_dir": "/models/m"}


def test_render_produces_the_inflight_batcher_layout_and_checks_it():
    files = repository.render({**BASE, "triton_max_batch_size": 16, "decoupled_mode": False})
    assert sorted(files) == [
        "ensemble/1/.keep",
        "ensemble/config.pbtxt",
        "postprocessing/1/model.py",
        "postprocessing/config.pbtxt",
        "preprocessing/1/model.py",
        "preprocessing/config.pbtxt",
        "tensorrt_llm/1/model.py",
        "tensorrt_llm/config.pbtxt",
    ]
    trt = repository._parse("tensorrt_llm/config.pbtxt", files["tensorrt_llm/config.pbtxt"])
    assert trt.max_batch_size == 16
    assert trt.model_transaction_policy.decoupled is False
    assert trt.parameters["hf_model_dir"].string_value == "/models/m"
    ensemble = repository._parse("ensemble/config.pbtxt", files["ensemble/config.pbtxt"])
    assert [s.model_name for s in ensemble.ensemble_scheduling.step] == [
        "preprocessing",
        "tensorrt_llm",
        "postprocessing",
    ]


def test_write_is_idempotent_and_reports_only_changed_files(tmp_path):
    files = repository.render(BASE)
    assert len(repository.write(files, tmp_path).changed) == len(files)
    assert repository.write(files, tmp_path).changed == []
    changed = repository.write(repository.render({**BASE, "triton_max_batch_size": 2}), tmp_path)
    assert sorted(changed.changed) == sorted(f for f in files if f.endswith("config.pbtxt"))
    assert "max_batch_size: 2" in repository.unified_diff(changed.diffs)


def test_check_mode_writes_nothing(tmp_path):
    result = repository.write(repository.render(BASE), tmp_path / "repo", check_mode=True)
    assert result.changed and not (tmp_path / "repo").exists()


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"engine_dir": ""}, "parameter 'engine_dir' is required"),
        ({"backend": "vllm"}, "backend 'vllm' is not supported"),
        ({"triton_max_batch_size": 0}, "triton_max_batch_size must be an integer >= 1"),
        ({"hf_dtype": "int3"}, "hf_dtype 'int3'"),
        ({"max_num_beams": 3}, "unknown triton repository parameter(s): max_num_beams"),
    ],
)
def test_bad_parameters(params, message):
    with pytest.raises(TrtsweepError) as err:
        repository.render({**BASE, **params})
    assert message in str(err.value)


def test_check_catches_placeholders_schema_and_wiring():
    files = repository.render(BASE)
    bad = dict(files)
    bad["tensorrt_llm/config.pbtxt"] = files["tensorrt_llm/config.pbtxt"].replace(
        "max_batch_size: 8", "max_batch_size: ${triton_max_batch_size}"
    )
    with pytest.raises(TrtsweepError, match=r"tensorrt_llm/config.pbtxt:3: unfilled placeholder"):
        repository.check(bad)
    bad["tensorrt_llm/config.pbtxt"] = files["tensorrt_llm/config.pbtxt"].replace("max_batch_size: 8", "max_batch: 8")
    with pytest.raises(TrtsweepError, match="not a valid Triton ModelConfig"):
        repository.check(bad)
    bad = dict(files)
    bad["ensemble/config.pbtxt"] = files["ensemble/config.pbtxt"].replace(
        'input_map { key: "TOKENS_BATCH" value: "_TOKENS_BATCH" }', 'input_map { key: "TOKENS_BATCH" value: "_NOPE" }'
    )
    with pytest.raises(TrtsweepError, match="reads '_NOPE', which nothing produces"):
        repository.check(bad)


def test_string_parameters_are_escaped():
    files = repository.render({**BASE, "engine_dir": '/models/we"ird\\dir'})
    trt = repository._parse("tensorrt_llm/config.pbtxt", files["tensorrt_llm/config.pbtxt"])
    assert trt.parameters["hf_model_dir"].string_value == '/models/we"ird\\dir'


def test_a_dollar_brace_path_is_a_value_not_a_placeholder():
    # before: any ${...} on a config.pbtxt line was refused as "unfilled placeholder", so a path such as
    # ${HOME}/models could not be written; and the python models read a value starting with "${" as unset
    home = "/srv/${HOME}/models/m"
    files = repository.render({"engine_dir": home, "tokenizer_dir": home})
    pre = repository._parse("preprocessing/config.pbtxt", files["preprocessing/config.pbtxt"])
    assert pre.parameters["tokenizer_dir"].string_value == home
    for name in ("tokenizer_dir", "triton_max_batch_size", " engine_dir ", "gpt_model_path", "triton_backend"):
        bad = dict(files)
        bad["preprocessing/config.pbtxt"] = files["preprocessing/config.pbtxt"].replace(home, f"${{{name}}}")
        with pytest.raises(TrtsweepError, match=r"preprocessing/config.pbtxt:\d+: unfilled placeholder \$\{"):
            repository.check(bad)


def test_the_python_models_treat_only_a_whole_placeholder_as_unset():
    import ast
    import re
    from importlib import resources

    for model in ("preprocessing", "postprocessing", "tensorrt_llm_hf", "tensorrt_llm_bls"):
        source = (resources.files("trtsweep.triton") / "templates" / model / "model.py").read_text()
        tree = ast.parse(source)
        keep = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "_param"]
        keep += [n for n in tree.body if isinstance(n, ast.Assign) and ast.unparse(n.targets[0]) == "UNFILLED"]
        namespace: dict = {"re": re}
        exec(compile(ast.Module(body=keep[::-1], type_ignores=[]), model, "exec"), namespace)
        config = {"parameters": {"a": {"string_value": "${HOME}/m"}, "b": {"string_value": "${tokenizer_dir}"}}}
        assert namespace["_param"](config, "a", "d") == "${HOME}/m", model
        assert namespace["_param"](config, "b", "d") == "d", model


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"tokenizer_dir": "/models/a\nb"}, r"tokenizer_dir: '/models/a\nb' contains the control character '\n'"),
        ({"engine_dir": "/models/\tm"}, r"engine_dir: '/models/\tm' contains the control character '\t'"),
        ({"engine_dir": "/models/m\x00"}, r"engine_dir: '/models/m\x00' contains the control character '\x00'"),
        (
            {"backend": "tensorrtllm", "trtllm_version": "0.19", "extra_parameters": {"lora_prefetch_dir": "/l\x1b"}},
            r"extra_parameters.lora_prefetch_dir: '/l\x1b' contains the control character '\x1b'",
        ),
    ],
)
def test_control_characters_in_paths_are_refused_naming_the_field(params, message):
    with pytest.raises(TrtsweepError) as err:
        repository.render({**BASE, **params})
    assert message in str(err.value)
    assert "\n" not in str(err.value)
