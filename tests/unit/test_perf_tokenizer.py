"""llm-perf counts tokens with the `tokenizers` library where the model has a tokenizer.json (a benchmark per GPU
of a host must not carry transformers' memory each) and counts exactly what transformers counts."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

from tests.conftest import ROOT
from trtsweep.perf.benchmark import Tokenizer


def test_the_light_tokenizer_counts_as_transformers_does(demo_model: Any):
    from transformers import AutoTokenizer

    reference = AutoTokenizer.from_pretrained(str(demo_model.hf_dir), local_files_only=True)
    light = Tokenizer(str(demo_model.hf_dir))
    texts = [text for line in (ROOT / "data" / "prompts.jsonl").read_text().splitlines() if line.strip()
             for text in (json.loads(line).get("input"), json.loads(line).get("output")) if text]  # fmt: skip
    texts += ["", " leading space", "emoji 🙂 and tabs\tand\nnewlines", "<|im_start|>user\nhi<|im_end|>"]
    assert len(texts) > 20
    for text in texts:
        assert light.count(text) == len(reference.encode(text, add_special_tokens=False)), text
    # the chat template still comes from transformers, and counts stay the light tokenizer's
    chat = light.chat([{"role": "user", "content": "hi"}])
    assert chat == reference.apply_chat_template([{"role": "user", "content": "hi"}], tokenize=False,
                                                 add_generation_prompt=True)  # fmt: skip


def test_counting_tokens_does_not_load_transformers(demo_model: Any):
    code = ("import sys; from trtsweep.perf.benchmark import Tokenizer; "
            f"n = Tokenizer({str(demo_model.hf_dir)!r}).count('How long does express shipping take?'); "
            "print(n, 'transformers' in sys.modules)")  # fmt: skip
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert int(out[0]) > 0 and out[1] == "False"
