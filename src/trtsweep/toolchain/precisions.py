"""Which tool makes a TRT-LLM checkpoint in each precision, and with which flags.

Precisions (``PRECISIONS``):

| name | weights / activations | tool | flags |
| --- | --- | --- | --- |
| fp16, bf16 | unquantized | convert_checkpoint.py | ``--dtype float16|bfloat16`` |
| int8_wo, int4_wo | INT8 / INT4 weight-only | convert_checkpoint.py | ``--use_weight_only``
  ``--weight_only_precision int8|int4`` |
| int8_sq | SmoothQuant W8A8 | convert_checkpoint.py | ``--smoothquant 0.5 --per_token --per_channel`` (calibrates) |
| fp8 | FP8 W8A8 | quantize.py | ``--qformat fp8`` (calibrates) |
| int4_awq | INT4 AWQ | quantize.py | ``--qformat int4_awq --awq_block_size 128`` (calibrates) |
| w4a8_awq | INT4 weights, FP8 activations | quantize.py | ``--qformat w4a8_awq`` (calibrates) |

KV cache (``KV_CACHE_DTYPES``): ``int8`` adds ``--int8_kv_cache`` to convert_checkpoint.py (calibrates) or
``--kv_cache_dtype int8`` to quantize.py; ``fp8`` always goes through quantize.py (``--kv_cache_dtype fp8``,
with ``--qformat`` = the precision's ModelOpt format, ``full_prec`` for fp16/bf16), as the model READMEs do.

Calibration: `calibration.py` turns the user's prompts into a local dataset; a tool without
``--calib_dataset`` (0.8 and 0.9: cnn_dailymail inside AMMO) can only use its default dataset.
"""

from __future__ import annotations

from dataclasses import dataclass

from trtsweep.errors import TrtsweepError
from trtsweep.toolchain import versions

PRECISIONS = ("fp16", "bf16", "fp8", "int8_wo", "int4_wo", "int4_awq", "int8_sq", "w4a8_awq")
KV_CACHE_DTYPES = ("int8", "fp8")
DTYPES = ("float16", "bfloat16")
CONVERT, QUANTIZE = "convert_checkpoint.py", "quantize.py"
MODELOPT_ONLY = ("fp8", "int4_awq", "w4a8_awq")
QFORMAT = {
    "fp16": "full_prec", "bf16": "full_prec", "int8_wo": "int8_wo", "int4_wo": "int4_wo", "int8_sq": "int8_sq",
    "fp8": "fp8", "int4_awq": "int4_awq", "w4a8_awq": "w4a8_awq",
}  # fmt: skip
FIXED_DTYPE = {"fp16": "float16", "bf16": "bfloat16"}


@dataclass(frozen=True)
class Recipe:
    """How one (precision, kv cache, family, version) is made: the ``tool``, its precision flags (no paths),
    the checkpoint ``dtype``, whether it calibrates, and the tool's flag that points at a calibration
    dataset (None when this release's tool has none)."""

    tool: str
    flags: tuple[str, ...]
    dtype: str
    calibrates: bool
    calib_flag: str | None


def recipe(
    precision: str, family: str, version: versions.Version, *, kv_cache_dtype: str | None = None,
    dtype: str = "float16", smoothquant_alpha: float = 0.5, awq_block_size: int = 128,
) -> Recipe:  # fmt: skip
    """The recipe, or a one-line TrtsweepError naming the unsupported combination."""
    if family not in versions.FAMILIES:
        raise TrtsweepError(f"model family {family!r}: expected one of {versions.FAMILIES}")
    if precision not in PRECISIONS:
        raise TrtsweepError(f"precision {precision!r}: expected one of {PRECISIONS}")
    if kv_cache_dtype is not None and kv_cache_dtype not in KV_CACHE_DTYPES:
        raise TrtsweepError(f"kv_cache_dtype {kv_cache_dtype!r}: expected one of {KV_CACHE_DTYPES} or null")
    if dtype not in DTYPES:
        raise TrtsweepError(f"dtype {dtype!r}: expected one of {DTYPES}")
    if not 0.0 <= smoothquant_alpha <= 1.0:
        raise TrtsweepError(f"smoothquant_alpha {smoothquant_alpha}: expected a value in [0, 1]")
    dtype = FIXED_DTYPE.get(precision, dtype)
    label = f"{precision}{'+kv_' + kv_cache_dtype if kv_cache_dtype else ''} for {family} on TensorRT-LLM "
    label += f"{version[0]}.{version[1]}"
    if precision in MODELOPT_ONLY or kv_cache_dtype == "fp8":
        return _quantize(precision, family, version, kv_cache_dtype, dtype, awq_block_size, label)
    return _convert(precision, family, version, kv_cache_dtype, dtype, smoothquant_alpha, label)


def _calib_flag(table: versions.Table) -> str | None:
    return "--calib_dataset" if "--calib_dataset" in table.flags else None


def _convert(
    precision: str, family: str, version: versions.Version, kv: str | None, dtype: str, alpha: float, label: str
) -> Recipe:
    try:
        table = versions.convert_table(version, family)
    except TrtsweepError as exc:
        raise TrtsweepError(f"{label} is not supported: {exc}") from None
    flags: list[str] = ["--dtype", dtype]
    if precision in ("int8_wo", "int4_wo"):
        flags += ["--use_weight_only", "--weight_only_precision", precision[:4]]
    elif precision == "int8_sq":
        flags += ["--smoothquant", str(alpha), "--per_token", "--per_channel"]
    if kv == "int8":
        flags.append("--int8_kv_cache")
    calibrates = precision == "int8_sq" or kv == "int8"
    return Recipe(CONVERT, tuple(flags), dtype, calibrates, _calib_flag(table))


def _quantize(
    precision: str, family: str, version: versions.Version, kv: str | None, dtype: str, block: int, label: str
) -> Recipe:
    if family == "qwen" and version < (0, 9):
        # v0.8.0 quantize.py exports Qwen as .npz / torch.save files, not as a TRT-LLM checkpoint.
        raise TrtsweepError(f"{label} is not supported: quantize.py exports Qwen checkpoints from 0.9 on")
    table = versions.quantize_table(version)
    flags = ["--dtype", dtype, "--qformat", QFORMAT[precision]]
    if "awq" in precision:
        flags += ["--awq_block_size", str(block)]
    if kv:
        flags += ["--kv_cache_dtype", kv]
    calibrates = precision not in ("fp16", "bf16", "int8_wo", "int4_wo") or kv is not None
    return Recipe(QUANTIZE, tuple(flags), dtype, calibrates, _calib_flag(table))
