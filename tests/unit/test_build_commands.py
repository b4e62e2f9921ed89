"""Command lines for every precision x release range, checked against the accepted-flag tables; version
facts; unsupported combinations; extra_flags validation."""

from __future__ import annotations

import pytest

from tests.unit.build_env import RANGES
from trtsweep.errors import TrtsweepError
from trtsweep.toolchain import commands, precisions, versions
from trtsweep.toolchain.commands import BuildOptions, CheckpointSpec

KV = [None, "int8", "fp8"]


def flags_of(argv: list[str]) -> set[str]:
    return {a for a in argv if a.startswith("-") and not a.lstrip("-").replace(".", "").isdigit()}


def checkpoint(version: str, family: str, precision: str, kv: str | None, calib: bool = False) -> commands.Command:
    parsed = versions.parse(version)
    recipe = precisions.recipe(precision, family, parsed, kv_cache_dtype=kv)
    spec = CheckpointSpec(family, precision, version, "/models/m", tp=2, pp=1, kv_cache_dtype=kv)
    script = "quantize.py" if recipe.tool == precisions.QUANTIZE else versions.convert_script(parsed, family)
    calib_dir = "/calib" if calib and recipe.calib_flag else None
    return commands.checkpoint_command(
        spec, recipe, python="python3", script=script, output_dir="/out", calib_dir=calib_dir, calib_size=None
    )


def supported(version: str, family: str, precision: str, kv: str | None) -> bool:
    parsed = versions.parse(version)
    return not (family == "qwen" and parsed < (0, 9))  # Qwen's checkpoint flow starts at 0.9, both tools


@pytest.mark.parametrize("version", RANGES)
@pytest.mark.parametrize("family", versions.FAMILIES)
@pytest.mark.parametrize("precision", precisions.PRECISIONS)
@pytest.mark.parametrize("kv", KV)
def test_every_checkpoint_command_fits_the_release_table(version, family, precision, kv):
    if not supported(version, family, precision, kv):
        with pytest.raises(TrtsweepError, match=f"{precision}.* for {family} on TensorRT-LLM .* is not supported"):
            checkpoint(version, family, precision, kv)
        return
    cmd = checkpoint(version, family, precision, kv, calib=True)
    parsed = versions.parse(version)
    convert = cmd.tool == precisions.CONVERT
    table = versions.convert_table(parsed, family) if convert else versions.quantize_table(parsed)
    assert flags_of(cmd.argv) <= set(table.flags)
    commands.validate(cmd.tool, table, parsed, cmd.argv[2:])
    assert cmd.argv[:2] == ["python3", cmd.argv[1]] and "/out" in cmd.argv and "/out" not in cmd.options
    assert cmd.options[-4:] == ["--tp_size", "2", "--pp_size", "1"]


@pytest.mark.parametrize(
    ("precision", "kv", "tool", "expected"),
    [
        ("fp16", None, "convert_checkpoint.py", ["--dtype", "float16"]),
        ("bf16", None, "convert_checkpoint.py", ["--dtype", "bfloat16"]),
        ("int8_wo", None, "convert_checkpoint.py", ["--use_weight_only", "--weight_only_precision", "int8"]),
        ("int4_wo", "int8", "convert_checkpoint.py", ["--weight_only_precision", "int4", "--int8_kv_cache"]),
        ("int8_sq", None, "convert_checkpoint.py", ["--smoothquant", "0.5", "--per_token", "--per_channel"]),
        ("fp8", "fp8", "quantize.py", ["--qformat", "fp8", "--kv_cache_dtype", "fp8"]),
        ("int4_awq", None, "quantize.py", ["--qformat", "int4_awq", "--awq_block_size", "128"]),
        ("w4a8_awq", "int8", "quantize.py", ["--qformat", "w4a8_awq", "--awq_block_size", "128", "--kv_cache_dtype"]),
        ("fp16", "fp8", "quantize.py", ["--qformat", "full_prec", "--kv_cache_dtype", "fp8"]),
        ("int8_wo", "fp8", "quantize.py", ["--qformat", "int8_wo", "--kv_cache_dtype", "fp8"]),
    ],
)
def test_precision_recipes(precision, kv, tool, expected):
    recipe = precisions.recipe(precision, "llama", (0, 11), kv_cache_dtype=kv)
    assert recipe.tool == tool
    joined = " ".join(recipe.flags)
    assert " ".join(expected) in joined


