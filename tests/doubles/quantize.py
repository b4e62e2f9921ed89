#!/usr/bin/env python3
"""Test double of examples/quantization/quantize.py."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import fakelib

from trtsweep.toolchain import versions

version = fakelib.version()
args = fakelib.parse("quantize.py", versions.quantize_table(version), sys.argv[1:])
fakelib.start("quantize.py", sys.argv[1:])
if not (Path(args.model_dir) / "config.json").is_file():
    sys.exit(f"OSError: {args.model_dir} does not appear to have a file named config.json")
if getattr(args, "calib_dataset", None):
    fakelib.check_calib_dir(args.calib_dataset, "train")
algo = {"fp8": "FP8", "int8_sq": "W8A8_SQ_PER_CHANNEL", "int4_awq": "W4A16_AWQ", "w4a8_awq": "W4A8_AWQ",
        "int8_wo": "W8A16", "int4_wo": "W4A16"}.get(args.qformat)  # fmt: skip
kv = {"int8": "INT8", "fp8": "FP8"}.get(args.kv_cache_dtype)
dtype = args.dtype if args.dtype not in (None, "auto") else "float16"
fakelib.checkpoint(
    Path(args.output_dir or "exported_model"),
    "LlamaForCausalLM",
    dtype,
    int(args.tp_size or 1),
    int(args.pp_size or 1),
    {"quant_algo": algo, "kv_cache_quant_algo": kv},
)
print(f"Quantized model exported to {args.output_dir}")
