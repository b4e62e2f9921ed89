"""llm-perf's tokenizer (trtsweep.perf.tokenizer: the `tokenizers` library and jinja2, no transformers) against
transformers' AutoTokenizer, for every tokenizer class the project meets: the demo model's (GPT2Tokenizer), and
tokenizers made here in the shape of Qwen2's (Qwen2Tokenizer), Llama 3's (PreTrainedTokenizerFast, BOS from the
post-processor), Llama 2's / Mistral's (LlamaTokenizer: byte fallback, BOS added by the class) and T5's (Unigram, EOS
appended). Token counts of the demo prompts and of synthetic text, the words the workloads draw, decoding, the chat
templates (each way a model directory stores one), and special tokens where a class adds them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ROOT
from trtsweep.errors import TrtsweepError
from trtsweep.perf.dataset import synthetic
from trtsweep.perf.tokenizer import Tokenizer
from trtsweep.perf.workloads import Words

CORPUS = [text for line in (ROOT / "data" / "prompts.jsonl").read_text().splitlines() if line.strip()
          for text in (json.loads(line).get("input"), json.loads(line).get("output")) if text]  # fmt: skip
ODD = ["", " leading space", "emoji 🙂 and tabs\tand\nnewlines", "ünïcödé café naïve", "a  b   c", "x" * 300,
       "don't stop . here , please !"]  # fmt: skip
# a template with what chat templates use: the special tokens, loop controls, tojson, raise_exception, generation
TEMPLATE = (
    "{{ bos_token }}{% for m in messages %}{% if m.role not in ['system', 'user', 'assistant'] %}"
    "{{ raise_exception('Unknown role ' + m.role) }}{% endif %}{% if loop.index > 8 %}{% break %}{% endif %}"
    "<|{{ m.role }}|>\n{% if m.role == 'assistant' %}{% generation %}{{ m.content | trim }}{% endgeneration %}"
    "{% else %}{{ m.content }}{% endif %}{{ eos_token }}\n{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>\n{% endif %}{{ {'n': messages | length, 'é': 1} | tojson }}"
)
MESSAGES = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Où est ma commande ?"},
            {"role": "assistant", "content": "  It ships today.  "}, {"role": "user", "content": "Thanks"}]  # fmt: skip


QWEN2_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|"
               r"\s+(?!\S)|\s+")  # fmt: skip
LLAMA3_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|"
                r"\s*[\r\n]+|\s+(?!\S)|\s+")  # fmt: skip


def _byte_level(tokenizer_class: str) -> tuple[Any, dict[str, Any]]:
    """GPT-2 (SmolLM2), Qwen2 and Llama 3 tokenizers as their tokenizer.json files are written."""
    from tokenizers import Regex, decoders, models, normalizers, pre_tokenizers, processors, trainers
    from tokenizers import Tokenizer as Raw

    raw = Raw(models.BPE())
    byte_level = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    split = {"Qwen2Tokenizer": QWEN2_SPLIT, "PreTrainedTokenizerFast": LLAMA3_SPLIT}.get(tokenizer_class)
    raw.pre_tokenizer = (pre_tokenizers.Sequence([pre_tokenizers.Split(Regex(split), "isolated"), byte_level])
                         if split else pre_tokenizers.ByteLevel(add_prefix_space=False))  # fmt: skip
    if tokenizer_class == "Qwen2Tokenizer":
        raw.normalizer = normalizers.NFC()
    raw.decoder = decoders.ByteLevel()
    raw.train_from_iterator(CORPUS * 3, trainers.BpeTrainer(
        vocab_size=600, special_tokens=["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|begin_of_text|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))  # fmt: skip
    if tokenizer_class == "PreTrainedTokenizerFast":  # Llama 3: BOS from the post-processor
        bos = raw.token_to_id("<|begin_of_text|>")
        template = processors.TemplateProcessing(
            single="<|begin_of_text|> $A", pair="<|begin_of_text|> $A <|begin_of_text|> $B",
            special_tokens=[("<|begin_of_text|>", bos)])  # fmt: skip
        raw.post_processor = processors.Sequence([processors.ByteLevel(trim_offsets=False), template])
        return raw, {"bos_token": "<|begin_of_text|>", "eos_token": "<|im_end|>"}
    raw.post_processor = processors.ByteLevel(trim_offsets=False)
    if tokenizer_class == "Qwen2Tokenizer":  # no BOS; the class's defaults for the rest
        return raw, {"eos_token": "<|im_end|>"}
    return raw, {}  # GPT2Tokenizer: every special token the class's default, <|endoftext|>


def _sentencepiece_like(tokenizer_class: str) -> tuple[Any, dict[str, Any]]:
    """Llama 2 / Mistral (BPE with byte fallback, Metaspace; BOS added by the class) and T5 (Unigram, EOS
    appended, extra ids) tokenizers as transformers writes them."""
    from tokenizers import Tokenizer as Raw
    from tokenizers import decoders, models, pre_tokenizers, processors, trainers

    if tokenizer_class == "T5Tokenizer":
        extra = [f"<extra_id_{i}>" for i in range(99, -1, -1)]
        raw = Raw(models.Unigram())
        raw.pre_tokenizer = pre_tokenizers.Sequence(
            [pre_tokenizers.WhitespaceSplit(), pre_tokenizers.Metaspace(prepend_scheme="always", split=True)]
        )
        raw.decoder = decoders.Metaspace(prepend_scheme="always", split=True)
        raw.train_from_iterator(CORPUS * 3, trainers.UnigramTrainer(
            vocab_size=1200, special_tokens=["<pad>", "</s>", "<unk>", *extra], unk_token="<unk>"))  # fmt: skip
        raw.post_processor = processors.TemplateProcessing(
            single="$A </s>", pair="$A </s> $B </s>", special_tokens=[("</s>", raw.token_to_id("</s>"))]
        )
        return raw, {"eos_token": "</s>", "additional_special_tokens": extra[::-1], "extra_ids": 100,
                     "clean_up_tokenization_spaces": True}  # fmt: skip
    raw = Raw(models.BPE(byte_fallback=True, unk_token="<unk>", fuse_unk=True))
    raw.pre_tokenizer = pre_tokenizers.Metaspace(prepend_scheme="first", split=True)  # trained on words
    raw.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse(),
                                     decoders.Strip(" ", 1, 0)])  # fmt: skip
    raw.train_from_iterator(CORPUS * 3, trainers.BpeTrainer(
        vocab_size=2500, special_tokens=["<unk>", "<s>", "</s>", *(f"<0x{b:02X}>" for b in range(256))]))  # fmt: skip
    raw.pre_tokenizer = pre_tokenizers.Metaspace(prepend_scheme="first", split=False)  # as Llama's file has it
    raw.post_processor = processors.TemplateProcessing(
        single="<s> $A", pair="<s> $A <s> $B", special_tokens=[("<s>", raw.token_to_id("<s>"))]
    )
    return raw, {"add_bos_token": True, "add_eos_token": False}  # the class's <s>, </s>, <unk>


def _made(directory: Path, tokenizer_class: str, store: str) -> Path:
    """A model directory with a tokenizer of `tokenizer_class`'s shape, its chat template stored as `store` says."""
    build = _sentencepiece_like if tokenizer_class in ("LlamaTokenizer", "T5Tokenizer") else _byte_level
    raw, special = build(tokenizer_class)
    directory.mkdir()
    raw.save(str(directory / "tokenizer.json"))
    config = {"tokenizer_class": tokenizer_class, "model_max_length": 4096, "clean_up_tokenization_spaces": False,
              **special}  # fmt: skip
    if store == "config":
        config["chat_template"] = TEMPLATE
    elif store == "named":
        config["chat_template"] = [{"name": "default", "template": TEMPLATE}, {"name": "tool_use", "template": "x"}]
    elif store == "jinja":
        (directory / "chat_template.jinja").write_text(TEMPLATE)
    (directory / "tokenizer_config.json").write_text(json.dumps(config))
    return directory


