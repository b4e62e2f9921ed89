"""The PyTorch flow's second server: `trtllm-serve` (OpenAI-compatible), or its hf-backend counterpart.

server.py starts, supervises, health-checks and stops it like Triton; this module holds what differs:

- the command: `trtllm-serve <model> --backend pytorch --host --port --tp_size --pp_size [--ep_size]
  --extra_llm_api_options <file>` built and checked by llmapi.serve.argv against the release's click options;
  the hf backend runs `python -m trtsweep.serve.hf_openai` with the same arguments (checked the same way);
- its identity: trtllm-serve has no server id option, but `GET /v1/models` names its model: the last component
  of the model argument when that is a directory (OpenAIServer), else the argument. Every start serves the
  checkpoint through a link of its own, `<served_dir>/trtsweep-<hex>` -> the checkpoint, so the model id is the
  start's server id: a port answered by another server (another point packed on the host, a leftover) names
  another model and is never taken for ours;
- health: `GET /health`; one port (HTTP; trtllm-serve's /metrics is on it too, JSON, not Prometheus).

A worker of a disaggregated point (serve/group.py) is started the same way with its own arguments after the model
(`flags`: toolchain.llmapi.disagg.Worker.flags, its host, port, parallelism and 1.0/1.1's build_config flags) and the
group's model id: its link is `<served_dir>/trtsweep-<hex>/<model id>`, its own per start, while every worker of the
group answers `GET /v1/models` with the group's model id, the `model` of the requests the proxy passes on to them.
"""

from __future__ import annotations

import hashlib
import json
import sys
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from trtsweep.errors import TrtsweepError
from trtsweep.toolchain.llmapi import serve as llmapi_serve

BACKENDS = ("tensorrtllm", "hf")
HF_SERVER = ("-m", "trtsweep.serve.hf_openai")


@dataclass
class OpenAIServe:
    backend: str  # tensorrtllm: trtllm-serve; hf: trtsweep.serve.hf_openai
    release: str  # the release whose trtllm-serve options the command is checked against
    model: Path  # the checkpoint served
    options_file: Path  # the point's LLM API options (--extra_llm_api_options)
    served_dir: Path  # where each start's model link is made (the server's identity)
    tp: int = 1
    pp: int = 1
    ep: int | None = None
    executable: str = "trtllm-serve"
    flags: list[str] | None = None  # a disaggregated worker's arguments after the model (instead of tp/pp/ep)
    model_id: str | None = None  # a disaggregated group's model id: the last component of each worker's link


def served_path(openai: OpenAIServe, server_id: str | None) -> Path:
    """The model argument of one start: its own link to the checkpoint (the checkpoint itself when no id); named the
    group's model id for a disaggregated worker."""
    if not server_id:
        return openai.model
    return openai.served_dir / server_id / openai.model_id if openai.model_id else openai.served_dir / server_id


def link(openai: OpenAIServe, server_id: str) -> Path:
    path = served_path(openai, server_id)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.unlink(missing_ok=True)
    path.symlink_to(openai.model.resolve(), target_is_directory=True)
    return path


def argv(openai: OpenAIServe, host: str, port: int, server_id: str | None, python: str = sys.executable) -> list[str]:
    """trtllm-serve's command line (the hf backend's counterpart: `python` -m trtsweep.serve.hf_openai; in a
    container the image's python3)."""
    if openai.backend not in BACKENDS:
        raise TrtsweepError(f"openai server backend: expected one of {BACKENDS}, got {openai.backend!r}")
    if openai.flags is not None:  # a disaggregated worker: its flags carry its host and port
        options = llmapi_serve.option(openai.release, "--extra_llm_api_options", str(openai.options_file))
        out = [openai.executable, str(served_path(openai, server_id)), *openai.flags, *options]
        return [python, *HF_SERVER, *out[1:]] if openai.backend == "hf" else out
    spec = llmapi_serve.ServeSpec(
        model=str(served_path(openai, server_id)), options_file=str(openai.options_file), port=port, host=host,
        tp=openai.tp, pp=openai.pp, ep=openai.ep, executable=openai.executable,
    )  # fmt: skip
    out = llmapi_serve.argv(openai.release, spec)
    # 1.0/1.1: trtllm-serve builds a build_config from its own flags, whose max_batch_size, max_num_tokens and
    # max_seq_len win over the options file's top-level keys; they are passed as flags there (none in 1.2)
    out += llmapi_serve.build_config_flags(openai.release, _options(openai.options_file))
    return [python, *HF_SERVER, *out[1:]] if openai.backend == "hf" else out


def _options(path: Path) -> dict[str, Any]:
    """The point's LLM API options (the options file), {} before it is written."""
    loaded = yaml.safe_load(path.read_text()) if path.is_file() else None
    return loaded if isinstance(loaded, dict) else {}


def content_hash(openai: OpenAIServe) -> str:
    """What a start serves, for adoption: the checkpoint's path and config, and the options file's bytes."""
    digest = hashlib.sha256(str(openai.model.resolve()).encode())
    for path in (openai.model / "config.json", openai.options_file):
        digest.update(path.read_bytes() if path.is_file() else b"-")
    return digest.hexdigest()


def model_id(host: str, port: int, timeout_s: float = 2.0) -> tuple[bool, str | None]:
    """(answered, the first model id of GET /v1/models); (False, None) when nothing answers."""
    url = f"http://{f'[{host}]' if ':' in host else host}:{port}/v1/models"
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as resp:
            body = resp.read(1 << 16)
    except urllib.error.HTTPError:
        return True, None
    except (urllib.error.URLError, OSError):
        return False, None
    try:
        data = json.loads(body).get("data") or []
        first = data[0].get("id") if isinstance(data[0], dict) else None
    except (ValueError, AttributeError, IndexError):
        return True, None
    return True, first if isinstance(first, str) else None
