"""The model's tokenizer as llm-perf needs it: token counts, the chat template, words of its vocabulary, decoding.

A model directory with a `tokenizer.json` is served by the `tokenizers` library and jinja2 alone: no transformers
(about 1.2 s of CPU and 100 MB a benchmark process, which matters where a host starts a benchmark per GPU at once).
What transformers' fast tokenizer adds in Python is done the same way here, and checked against AutoTokenizer for
every tokenizer class the project meets (tests/unit/test_perf_tokenizer.py):
- the chat template: `chat_template.jinja`, else `chat_template.json`, else tokenizer_config.json's `chat_template`
  (a string, or named templates: "default"); rendered in a sandboxed jinja2 environment with trim_blocks and
  lstrip_blocks, loop controls, `{% generation %}` blocks, the `tojson` filter, `raise_exception` and
  `strftime_now`, given the messages, `add_generation_prompt` and the special tokens (tokenizer_config.json and
  special_tokens_map.json, a token written as {"content": ...} taken by its content);
- BOS/EOS: counts are without special tokens (the server adds its own), so a class that adds them in Python counts
  the same; a template that writes `bos_token` has it counted as the one token it is;
- decoding: the library's decoder, then transformers' clean-up of spaces before punctuation when
  tokenizer_config.json asks for it (`clean_up_tokenization_spaces`).
A directory without `tokenizer.json` (a slow, sentencepiece-only tokenizer) goes through transformers' AutoTokenizer.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any, ClassVar

from trtsweep.errors import TrtsweepError

SPECIAL = ("bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token")
# the special tokens a tokenizer class has where its files name none (its constructor's defaults)
CLASS_DEFAULTS: dict[str, dict[str, str]] = {
    "GPT2Tokenizer": {"bos_token": "<|endoftext|>", "eos_token": "<|endoftext|>", "unk_token": "<|endoftext|>"},
    "Qwen2Tokenizer": {"eos_token": "<|endoftext|>", "unk_token": "<|endoftext|>", "pad_token": "<|endoftext|>"},
    "LlamaTokenizer": {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>"},
    "T5Tokenizer": {"eos_token": "</s>", "unk_token": "<unk>", "pad_token": "<pad>"},
}
CLEAN_UP = ((" .", "."), (" ?", "?"), (" !", "!"), (" ,", ","), (" ' ", "'"), (" n't", "n't"), (" 'm", "'m"),
            (" 's", "'s"), (" 've", "'ve"), (" 're", "'re"))  # fmt: skip


def _json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
    except (OSError, ValueError) as exc:
        raise TrtsweepError(f"cannot read {path}: {exc}") from exc
    return data if isinstance(data, dict) else {}


def _token(value: Any) -> str | None:
    """A special token as tokenizer files write it: a string, or {"content": ...}."""
    if isinstance(value, dict):
        value = value.get("content")
    return value if isinstance(value, str) else None


def chat_template(path: Path, config: dict[str, Any]) -> str | None:
    """The model's chat template (see the module's doc for where it is looked for), or None."""
    jinja = path / "chat_template.jinja"
    if jinja.is_file():
        return jinja.read_text(encoding="utf-8")
    template = _json(path / "chat_template.json").get("chat_template") or config.get("chat_template")
    if isinstance(template, list):  # named templates: the default one
        named = {t.get("name"): t.get("template") for t in template if isinstance(t, dict)}
        template = named.get("default")
    return template if isinstance(template, str) else None


def special_tokens(path: Path, config: dict[str, Any]) -> dict[str, Any]:
    """The special tokens a chat template is given (`bos_token`, ... and `additional_special_tokens`): the files'
    (a token set to null there is none), else the tokenizer class's defaults."""
    default = CLASS_DEFAULTS.get(str(config.get("tokenizer_class", "")).removesuffix("Fast"), {})
    merged = {**default, **config, **_json(path / "special_tokens_map.json")}
    found: dict[str, Any] = {name: token for name in SPECIAL if (token := _token(merged.get(name))) is not None}
    extra = [t for t in (_token(v) for v in merged.get("additional_special_tokens") or []) if t is not None]
    return {**found, **({"additional_special_tokens": extra} if extra else {})}