def _reference(directory: Path) -> Any:
    sys.modules.setdefault("torch", None)  # as llm-perf: transformers' tokenizers need no torch
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(directory), local_files_only=True)


def _same_as_transformers(light: Tokenizer, reference: Any, chat: bool = True) -> None:
    texts = [*CORPUS, *ODD]
    assert len(texts) > 20
    for text in texts:
        assert light.encode(text) == reference.encode(text, add_special_tokens=False), text
        assert light.encode(text, special=True) == reference.encode(text, add_special_tokens=True), text
        ids = light.encode(text)
        assert light.decode(ids) == reference.decode(ids), text
    assert sorted(light.token_texts()) == sorted(reference.convert_tokens_to_string([t]) for t in reference.get_vocab())
    assert light.encode_batch(texts) == reference(texts, add_special_tokens=False)["input_ids"]
    records = synthetic(light, 40, (48.0, 12.0), (16.0, 2.0), seed=3)
    for record in records:
        assert record.input is not None
        assert light.count(record.input) == len(reference.encode(record.input, add_special_tokens=False))
    if chat:
        for messages in (MESSAGES, MESSAGES[1:2]):
            want = reference.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
            assert light.chat(messages) == want
            assert light.count(light.chat(messages)) == len(reference.encode(want, add_special_tokens=False))


