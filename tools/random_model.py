"""A model of a real model's shape with random weights, as an offline Hugging Face hub cache entry (no download).

For measuring on GPU machines that cannot reach the Hub: the memory preflight, the model load and the per-GPU
numbers of a 7B-parameter model mean something, its answers do not (random weights). The tokenizer is taken from
another local model directory (its vocabulary may be smaller than the config's `vocab_size`; every id it makes is
in range). The weights are made on the GPU when there is one, in the config's dtype, and saved as safetensors into
`<hub cache>/models--<owner>--<name>/snapshots/<commit>/` with `refs/main`, where `hf_download` (offline) finds them;
the commit is a hash of the config and the seed, so the same inputs give the same revision.

tools/data/qwen2.5-7b-instruct.config.json is Qwen/Qwen2.5-7B-Instruct's config.json (its values as published in
the model's repository and quoted in public code, e.g. a transformers-based RoPE benchmark's `hf_qwen2_rope`).

Run: python tools/random_model.py --config tools/data/qwen2.5-7b-instruct.config.json \
         --tokenizer-from <an HF model directory> --repo-id trtsweep-random/Qwen2.5-7B-shaped --hub-cache <dir>
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import time
from pathlib import Path

TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "chat_template.jinja",
                   "generation_config.json")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", type=Path, required=True)
    parser.add_argument("--tokenizer-from", type=Path, required=True)
    parser.add_argument("--repo-id", required=True)
    parser.add_argument("--hub-cache", type=Path, required=True)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    config_text = args.config.read_text()
    commit = hashlib.sha1(f"{config_text}\n{args.seed}".encode()).hexdigest()
    entry = args.hub_cache / ("models--" + args.repo_id.replace("/", "--"))
    snapshot = entry / "snapshots" / commit
    if (snapshot / "config.json").is_file() and any(snapshot.glob("*.safetensors")):
        print(json.dumps({"repo_id": args.repo_id, "revision": commit, "snapshot": str(snapshot), "changed": False}))
        return
    start = time.monotonic()
    config = AutoConfig.for_model(**json.loads(config_text))
    dtype = getattr(torch, json.loads(config_text).get("torch_dtype", "bfloat16"))
    torch.manual_seed(args.seed)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    with torch.device(device):
        model = AutoModelForCausalLM.from_config(config, dtype=dtype)
    params = sum(p.numel() for p in model.parameters())
    tmp = snapshot.with_name(f".{commit}.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    model.save_pretrained(tmp, max_shard_size="5GB")
    for name in TOKENIZER_FILES:
        if (args.tokenizer_from / name).is_file() and name != "generation_config.json":
            shutil.copyfile(args.tokenizer_from / name, tmp / name)
    snapshot.parent.mkdir(parents=True, exist_ok=True)
    tmp.rename(snapshot)
    (entry / "refs").mkdir(exist_ok=True)
    (entry / "refs" / "main").write_text(commit)
    size = sum(f.stat().st_size for f in snapshot.iterdir())
    print(json.dumps({"repo_id": args.repo_id, "revision": commit, "snapshot": str(snapshot), "changed": True,
                      "parameters": params, "bytes": size, "made_on": device,
                      "seconds": round(time.monotonic() - start, 1)}))  # fmt: skip


if __name__ == "__main__":
    main()