def chat_renderer(template: str, tokens: dict[str, Any]) -> Callable[[list[dict[str, str]]], str]:
    """`template` compiled once: messages -> the text with a generation prompt, as transformers renders chat
    templates."""
    import jinja2
    from jinja2 import nodes
    from jinja2.ext import Extension
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    class Generation(Extension):  # `{% generation %}...{% endgeneration %}` marks assistant text: rendered as is
        tags: ClassVar[set[str]] = {"generation"}

        def parse(self, parser: Any) -> nodes.Node:
            lineno = next(parser.stream).lineno
            body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
            return nodes.Scope(body, lineno=lineno)

    def raise_exception(message: str) -> None:
        raise jinja2.exceptions.TemplateError(message)

    def tojson(value: Any, ensure_ascii: bool = False, indent: int | None = None, separators: Any = None,
               sort_keys: bool = False) -> str:  # fmt: skip
        return json.dumps(value, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[Generation, jinja2.ext.loopcontrols])  # fmt: skip
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = lambda fmt: datetime.now().strftime(fmt)
    try:
        compiled = env.from_string(template)
    except jinja2.exceptions.TemplateError as exc:
        raise TrtsweepError(f"--chat-template: the model's chat template does not compile: {exc}") from exc

    def render(messages: list[dict[str, str]]) -> str:
        try:
            return compiled.render(messages=messages, add_generation_prompt=True, **tokens)
        except jinja2.exceptions.TemplateError as exc:
            raise TrtsweepError(f"--chat-template: the model's chat template fails: {exc}") from exc

    return render


class Tokenizer:
    """The tokenizer of the model directory (or hub id, through transformers) `path`."""

    def __init__(self, path: str) -> None:
        self.path = path
        directory = Path(path)
        file = directory / "tokenizer.json"
        self._hf: Any = None
        self._fast: Any = None
        if not file.is_file():
            self._hf = self._transformers()
            return
        from tokenizers import Tokenizer as FastTokenizer

        try:
            self._fast = FastTokenizer.from_file(str(file))
        except Exception as exc:  # the library's own error type: the file is not a tokenizer
            raise TrtsweepError(f"cannot load tokenizer from {file}: {str(exc).splitlines()[0]}") from exc
        config = _json(directory / "tokenizer_config.json")
        self._template = chat_template(directory, config)
        self._tokens = special_tokens(directory, config)
        self._clean_up = bool(config.get("clean_up_tokenization_spaces", False))
        self._render: Callable[[list[dict[str, str]]], str] | None = None

    def _transformers(self) -> Any:
        from transformers import AutoTokenizer

        try:
            return AutoTokenizer.from_pretrained(self.path, local_files_only=Path(self.path).is_dir())
        except (OSError, ValueError) as exc:
            raise TrtsweepError(f"cannot load tokenizer from {self.path}: {str(exc).splitlines()[0]}") from exc

    def encode(self, text: str, special: bool = False) -> list[int]:
        """Token ids of `text`, without special tokens (with them where `special`: what the server's own
        tokenizer adds, e.g. BOS)."""
        if self._fast is not None:
            return list(self._fast.encode(text, add_special_tokens=special).ids)
        return list(self._hf.encode(text, add_special_tokens=special))

    def encode_batch(self, texts: list[str]) -> list[list[int]]:
        if self._fast is not None:
            return [list(e.ids) for e in self._fast.encode_batch(texts, add_special_tokens=False)]
        return [list(ids) for ids in self._hf(texts, add_special_tokens=False)["input_ids"]]

    def count(self, text: str) -> int:
        return len(self.encode(text))

    def decode(self, ids: list[int]) -> str:
        if self._fast is None:
            return str(self._hf.decode(ids))
        text = str(self._fast.decode(ids, skip_special_tokens=False))
        if self._clean_up:
            for before, after in CLEAN_UP:
                text = text.replace(before, after)
        return text

    def token_texts(self) -> Iterator[str]:
        """Each vocabulary entry's text (a byte-level or sentencepiece token as the text it stands for)."""
        if self._fast is None:
            yield from (self._hf.convert_tokens_to_string([t]) for t in self._hf.get_vocab())
            return
        decoder = self._fast.decoder
        for token in self._fast.get_vocab(with_added_tokens=True):
            yield decoder.decode([token]) if decoder is not None else token

    def chat(self, messages: list[dict[str, str]]) -> str:
        if self._fast is None:
            if not getattr(self._hf, "chat_template", None):
                raise TrtsweepError("--chat-template: this tokenizer has no chat template")
            return str(self._hf.apply_chat_template(messages, tokenize=False, add_generation_prompt=True))
        if not self._template:
            raise TrtsweepError("--chat-template: this tokenizer has no chat template")
        if self._render is None:
            self._render = chat_renderer(self._template, self._tokens)
        return self._render(messages)


@functools.cache
def load(path: str) -> Tokenizer:
    """The tokenizer of `path`, loaded once per process (a warm llm-perf loads it before its benchmark:
    perf/warm.py)."""
    return Tokenizer(path)
