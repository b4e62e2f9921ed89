"""Quantization for the PyTorch flow: hf_ptq.py commands checked against the recorded argument definitions
(src/trtsweep/toolchain/llmapi/modelopt/<release>.json), pre-quantized ModelOpt checkpoints, the export's content
key and calibration on the user's prompts."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from trtsweep.errors import TrtsweepError
from trtsweep.toolchain import calibration
from trtsweep.toolchain.llmapi import modelopt

PROMPTS = Path(__file__).resolve().parents[2] / "data" / "prompts.jsonl"
RELEASES = list(modelopt.releases())
SERVED = [p for p, q in modelopt.PRECISIONS.items() if q is not None and p != "int8_sq"]


def spec(**over: object) -> modelopt.QuantizeSpec:
    base = {"precision": "fp8", "model_dir": "/models/llama", "tool_dir": "/opt/Model-Optimizer",
            "export_dir": "/cache/checkpoints/out", "model_id": "meta-llama/Llama-3.1-8B-Instruct",
            "model_revision": "0e9e39f"}  # fmt: skip
    return modelopt.QuantizeSpec(**{**base, **over})  # type: ignore[arg-type]


def flags_of(argv: list[str]) -> list[str]:
    return [a for a in argv if a.startswith("--")]


def value(argv: list[str], flag: str) -> str:
    return argv[argv.index(flag) + 1]


def test_every_release_names_its_sources_and_covers_the_precisions():
    assert RELEASES == ["1.0", "1.1", "1.2"]
    card = yaml.safe_load(modelopt.DATASET_CARD.split("---")[1])
    for release in RELEASES:
        entry = modelopt.record(release)
        tool = entry["tools"][modelopt.TOOL]
        assert re.fullmatch(r"[0-9a-f]{40}", entry["modelopt"]["tag_commit"]), release
        assert tool["source"].startswith(f"NVIDIA/TensorRT-Model-Optimizer@{entry['modelopt']['tag_commit']} ")
        assert entry["modelopt"]["evidence"] and entry["docs"] and entry["pytorch_qformats_evidence"], release
        table = modelopt.table(release)
        qformats = table.flags["--qformat"].choices
        assert qformats is not None and set(entry["pytorch_qformats"]) <= set(qformats), release
        assert {q for q in modelopt.PRECISIONS.values() if q} <= set(entry["quant_algo"]), release
        # the prompts land where the tool's dataset loader looks, under the config it asks for
        dataset = entry["calibration"]["dataset"]
        assert calibration.LAYOUT[modelopt.TOOL].parent.name == dataset
        choices = table.flags["--dataset"].choices
        assert choices is None or dataset in choices, release
        config = entry["calibration"]["config"]
        assert config is None or [c["config_name"] for c in card["configs"]] == [config], release
    assert "same_as" in modelopt.releases()["1.1"] and "NOT established" in modelopt.releases()["1.1"]["evidence"]
    assert "taken as for TensorRT-LLM 1.0" in modelopt.table("1.1").source and not modelopt.table("1.1").pinned


@pytest.mark.parametrize("release", RELEASES)
@pytest.mark.parametrize("precision", SERVED)
@pytest.mark.parametrize("kv", [None, "fp8"])
def test_each_precision_and_release_gives_a_command_the_tool_accepts(release, precision, kv, monkeypatch):
    monkeypatch.setenv("HF_TOKEN", "hf_secret_token")
    argv = modelopt.command(release, spec(precision=precision, kv_cache_dtype=kv, trust_remote_code=True))
    assert argv[:2] == ["python3", "/opt/Model-Optimizer/examples/llm_ptq/hf_ptq.py"]
    assert value(argv, "--pyt_ckpt_path") == "/models/llama"
    assert value(argv, "--export_path") == "/cache/checkpoints/out"
    assert value(argv, "--qformat") == modelopt.PRECISIONS[precision]
    assert value(argv, "--kv_cache_qformat") == ("fp8" if kv else "none")  # the tool's default would be fp8
    assert "--trust_remote_code" in argv and "--dataset" not in argv
    assert set(flags_of(argv)) <= set(modelopt.table(release).flags)
    modelopt.validate(release, argv[2:])
    # 0.33 exports a TensorRT-LLM checkpoint unless told hf; 0.37 exports hf only and calls the flag deprecated
    assert ("--export_fmt" in argv) == (release != "1.2")
    assert not any("hf_secret_token" in a for a in argv)


@pytest.mark.parametrize("release", RELEASES)
def test_precisions_without_a_quantization_step_or_a_pytorch_backend(release):
    for precision in ("bf16", "fp16"):
        with pytest.raises(TrtsweepError, match="served as it is"):
            modelopt.command(release, spec(precision=precision))
    with pytest.raises(TrtsweepError, match=r"serves no int8_sq checkpoint.*flow: engine"):
        modelopt.command(release, spec(precision="int8_sq"))
    with pytest.raises(TrtsweepError, match="the PyTorch flow takes one of"):
        modelopt.command(release, spec(precision="int4_wo"))
    with pytest.raises(TrtsweepError, match="fp8 only"):
        modelopt.command(release, spec(kv_cache_dtype="int8"))
    with pytest.raises(TrtsweepError, match="export_dir"):
        modelopt.command(release, spec(export_dir=""))


def test_a_flag_the_tool_lacks_and_bad_values_fail_in_one_line():
    with pytest.raises(TrtsweepError, match=r"hf_ptq\.py \(ModelOpt 0\.37\.0\) of TensorRT-LLM 1\.2 has no option "
                                            r"--tp_size \(NVIDIA/TensorRT-Model-Optimizer@df0882a"):  # fmt: skip
        modelopt.command("1.2", spec(extra_flags={"tp_size": 2}))
    # --vlm went away in ModelOpt 0.35: the 1.0 table has it, the 1.2 one does not
    modelopt.validate("1.0", ["--pyt_ckpt_path", "/m", "--vlm"])
    with pytest.raises(TrtsweepError, match="has no option --vlm"):
        modelopt.validate("1.2", ["--pyt_ckpt_path", "/m", "--vlm"])
    for release in RELEASES:
        with pytest.raises(TrtsweepError, match=r"--qformat 'int3_awq'.*accepts one of"):
            modelopt.validate(release, ["--pyt_ckpt_path", "/m", "--qformat", "int3_awq"])
        with pytest.raises(TrtsweepError, match=r"--kv_cache_qformat 'int8'"):
            modelopt.validate(release, ["--pyt_ckpt_path", "/m", "--kv_cache_qformat", "int8"])
        with pytest.raises(TrtsweepError, match="needs --pyt_ckpt_path"):
            modelopt.validate(release, ["--qformat", "fp8"])
        with pytest.raises(TrtsweepError, match="--export_path needs a value"):
            modelopt.validate(release, ["--pyt_ckpt_path", "/m", "--export_path"])
    # 0.33 names its datasets in argparse; 0.35+ take any comma-separated names
    with pytest.raises(TrtsweepError, match=r"--dataset 'c4'"):
        modelopt.validate("1.0", ["--pyt_ckpt_path", "/m", "--dataset", "c4"])
    modelopt.validate("1.2", ["--pyt_ckpt_path", "/m", "--dataset", "c4"])
    with pytest.raises(TrtsweepError, match=r"0\.21 has no ModelOpt table in trtsweep; known: 1\.0, 1\.1, 1\.2"):
        modelopt.command("0.21", spec())


def test_extra_flags_are_checked_and_may_not_replace_what_trtsweep_sets():
    argv = modelopt.command("1.2", spec(extra_flags={"awq_block_size": 64, "use_seq_device_map": True}))
    assert argv[-3:] == ["--awq_block_size", "64", "--use_seq_device_map"]
    for key in ("qformat", "--export_path", "kv_cache_qformat"):
        with pytest.raises(TrtsweepError, match="is set by trtsweep"):
            modelopt.command("1.2", spec(extra_flags={key: "x"}))
    with pytest.raises(TrtsweepError, match="is a switch"):
        modelopt.command("1.2", spec(extra_flags={"low_memory_mode": "yes"}))


def test_calibration_on_the_users_prompts_reaches_the_tool(tmp_path):
    planned = modelopt.prepare_calibration(PROMPTS, tmp_path, 64, write=False)
    assert not (tmp_path / "calibration").exists()
    calib = modelopt.prepare_calibration(PROMPTS, tmp_path, 64)
    assert calib == planned
    data = calib.root / "pg19"
    assert calib.directory(modelopt.TOOL) == data
    texts = [json.loads(line)["text"] for line in (data / "train.jsonl").read_text(encoding="utf-8").splitlines()]
    first = json.loads(PROMPTS.read_text(encoding="utf-8").splitlines()[0])
    assert len(texts) == 64 and texts[0] == f"{first['input']}\n{first['output']}"
    assert (data / "README.md").read_text(encoding="utf-8") == modelopt.DATASET_CARD
    for release in RELEASES:
        argv = modelopt.command(release, spec(calib=calib, calib_size=999))
        # the tool runs in the set's root: load_dataset('pg19') finds <root>/pg19 there instead of the Hub
        assert argv[:3] == ["env", "-C", str(calib.root)] and argv[3] == "python3"
        assert value(argv, "--dataset") == "pg19" and value(argv, "--calib_size") == "64"
        assert Path(argv[4]).is_absolute() and Path(value(argv, "--pyt_ckpt_path")).is_absolute()
        modelopt.validate(release, argv[5:])
    # without the user's prompts: the tool's default dataset, the given size, and no change of directory
    argv = modelopt.command("1.2", spec(calib_size=256, batch_size=8))
    assert argv[0] == "python3" and "--dataset" not in argv
    assert value(argv, "--calib_size") == "256" and value(argv, "--batch_size") == "8"
    with pytest.raises(TrtsweepError, match="calib_size: expected a positive integer"):
        modelopt.command("1.2", spec(calib_size=0))


def test_relative_paths_are_made_absolute_for_the_changed_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    calib = modelopt.prepare_calibration(PROMPTS, Path("cache"), 8)
    argv = modelopt.command("1.1", spec(model_dir="models/m", tool_dir="mo", export_dir="out", calib=calib))
    assert argv[2] == str(tmp_path / "cache" / "calibration" / calib.root.name)
    assert argv[4] == str(tmp_path / "mo" / "examples" / "llm_ptq" / "hf_ptq.py")
    assert value(argv, "--pyt_ckpt_path") == str(tmp_path / "models" / "m")
    assert value(argv, "--export_path") == str(tmp_path / "out")


def test_the_export_key_changes_with_each_input_and_only_with_them(tmp_path):
    calib = modelopt.prepare_calibration(PROMPTS, tmp_path, 64)
    other_prompts = tmp_path / "other.jsonl"
    other_prompts.write_text('{"input": "a different prompt", "output": "and answer"}\n', encoding="utf-8")
    base = spec(calib=calib)
    key = modelopt.output_key("1.2", base)
    assert re.fullmatch(r"[0-9a-f]{12}", key)
    same = [
        replace(base, export_dir="/elsewhere"), replace(base, tool_dir="/other/checkout"),
        replace(base, python="/venv/bin/python"), replace(base, model_dir="/another/copy/of/it"),
        replace(base, calib=modelopt.prepare_calibration(PROMPTS, tmp_path / "other-cache", 64)),
    ]  # fmt: skip
    assert all(modelopt.output_key("1.2", s) == key for s in same)
    changed = {
        "model": replace(base, model_id="Qwen/Qwen2.5-7B-Instruct"),
        "revision": replace(base, model_revision="1111111"),
        "precision": replace(base, precision="nvfp4"),
        "kv cache": replace(base, kv_cache_dtype="fp8"),
        "calibration content": replace(base, calib=modelopt.prepare_calibration(other_prompts, tmp_path, 64)),
        "calibration size": replace(base, calib=modelopt.prepare_calibration(PROMPTS, tmp_path, 32)),
        "default dataset": replace(base, calib=None, calib_size=64),
        "batch size": replace(base, batch_size=4),
        "options": replace(base, trust_remote_code=True),
        "extra flags": replace(base, extra_flags={"awq_block_size": 64}),
    }
    keys = {name: modelopt.output_key("1.2", s) for name, s in changed.items()}
    assert key not in keys.values() and len(set(keys.values())) == len(keys), keys
    # the tool's release: 1.1 runs the same ModelOpt as 1.0, but is another release
    assert len({modelopt.output_key(r, base) for r in RELEASES} | {key}) == len(RELEASES)
    # without a model id the resolved directory names the model
    a = replace(base, model_id=None, model_dir=str(tmp_path / "m"))
    assert modelopt.output_key("1.2", a) == modelopt.output_key("1.2", replace(a, model_dir=f"{tmp_path}/x/../m"))
    assert modelopt.output_key("1.2", a) != modelopt.output_key("1.2", replace(a, model_dir=str(tmp_path / "n")))
    out = modelopt.output_dir(tmp_path, "1.2", replace(base, kv_cache_dtype="fp8"))
    assert out.parent == tmp_path / "checkpoints"
    assert out.name == f"modelopt-fp8-kvfp8-{modelopt.output_key('1.2', replace(base, kv_cache_dtype='fp8'))}"
    inputs = modelopt.inputs("1.2", base)
    assert inputs["calibration"] == calib.sha256 and inputs["modelopt"] == "0.37.0"
    assert "/cache/checkpoints/out" not in json.dumps(inputs)


def write_export(directory: Path, quant_algo: str | None, kv: str | None, *, modelopt_version: str = "0.37.0",
                 hf_quant_config: bool = True) -> Path:  # fmt: skip
    """A checkpoint as ModelOpt's HF export leaves it: hf_quant_config.json, and the same in config.json's
    quantization_config (0.33: quant_library and kv_cache_scheme 'FP8'; 0.35+: quant_method and a scheme dict)."""
    directory.mkdir(parents=True, exist_ok=True)
    producer = {"name": "modelopt", "version": modelopt_version}
    quantization = {"quant_algo": quant_algo, "kv_cache_quant_algo": kv, "exclude_modules": ["lm_head"]}
    if quant_algo == "NVFP4":
        quantization["group_size"] = 16
    if hf_quant_config:
        exported = {"producer": producer, "quantization": quantization}
        (directory / "hf_quant_config.json").write_text(json.dumps(exported))
    inline: dict[str, object] = {"ignore": ["lm_head"], "quant_algo": quant_algo, "producer": producer}
    if modelopt_version.startswith("0.33"):
        inline |= {"quant_library": "modelopt", "kv_cache_scheme": kv}
    else:
        scheme = {"dynamic": False, "num_bits": 8, "type": "float"} if kv == "FP8" else kv
        inline |= {"quant_method": "modelopt", "kv_cache_scheme": scheme}
    config = {"architectures": ["LlamaForCausalLM"], "torch_dtype": "bfloat16", "quantization_config": inline}
    (directory / "config.json").write_text(json.dumps(config))
    return directory


def test_a_modelopt_export_is_recognised_from_its_files(tmp_path):
    fp8 = write_export(tmp_path / "fp8", "FP8", "FP8")
    assert modelopt.prequantized(fp8) == {"quant_algo": "FP8", "kv_cache_quant_algo": "FP8",
                                          "source": "hf_quant_config.json"}  # fmt: skip
    for version in ("0.33.0", "0.37.0"):
        inline = write_export(tmp_path / f"inline-{version}", "NVFP4", "FP8", modelopt_version=version,
                              hf_quant_config=False)  # fmt: skip
        assert modelopt.prequantized(inline) == {"quant_algo": "NVFP4", "kv_cache_quant_algo": "FP8",
                                                 "source": "config.json"}  # fmt: skip
    awq = write_export(tmp_path / "awq", "W4A16_AWQ", None)
    assert modelopt.prequantized(awq) == {"quant_algo": "W4A16_AWQ", "kv_cache_quant_algo": None,
                                          "source": "hf_quant_config.json"}  # fmt: skip
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "config.json").write_text(json.dumps({"architectures": ["LlamaForCausalLM"]}))
    assert modelopt.prequantized(plain) is None
    (plain / "config.json").write_text(
        json.dumps({"quantization_config": {"quant_method": "fp8", "weight_block_size": [128, 128]}})
    )
    assert modelopt.prequantized(plain) is None  # another producer's quantization, not ModelOpt's
    # ModelOpt 0.37 writes hf_quant_config.json even when nothing was quantized
    assert modelopt.prequantized(write_export(tmp_path / "none", None, None)) is None
    assert modelopt.prequantized(tmp_path / "missing") is None
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "hf_quant_config.json").write_text("{not json")
    with pytest.raises(TrtsweepError, match=r"hf_quant_config\.json: not readable JSON"):
        modelopt.prequantized(broken)
    (broken / "hf_quant_config.json").write_text(json.dumps({"producer": {"name": "modelopt"}}))
    with pytest.raises(TrtsweepError, match="no 'quantization' object"):
        modelopt.prequantized(broken)


@pytest.mark.parametrize("release", RELEASES)
def test_a_pre_quantized_checkpoint_must_be_what_the_point_asks_for(release, tmp_path):
    fp8 = write_export(tmp_path / "Llama-3.1-8B-Instruct-FP8", "FP8", "FP8")
    assert modelopt.check_prequantized(release, fp8, "fp8", "fp8") == modelopt.prequantized(fp8)
    with pytest.raises(TrtsweepError, match=r"quant_algo FP8.*precision nvfp4 needs NVFP4: set precision fp8 for it"):
        modelopt.check_prequantized(release, fp8, "nvfp4", "fp8")
    with pytest.raises(TrtsweepError, match="precision bf16 needs an unquantized checkpoint: set precision fp8"):
        modelopt.check_prequantized(release, fp8, "bf16", None)
    with pytest.raises(TrtsweepError, match="kv_cache_dtype none differs: set it to fp8"):
        modelopt.check_prequantized(release, fp8, "fp8", None)
    awq = write_export(tmp_path / "awq", "W4A16_AWQ", None)
    assert modelopt.check_prequantized(release, awq, "int4_awq", None) is not None
    assert modelopt.check_prequantized(release, awq, "int4_awq", "fp8") is not None  # FP8 KV set at serve time
    with pytest.raises(TrtsweepError, match="set precision int4_awq"):
        modelopt.check_prequantized(release, awq, "w4a8_awq", None)
    mixed = write_export(tmp_path / "mixed", "MIXED_PRECISION", None)
    with pytest.raises(TrtsweepError, match="give the unquantized model"):
        modelopt.check_prequantized(release, mixed, "fp8", None)
    inline = write_export(tmp_path / "inline", "FP8", "FP8", hf_quant_config=False)
    with pytest.raises(TrtsweepError, match=f"TensorRT-LLM {release} reads that from hf_quant_config.json"):
        modelopt.check_prequantized(release, inline, "fp8", "fp8")
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "config.json").write_text("{}")
    assert modelopt.check_prequantized(release, plain, "nvfp4", None) is None  # to be quantized
    assert modelopt.check_prequantized(release, plain, "bf16", None) is None  # served as it is
    with pytest.raises(TrtsweepError, match="serves no int8_sq"):
        modelopt.check_prequantized(release, plain, "int8_sq", None)