def test_calibration_flags_per_release():
    assert precisions.recipe("int8_sq", "llama", (0, 8)).calib_flag is None  # v0.8.0 llama: cnn_dailymail only
    assert precisions.recipe("fp8", "llama", (0, 8)).calib_flag is None  # v0.8.0 quantize.py likewise
    assert precisions.recipe("fp8", "llama", (0, 9)).calib_flag is None  # v0.9.0: cnn_dailymail inside AMMO
    assert precisions.recipe("int8_sq", "qwen", (0, 9)).calib_flag is None
    assert precisions.recipe("fp8", "qwen", (0, 10)).calib_flag == "--calib_dataset"  # v0.10.0, ModelOpt
    assert precisions.recipe("int8_sq", "qwen", (0, 11)).calib_flag == "--calib_dataset"
    assert precisions.recipe("fp8", "qwen", (1, 2)).calib_flag == "--calib_dataset"
    assert not precisions.recipe("int8_wo", "qwen", (0, 11)).calibrates
    assert precisions.recipe("int8_wo", "qwen", (0, 11), kv_cache_dtype="int8").calibrates


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        ({"precision": "int3"}, "precision 'int3'"),
        ({"family": "gptj"}, "model family 'gptj'"),
        ({"kv_cache_dtype": "fp4"}, "kv_cache_dtype 'fp4'"),
        ({"dtype": "float32"}, "dtype 'float32'"),
        ({"smoothquant_alpha": 2.0}, "smoothquant_alpha 2.0"),
    ],
)
def test_bad_recipe_inputs_are_one_line_errors(bad, message):
    args = {"precision": "int8_sq", "family": "llama", "kv_cache_dtype": None, "dtype": "float16",
            "smoothquant_alpha": 0.5, **bad}  # fmt: skip
    with pytest.raises(TrtsweepError, match=message) as err:
        precisions.recipe(args.pop("precision"), args.pop("family"), (0, 11), **args)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("version", ["0.7.1", "1.3.0", "2.0", "latest"])
def test_versions_outside_the_engine_flow(version):
    with pytest.raises(TrtsweepError, match="trtllm_version"):
        versions.parse(version)


def test_version_parsing():
    assert versions.parse("0.17.0.post1") == (0, 17)
    assert versions.parse("1.2.0rc7") == (1, 2)
    assert versions.parse("v0.11.0") == (0, 11)


def test_example_layout_moves_at_0_20():
    assert versions.convert_script((0, 19), "qwen") == "examples/qwen/convert_checkpoint.py"
    assert versions.convert_script((0, 20), "qwen") == "examples/models/core/qwen/convert_checkpoint.py"
    assert versions.quantize_script((1, 2)) == "examples/quantization/quantize.py"
    with pytest.raises(TrtsweepError, match=r"qwen/convert_checkpoint\.py does not exist in TensorRT-LLM 0\.8"):
        versions.convert_script((0, 8), "qwen")


def build_argv(version: str, **options) -> list[str]:
    opts = BuildOptions(max_batch_size=8, max_input_len=1024, max_output_len=256, **options)
    return commands.build_command(versions.parse(version), opts, dtype="bfloat16", trtllm_build="trtllm-build",
                                  checkpoint_dir="/ckpt", output_dir="/engine").argv  # fmt: skip


@pytest.mark.parametrize("version", RANGES)
def test_every_build_command_fits_the_release_table(version):
    parsed = versions.parse(version)
    newer = True if parsed >= (0, 10) else None  # use_fp8_context_fmha, multiple_profiles: 0.10-era plugin.py
    argv = build_argv(version, max_num_tokens=4096, use_fp8_context_fmha=newer, multiple_profiles=newer)
    assert flags_of(argv) <= set(versions.build_table(parsed).flags)
    assert argv[:5] == ["trtllm-build", "--checkpoint_dir", "/ckpt", "--output_dir", "/engine"]
    seq = argv[argv.index("--max_seq_len") + 1] if "--max_seq_len" in argv else None
    out = argv[argv.index("--max_output_len") + 1] if "--max_output_len" in argv else None
    # --max_seq_len from 0.11 (0.11 release notes), --max_output_len before
    assert (seq, out) == (("1280", None) if parsed >= (0, 11) else (None, "256"))
    # --kv_cache_type paged replaces --paged_kv_cache enable at 0.13
    kv = ["--kv_cache_type", "paged"] if parsed >= (0, 13) else ["--paged_kv_cache", "enable"]
    assert " ".join(kv) in " ".join(argv)
    # plugin "auto" exists from 0.11; before, the checkpoint dtype is given
    assert argv[argv.index("--gemm_plugin") + 1] == ("auto" if parsed >= (0, 11) else "bfloat16")
    assert "--tp_size" not in argv and "--pp_size" not in argv