def test_the_demo_models_tokenizer_is_transformers_own(demo_model: Any) -> None:
    light = Tokenizer(str(demo_model.hf_dir))
    _same_as_transformers(light, _reference(demo_model.hf_dir))
    assert len(Words(light).vocab) >= 16


@pytest.mark.parametrize(("tokenizer_class", "store"), [
    ("Qwen2Tokenizer", "config"), ("PreTrainedTokenizerFast", "jinja"), ("LlamaTokenizer", "named"),
    ("T5Tokenizer", "config"), ("GPT2Tokenizer", "jinja"),
])  # fmt: skip
def test_each_tokenizer_class_counts_decodes_and_templates_as_transformers(
    tmp_path: Path, tokenizer_class: str, store: str
) -> None:
    directory = _made(tmp_path / "model", tokenizer_class, store)
    reference = _reference(directory)
    assert type(reference).__name__ == {"PreTrainedTokenizerFast": "TokenizersBackend"}.get(
        tokenizer_class, tokenizer_class
    )
    _same_as_transformers(Tokenizer(str(directory)), reference)


def test_a_template_that_raises_and_a_model_without_one_say_so_in_one_line(tmp_path: Path) -> None:
    light = Tokenizer(str(_made(tmp_path / "model", "Qwen2Tokenizer", "config")))
    with pytest.raises(TrtsweepError, match="chat template fails: Unknown role tool"):
        light.chat([{"role": "tool", "content": "{}"}])
    bare = Tokenizer(str(_made(tmp_path / "bare", "Qwen2Tokenizer", "none")))
    with pytest.raises(TrtsweepError, match="has no chat template"):
        bare.chat(MESSAGES)
    (tmp_path / "bare" / "chat_template.jinja").write_text("{% for m in messages %}{{ m.content }}")
    with pytest.raises(TrtsweepError, match=r"chat template does not compile: .*endfor"):
        Tokenizer(str(tmp_path / "bare")).chat(MESSAGES)


def test_a_benchmark_with_a_chat_template_loads_neither_transformers_nor_torch(demo_model: Any) -> None:
    code = ("import sys; from trtsweep.perf.tokenizer import Tokenizer; t = Tokenizer(sys.argv[1]); "
            "n = t.count(t.chat([{'role': 'user', 'content': 'How long does express shipping take?'}])); "
            "print(n, 'transformers' in sys.modules, 'torch' in sys.modules)")  # fmt: skip
    done = subprocess.run([sys.executable, "-c", code, str(demo_model.hf_dir)], capture_output=True, text=True,
                          check=True)  # fmt: skip
    count, transformers, torch = done.stdout.split()
    assert int(count) > 5 and (transformers, torch) == ("False", "False"), done.stdout
