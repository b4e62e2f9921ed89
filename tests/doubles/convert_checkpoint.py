#!/usr/bin/env python3
"""Test double of examples/<family>/convert_checkpoint.py (examples/models/core/<family>/ from 0.20): the
family comes from the directory it is installed in, which must match the release's layout."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import fakelib

from trtsweep.toolchain import versions

version = fakelib.version()
invoked = Path(sys.argv[0])
family = invoked.parent.name
expected = versions.convert_script(version, family)
if not str(invoked).endswith(expected):
    sys.exit(f"python3: can't open file {invoked}: [Errno 2] No such file or directory (expected {expected})")
args = fakelib.parse("convert_checkpoint.py", versions.convert_table(version, family), sys.argv[1:])
fakelib.start("convert_checkpoint.py", sys.argv[1:])
if not (Path(args.model_dir) / "config.json").is_file():
    sys.exit(f"OSError: {args.model_dir} does not appear to have a file named config.json")
if getattr(args, "calib_dataset", None) and (args.smoothquant is not None or args.int8_kv_cache):
    fakelib.check_calib_dir(args.calib_dataset, "validation", must_contain="lambada")
quant = {"quant_algo": None, "kv_cache_quant_algo": "INT8" if args.int8_kv_cache else None}
if args.use_weight_only:
    quant["quant_algo"] = {"int8": "W8A16", "int4": "W4A16"}.get(args.weight_only_precision)
elif args.smoothquant is not None:
    quant["quant_algo"] = "W8A8_SQ_PER_CHANNEL_PER_TOKEN_PLUGIN"
architecture = {"llama": "LlamaForCausalLM", "qwen": "QWenForCausalLM"}[family]
fakelib.checkpoint(
    Path(args.output_dir or "tllm_checkpoint"),
    architecture,
    args.dtype or "float16",
    int(args.tp_size or 1),
    int(args.pp_size or 1),
    quant,
)
print("Total time of converting checkpoints: 00:00:00")