def test_tp_pp_flags_leave_trtllm_build_at_0_12():
    assert "--tp_size" in versions.build_table((0, 11)).flags
    assert "--tp_size" not in versions.build_table((0, 12)).flags
    assert "--max_output_len" in versions.build_table((0, 11)).flags
    assert "--max_output_len" not in versions.build_table((0, 12)).flags


def test_every_release_has_its_own_sourced_tables():
    for release in versions.RELEASES:
        for tool in ("trtllm-build", "convert_checkpoint.py:llama", "convert_checkpoint.py:qwen", "quantize.py"):
            table = versions.table(release, tool)
            if table is None:  # only Qwen on 0.8 (it still built through examples/qwen/build.py)
                assert (release, tool) == ((0, 8), "convert_checkpoint.py:qwen")
                continue
            assert table.release == release and table.flags and table.source
            assert table.pinned or "closest dated copy" in table.source or table.source.startswith("as in ")
    pinned = {v for v in versions.RELEASES if versions.build_table(v).pinned}
    assert {(0, 8), (0, 9), (0, 10), (0, 11), (0, 12), (0, 13), (0, 18), (1, 2)} <= pinned


def test_release_facts_read_in_the_sources():
    build = versions.build_table
    assert "--multiple_profiles" in build((0, 9)).flags  # a plugin flag already in v0.9.0
    assert "--builder_opt" in build((0, 13)).flags and "--builder_opt" not in build((0, 14)).flags
    assert build((0, 13)).flags["--kv_cache_type"].choices == ("continuous", "paged", "disabled")
    assert "--paged_kv_cache" in build((0, 16)).flags  # kept as a deprecated build.py option
    assert "--enable_xqa" in build((0, 15)).flags and "--enable_xqa" not in build((0, 16)).flags
    assert "trace" not in build((0, 20)).flags["--log_level"].choices
    assert "trace" in build((0, 21)).flags["--log_level"].choices
    assert "--auto_parallel" in build((1, 1)).flags and "--auto_parallel" not in build((1, 2)).flags
    assert "--dora_plugin" not in build((0, 17)).flags and "--dora_plugin" in build((0, 19)).flags
    assert build((0, 12)).flags["--lora_target_modules"].many
    assert "--calib_dataset" not in versions.quantize_table((0, 9)).flags
    assert "--ammo_quant_ckpt_path" in versions.convert_table((0, 9), "llama").flags


def test_build_options_a_release_lacks_are_errors():
    with pytest.raises(TrtsweepError, match=r"trtllm-build of TensorRT-LLM 0\.8 has no option --multiple_profiles"):
        build_argv("0.8.0", multiple_profiles=True)


def test_multi_value_flags_take_every_value_and_check_each():
    argv = build_argv("0.12.0", extra_flags={"lora_target_modules": ["attn_q", "attn_v"], "max_lora_rank": 8})
    assert argv[argv.index("--lora_target_modules") :][:4] == [
        "--lora_target_modules",
        "attn_q",
        "attn_v",
        "--max_lora_rank",
    ]
    with pytest.raises(TrtsweepError, match=r"--lora_target_modules 'attn_x': TensorRT-LLM 0\.12 accepts one of"):
        build_argv("0.12.0", extra_flags={"lora_target_modules": ["attn_q", "attn_x"]})


def test_extra_flags_pass_through_and_are_validated():
    argv = build_argv("0.16.0", extra_flags={"strip_plan": True, "--max_beam_width": 2, "lora_dir": None})
    assert argv[-3:] == ["--strip_plan", "--max_beam_width", "2"]
    with pytest.raises(TrtsweepError, match="has no option --builder_opt"):
        build_argv("0.16.0", extra_flags={"builder_opt": 3})
    with pytest.raises(TrtsweepError, match=r"--kv_cache_type 'paged_v2'.*accepts one of"):
        build_argv("0.16.0", paged_kv_cache=None, extra_flags={"kv_cache_type": "paged_v2"})
    with pytest.raises(TrtsweepError, match="is set by trtsweep"):
        build_argv("0.16.0", extra_flags={"max_batch_size": 4})
    with pytest.raises(TrtsweepError, match="is a switch"):
        build_argv("0.16.0", extra_flags={"strip_plan": "yes"})
    with pytest.raises(TrtsweepError, match="needs a value"):
        build_argv("0.16.0", extra_flags={"max_beam_width": True})
    with pytest.raises(TrtsweepError, match="--gemm_plugin 'fp4'"):
        build_argv("0.16.0", gemm_plugin="fp4")


