#!/usr/bin/env python3
"""Test double of ModelOpt's examples/llm_ptq/hf_ptq.py (the PyTorch flow's quantization): parses its argv with
the argument definitions trtsweep recorded for the release (TRTSWEEP_FAKE_MODELOPT_RELEASE), records the call,
reads the calibration dataset as ModelOpt's loader would (a local folder named like the dataset, relative to the
working directory) and writes what an HF export carries: config.json and hf_quant_config.json."""

import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import fakelib

from trtsweep.toolchain.llmapi import modelopt

release = os.environ["TRTSWEEP_FAKE_MODELOPT_RELEASE"]
args = fakelib.parse("hf_ptq.py", modelopt.table(release), sys.argv[1:])
fakelib.start("hf_ptq.py", sys.argv[1:])
model = Path(args.pyt_ckpt_path)
if not (model / "config.json").is_file():
    sys.exit(f"OSError: {model} does not appear to have a file named config.json")
if args.dataset and not Path(args.dataset).is_dir():
    sys.exit(f"DatasetNotFoundError: no local {args.dataset!r} in {os.getcwd()} and no network")
if args.dataset:
    fakelib.check_calib_dir(args.dataset, "train")
out = Path(args.export_path)
out.mkdir(parents=True, exist_ok=True)
(out / "config.json").write_text((model / "config.json").read_text())
kv = {"fp8": "FP8"}.get(args.kv_cache_qformat)
quantization = {"quant_algo": modelopt.record(release)["quant_algo"][args.qformat], "kv_cache_quant_algo": kv}
(out / "hf_quant_config.json").write_text(json.dumps({"producer": {"name": "modelopt"}, "quantization": quantization}))
print(f"Quantized model exported to {out}")
