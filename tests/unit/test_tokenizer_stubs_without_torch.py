"""The ensemble's tokenizer models (preprocessing, postprocessing) load their tokenizer with torch hidden from
transformers (seconds of CPU and hundreds of MB saved in every stub instance) and tokenize, detokenize and template
exactly as transformers does with torch."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest

from tests.conftest import ROOT

TEMPLATES = ROOT / "src" / "trtsweep" / "triton" / "templates"
# what a stub does with its tokenizer, printed as JSON: ids, texts back, the chat template, and whether torch loaded
PROBE = """
import importlib.util, json, sys, types
sys.modules["triton_python_backend_utils"] = types.ModuleType("triton_python_backend_utils")
texts = [json.loads(line).get("input") for line in open({prompts!r}) if line.strip()]
texts += ["", " leading space", "emoji \\U0001F642 and tabs\\tand\\nnewlines", "<|im_start|>user\\nhi<|im_end|>"]
if {stub!r}:
    spec = importlib.util.spec_from_file_location("stub", {stub!r})
    stub = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(stub)
    import transformers
    tokenizer = stub._load(transformers.AutoTokenizer, {model!r}, padding_side="left", trust_remote_code=True)
else:
    import transformers
    tokenizer = transformers.AutoTokenizer.from_pretrained({model!r}, padding_side="left", trust_remote_code=True)
ids = [tokenizer.encode(t, add_special_tokens=False) for t in texts]
print(json.dumps({{"ids": ids, "back": [tokenizer.decode(i, skip_special_tokens=True) for i in ids],
    "chat": tokenizer.apply_chat_template([{{"role": "user", "content": "hi"}}], tokenize=False,
                                          add_generation_prompt=True),
    "eos": tokenizer.eos_token_id, "torch": sys.modules.get("torch") is not None}}))
"""


def _probe(model: str, stub: str) -> dict[str, Any]:
    code = PROBE.format(prompts=str(ROOT / "data" / "prompts.jsonl"), stub=stub, model=model)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("name", ["preprocessing", "postprocessing"])
def test_a_tokenizer_stub_loads_no_torch_and_tokenizes_as_transformers_with_torch(demo_model: Any, name: str):
    reference = _probe(str(demo_model.hf_dir), "")
    stub = _probe(str(demo_model.hf_dir), str(TEMPLATES / name / "model.py"))
    assert reference["torch"] and not stub["torch"]
    assert len(stub["ids"]) > 20
    assert {k: v for k, v in stub.items() if k != "torch"} == {k: v for k, v in reference.items() if k != "torch"}


def test_a_tokenizer_whose_own_code_imports_torch_is_given_it(demo_model: Any, tmp_path):
    """trust_remote_code: a tokenizer class shipped with the model that imports torch still loads in a stub."""
    model = tmp_path / "custom"
    model.mkdir()
    for name in ("tokenizer.json", "chat_template.jinja", "config.json"):
        (model / name).write_bytes((demo_model.hf_dir / name).read_bytes())
    config = json.loads((demo_model.hf_dir / "tokenizer_config.json").read_text())
    config |= {"tokenizer_class": "CustomTokenizer", "auto_map": {"AutoTokenizer": [None, "custom.CustomTokenizer"]}}
    (model / "tokenizer_config.json").write_text(json.dumps(config))
    (model / "custom.py").write_text("import torch\nfrom transformers import PreTrainedTokenizerFast\n\n\n"
                                     "class CustomTokenizer(PreTrainedTokenizerFast):\n    pass\n")  # fmt: skip
    reference = _probe(str(demo_model.hf_dir), "")
    stub = _probe(str(model), str(TEMPLATES / "preprocessing" / "model.py"))
    assert stub["torch"]  # its own code imported it
    assert stub["ids"] == reference["ids"]