def test_bad_lengths():
    with pytest.raises(TrtsweepError, match="max_batch_size: expected a positive integer"):
        commands.build_options((0, 16), BuildOptions(max_batch_size=0, max_input_len=1, max_output_len=1), "float16")
    with pytest.raises(TrtsweepError, match="max_seq_len 512: must exceed max_input_len 1024"):
        build_argv("0.16.0", max_seq_len=512)


def test_checkpoint_extra_flags_and_calib_size():
    parsed = versions.parse("0.20.0")
    recipe = precisions.recipe("int8_sq", "qwen", parsed)
    spec = CheckpointSpec("qwen", "int8_sq", "0.20.0", "/m", extra_flags={"load_model_on_cpu": True})
    cmd = commands.checkpoint_command(spec, recipe, python="p", script="s", output_dir="/o", calib_dir=None,
                                      calib_size=None)  # fmt: skip
    assert "--load_model_on_cpu" in cmd.options
    with pytest.raises(TrtsweepError, match="has no --calib_size"):  # qwen's script has none; llama's has
        commands.checkpoint_command(spec, recipe, python="p", script="s", output_dir="/o", calib_dir=None,
                                    calib_size=64)  # fmt: skip
    llama = precisions.recipe("int8_sq", "llama", parsed)
    cmd = commands.checkpoint_command(CheckpointSpec("llama", "int8_sq", "0.20.0", "/m"), llama, python="p",
                                      script="s", output_dir="/o", calib_dir=None, calib_size=64)  # fmt: skip
    assert cmd.options[-2:] == ["--calib_size", "64"]


@pytest.mark.parametrize("version", ["0.17.0", "1.2.0"])
def test_lora_dir_takes_several_directories(version):
    # trtllm-build: lora_parser.add_argument('--lora_dir', type=str, default=None, nargs="+") in every release
    # from 0.9; the rendered 0.18.2 (proxy for 0.17) and 1.2.0 docs: [--lora_dir LORA_DIR [LORA_DIR ...]]
    argv = build_argv(version, extra_flags={"lora_dir": ["/lora/a", "/lora/b"], "max_lora_rank": 8})
    assert argv[argv.index("--lora_dir") :][:4] == ["--lora_dir", "/lora/a", "/lora/b", "--max_lora_rank"]
    table = versions.build_table(versions.parse(version))
    commands.validate("trtllm-build", table, versions.parse(version), ["--lora_dir", "/a", "/b", "/c"])
    with pytest.raises(TrtsweepError, match="--lora_dir needs a value"):
        commands.validate("trtllm-build", table, versions.parse(version), ["--lora_dir", "--max_lora_rank", "8"])


def test_fixed_and_optional_value_counts_follow_argparse():
    llama08 = versions.convert_table((0, 8), "llama")  # v0.8.0: --rotary_scaling nargs=2, choices for lora
    assert llama08.flags["--rotary_scaling"].nargs == 2
    commands.validate("convert_checkpoint.py", llama08, (0, 8), ["--rotary_scaling", "linear", "2.0"])
    with pytest.raises(TrtsweepError, match="--rotary_scaling needs exactly 2 values"):
        commands.validate("convert_checkpoint.py", llama08, (0, 8), ["--rotary_scaling", "linear"])
    with pytest.raises(TrtsweepError, match=r"--lora_target_modules 'moe_gate': TensorRT-LLM 0\.8 accepts one of"):
        commands.validate("convert_checkpoint.py", llama08, (0, 8), ["--lora_target_modules", "attn_q", "moe_gate"])
    # --weight_only_precision: nargs='?', const='int8' in every release read
    qwen = versions.convert_table((1, 2), "qwen")
    commands.validate("convert_checkpoint.py", qwen, (1, 2), ["--weight_only_precision", "--tp_size", "1"])
    assert commands.extra_args("convert_checkpoint.py", qwen, {"weight_only_precision": True}, []) == [
        "--weight_only_precision"
    ]
    with pytest.raises(TrtsweepError, match="--max_lora_rank takes one value, got a list of 2"):
        commands.extra_args("trtllm-build", versions.build_table((1, 2)), {"max_lora_rank": [8, 16]}, [])


def test_the_tool_doubles_parse_the_tables_as_argparse_would():
    from tests.doubles import fakelib

    table = versions.build_table((1, 2))
    args = fakelib.parse("trtllm-build", table, ["--lora_dir", "/a", "/b", "--max_lora_rank", "8"])
    assert args.lora_dir == ["/a", "/b"]
