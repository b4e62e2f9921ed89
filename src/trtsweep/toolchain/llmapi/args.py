"""The LLM API argument model and the `trtllm-serve` options of each TensorRT-LLM release, as data.

`args/<release>.json` holds, read from the TensorRT-LLM sources of that release (each file names its sources):
`llm_args` (the fields `LLM(...)` / `--extra_llm_api_options` accept with the PyTorch backend, and their types),
`objects` (the fields of the nested config classes such as KvCacheConfig), `serve` (the click options of
`trtllm-serve serve`) and `llmapi_model` (the Triton `llmapi` model's tensors and model.yaml keys).
`check_options()` refuses an option the release does not have, or a value of the wrong type, in one line
naming the path of the field and the closest known name.
"""

from __future__ import annotations

import difflib
import json
from functools import cache
from importlib import resources
from typing import Any

from trtsweep.errors import TrtsweepError

TYPES: dict[str, tuple[tuple[type, ...], str]] = {
    "int": ((int,), "an integer"),
    "float": ((int, float), "a number"),
    "bool": ((bool,), "true or false"),
    "str": ((str,), "a string"),
    "path": ((str,), "a path"),
    "list": ((list,), "a list"),
    "dict": ((dict,), "a mapping"),
}


@cache
def releases() -> dict[str, dict[str, Any]]:
    """release (major.minor) -> its table, for every args/<release>.json."""
    root = resources.files("trtsweep.toolchain.llmapi") / "args"
    tables = {}
    for entry in root.iterdir():
        if entry.name.endswith(".json"):
            table = json.loads(entry.read_text(encoding="utf-8"))
            tables[table["release"]] = table
    return dict(sorted(tables.items(), key=lambda item: tuple(int(p) for p in item[0].split("."))))


def table(release: str) -> dict[str, Any]:
    known = releases()
    if release not in known:
        raise TrtsweepError(f"TensorRT-LLM {release} has no PyTorch-flow table in trtsweep; known: {', '.join(known)}")
    return known[release]


def _closest(name: str, known: dict[str, Any]) -> str:
    guess = difflib.get_close_matches(name, sorted(known), n=1)
    return f"; did you mean {guess[0]!r}?" if guess else ""


def _check_value(field: str, spec: dict[str, Any], value: Any, objects: dict[str, Any], release: str) -> None:
    kind = str(spec.get("type", ""))
    if value is None:
        return  # the release's default
    if "decoding_types" in spec:  # speculative_config: a mapping dispatched on its decoding_type
        _check_decoding(field, spec["decoding_types"], value, objects, release)
        return
    if kind.startswith("object:"):
        fields = objects.get(kind.split(":", 1)[1])
        if not isinstance(value, dict):
            raise TrtsweepError(f"{field}: expected a mapping of {kind.split(':', 1)[1]} fields, got {value!r}")
        if fields is not None:
            _check_fields(field, value, fields, objects, release)
        return
    if kind == "enum" or kind == "choice":
        if value not in spec.get("choices", []):
            raise TrtsweepError(f"{field}: expected one of {', '.join(map(str, spec['choices']))}, got {value!r}")
        return
    types, expected = TYPES.get(kind, ((object,), "a value"))
    if not isinstance(value, types) or (isinstance(value, bool) and bool not in types):
        raise TrtsweepError(f"{field}: expected {expected}, got {value!r}")


def _check_decoding(field: str, types: dict[str, str], value: Any, objects: dict[str, Any], release: str) -> None:
    """A speculative_config mapping: its `decoding_type` one of the release's (DecodingBaseConfig.from_dict's
    table), the other keys fields of the config class it names (the classes are strict: an unknown key fails)."""
    if not isinstance(value, dict):
        raise TrtsweepError(f"{field}: expected a mapping with a decoding_type, got {value!r}")
    kind = value.get("decoding_type")
    if kind not in types:
        raise TrtsweepError(f"{field}.decoding_type: TensorRT-LLM {release} takes one of {', '.join(types)}, "
                            f"got {kind!r}")  # fmt: skip
    fields = objects.get(types[kind])
    if fields is not None:
        _check_fields(field, {k: v for k, v in value.items() if k != "decoding_type"}, fields, objects, release)


def _check_fields(prefix: str, options: dict[str, Any], fields: dict[str, Any], objects: dict[str, Any],
                  release: str) -> None:  # fmt: skip
    for name, value in options.items():
        field = f"{prefix}.{name}"
        if name not in fields:
            raise TrtsweepError(f"{field}: TensorRT-LLM {release}'s LLM API has no such option{_closest(name, fields)}")
        _check_value(field, fields[name], value, objects, release)


def check_speculative(release: str, config: dict[str, Any], field: str) -> None:
    """One speculative_config mapping against the release's decoding configs, errors naming `field`."""
    t = table(release)
    _check_decoding(field, t["llm_args"]["speculative_config"]["decoding_types"], config, t.get("objects", {}), release)


def decoding_fields(release: str, decoding_type: str) -> dict[str, Any]:
    """The fields of the release's config class for `decoding_type` ({} when the release has no such type)."""
    t = table(release)
    name = t["llm_args"]["speculative_config"]["decoding_types"].get(decoding_type)
    return dict(t.get("objects", {}).get(name, {})) if name else {}


def check_options(release: str, options: dict[str, Any], prefix: str = "llm_api") -> None:
    """Every option (nested ones too) is one of the release's LLM API arguments, with a value of its type."""
    t = table(release)
    _check_fields(prefix, options, t["llm_args"], t.get("objects", {}), release)
