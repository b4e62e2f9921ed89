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
        'value: "_TOKENS_BATCH" }\n      input_map', 'value: "_NOPE" }\n      input_map'
    )
    with pytest.raises(TrtsweepError, match="reads '_NOPE', which nothing produces"):
        repository.check(bad)


def test_string_parameters_are_escaped():
    files = repository.render({**BASE, "engine_dir": '/models/we"ird\\dir'})
    trt = repository._parse("tensorrt_llm/config.pbtxt", files["tensorrt_llm/config.pbtxt"])
    assert trt.parameters["hf_model_dir"].string_value == '/models/we"ird\\dir'
