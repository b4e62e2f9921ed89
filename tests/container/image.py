"""The test image: Debian bookworm with the real tritonserver laid out as NGC images lay it out, built without a
registry, once per set of inputs on this machine.

Two images:

* the base, ``trtsweep-test/base:<digest>``: ``mmdebstrap --variant=minbase bookworm`` (python3, python3-venv,
  ca-certificates and libpython3.11, which the python backend's stub links against) from apt's own sources ->
  ``docker import`` -> a container of it (no network, the wheels bind-mounted) that installs, into the venv
  ``/opt/trtsweep-venv``, wheels fetched beforehand on the host with ``pip wheel --no-deps``: nvidia-pytriton, torch
  (the CPU build), transformers, tokenizers, numpy, pyyaml and everything they need, each at the version the host's
  venv has, and lays out ``/opt/tritonserver/bin/tritonserver`` and ``/opt/tritonserver/backends/python`` (the
  backend, its utils and the 3.11 stub from the wheel) -> ``docker commit``. Its digest covers the recipe, those
  versions and the dockerd version. It is built in a daemon of its own whose data root, once that daemon has stopped,
  is kept in ``~/.cache/trtsweep-tests/data-<digest>``; each session's daemon starts from a copy of it whose layers
  are hard links (a second, where ``docker load`` of the same image takes 35-50 s here).
* the image the tests run, ``trtsweep-test/triton:<digest>-<build id>``: the base plus the trtsweep wheel built from
  the checkout (the project's own builder, reused per build id), built in each session in a few seconds.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from tests.container.dockerd import DOCKERD, Dockerd, locked, start, unmount_below

CACHE = Path.home() / ".cache" / "trtsweep-tests"
MMDEBSTRAP = "mmdebstrap"
RECIPE_VERSION = 1  # bump to rebuild the base when something the digest does not see changes
SUITE = "bookworm"
DEBIAN_PACKAGES = ("python3", "python3-venv", "ca-certificates", "libpython3.11")
PYTHON_PACKAGES = ("nvidia-pytriton", "torch", "transformers", "tokenizers", "numpy", "pyyaml")
PYTHON_VERSION = "3.11"  # bookworm's python3, like the host venv's: cp311 wheels fit
VENV = "/opt/trtsweep-venv"
SITE = f"{VENV}/lib/python{PYTHON_VERSION}/site-packages"
TRITON = "/opt/tritonserver"
PATH = f"{VENV}/bin:{TRITON}/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
LD_LIBRARY_PATH = f"{SITE}/nvidia_pytriton.libs:/usr/lib/x86_64-linux-gnu"
# apt settings of the host that mmdebstrap's own apt needs too (its apt does not read /etc/apt/apt.conf.d)
APT_OPTIONS = ("Acquire::Check-Valid-Until", "Acquire::Check-Date", "Acquire::http::Proxy", "Acquire::https::Proxy")
# no mirror address, apt option or package list of the build host stays in the image
CLEAN_HOOK = (
    'rm -rf "$1"/etc/apt/sources.list "$1"/etc/apt/sources.list.d/* "$1"/etc/apt/apt.conf.d/99mmdebstrap'
    ' "$1"/var/lib/apt/lists/* "$1"/var/cache/apt/*'
)
PYTRITON = f"{SITE}/pytriton/tritonserver"
# Run in a container of the root filesystem with the wheels bind-mounted read-only, then committed: no build context
# to send, no layer that carries the wheels, no second stage copying the venv (a classic two-stage `docker build`
# copied its 1.5 GB three more times: 106 s and most of its CPU).
INSTALL = f"""\
set -e
python3 -m venv {VENV}
{VENV}/bin/pip install --no-index --no-cache-dir --find-links /tmp/wheels -r /tmp/wheels/requirements.txt
mkdir -p {TRITON}/bin {TRITON}/backends/python
ln -s {PYTRITON}/bin/tritonserver {TRITON}/bin/tritonserver
ln -s {PYTRITON}/backends/python/libtriton_python.so {TRITON}/backends/python/libtriton_python.so
ln -s {PYTRITON}/backends/python/triton_python_backend_utils.py {TRITON}/backends/python/triton_python_backend_utils.py
ln -s {PYTRITON}/python_backend_stubs/{PYTHON_VERSION}/triton_python_backend_stub \\
      {TRITON}/backends/python/triton_python_backend_stub
"""
BASE_ENV = (f"PATH={PATH}", f"LD_LIBRARY_PATH={LD_LIBRARY_PATH}")
TRTSWEEP_CONTAINERFILE = f"""\
FROM {{base}}
COPY {{wheel}} /tmp/{{wheel}}
RUN {VENV}/bin/pip install --no-index --no-deps --no-cache-dir /tmp/{{wheel}} && rm /tmp/{{wheel}}
"""


class ImageError(RuntimeError):
    """The test image could not be built."""


@dataclass
class Image:
    """The image the tests run, and what making it cost."""

    name: str
    base: str
    trtsweep_build: str
    pins: dict[str, str]
    size_bytes: int = 0
    base_source: str = ""  # "built" in this session, or "cached" by an earlier one
    seconds: dict[str, float] = field(default_factory=dict)


def unavailable_reason() -> str | None:
    """Why the image cannot be built here (None when it can)."""
    if shutil.which(MMDEBSTRAP) is None:
        return "no mmdebstrap (apt-get install mmdebstrap)"
    if not apt_sources():
        return f"no apt sources file for {SUITE} under /etc/apt"
    return None


# -- what goes in -----------------------------------------------------------------------------------------------------


def pins(names: tuple[str, ...] = PYTHON_PACKAGES) -> dict[str, str]:
    """{name: version} of `names` and everything they need (with the extras asked for), as installed in the running
    venv: the image gets the same versions."""
    installed = {canonicalize_name(d.metadata["Name"]): d for d in importlib.metadata.distributions()}
    todo: list[tuple[str, str]] = [(canonicalize_name(n), "") for n in names]
    seen: set[tuple[str, str]] = set()
    found: dict[str, str] = {}
    while todo:
        name, extra = todo.pop()
        if (name, extra) in seen:
            continue
        seen.add((name, extra))
        dist = installed.get(name)
        if dist is None:
            raise ImageError(f"{name} is needed in the image but not installed in {sys.prefix}")
        found[dist.metadata["Name"]] = dist.version
        todo += _requirements(dist.requires or [], extra)
    return dict(sorted(found.items(), key=lambda kv: canonicalize_name(kv[0])))


def _requirements(requires: list[str], extra: str) -> list[tuple[str, str]]:
    """(name, extra) pairs a distribution needs here for `extra` ("" for its base requirements)."""
    needed = []
    for line in requires:
        req = Requirement(line)
        if req.marker is None and extra:
            continue
        if req.marker is not None and not req.marker.evaluate({"extra": extra}):
            continue
        name = canonicalize_name(req.name)
        needed += [(name, ""), *((name, canonicalize_name(e)) for e in req.extras)]
    return needed


def apt_sources() -> list[Path]:
    """The host's apt sources files that name the suite (one-line or deb822 format)."""
    suite = re.compile(rf"(^|\s){SUITE}(-[\w]+)?(\s|$)", re.MULTILINE)
    etc = Path("/etc/apt")
    candidates = [etc / "sources.list", *sorted(etc.glob("sources.list.d/*.list")),
                  *sorted(etc.glob("sources.list.d/*.sources"))]  # fmt: skip
    found = []
    for path in candidates:
        text = "\n".join(ln for ln in _text(path).splitlines() if not ln.lstrip().startswith("#"))
        if suite.search(text):
            found.append(path)
    return found


def apt_options() -> list[str]:
    """APT_OPTIONS as the host's apt has them set (`apt-config dump`), as mmdebstrap --aptopt values."""
    dump = subprocess.run(["apt-config", "dump"], capture_output=True, text=True, check=False).stdout
    wanted = {o.lower() for o in APT_OPTIONS}
    return [line.rstrip(";") for line in dump.splitlines() if line.split(" ", 1)[0].lower() in wanted]


def base_digest(versions: dict[str, str], daemon: str) -> str:
    """A digest of everything the base image's data root is made of: the recipe, the Python versions and the daemon
    (`dockerd --version`) that writes it."""
    recipe = {
        "version": RECIPE_VERSION, "suite": SUITE, "debian": DEBIAN_PACKAGES, "hook": CLEAN_HOOK,
        "install": INSTALL, "env": BASE_ENV, "pins": versions, "daemon": daemon,
    }  # fmt: skip
    return hashlib.sha256(json.dumps(recipe, sort_keys=True).encode()).hexdigest()[:16]


def _text(path: Path) -> str:
    try:
        return path.read_text(errors="replace")
    except OSError:
        return ""


# -- making it --------------------------------------------------------------------------------------------------------


@dataclass
class Template:
    """A stopped daemon's data root holding the base image, to seed each session's daemon with (see `ensure_base`)."""

    data: Path
    base: str
    pins: dict[str, str]
    source: str  # "built" now, or "cached" by an earlier session
    seconds: dict[str, float] = field(default_factory=dict)


def ensure_base(cache: Path = CACHE) -> Template:
    """The base image as a data root in the cache, keyed by its digest (and the daemon's version): built now, in a
    daemon of its own whose data root is kept once it has stopped, when no session made it before. Older ones go."""
    versions = pins()
    digest = base_digest(versions, _dockerd_version())
    template = Template(cache / f"data-{digest}", f"trtsweep-test/base:{digest}", versions, "cached")
    cache.mkdir(parents=True, exist_ok=True)
    with locked(cache / ".lock"):
        if not template.data.is_dir():
            began = time.monotonic()
            template.seconds.update(_build_template(template, cache / f".data-{digest}.partial"))
            template.seconds["base built"] = time.monotonic() - began
            template.source = "built"
        _prune(cache, keep={template.data, cache / "trtsweep-wheels"})
    return template


def _build_template(template: Template, partial: Path) -> dict[str, float]:
    """Build the base in a fresh daemon, drop the build's intermediate images, stop the daemon keeping its data root
    at `partial`, then publish it under the template's name (a rename: complete or absent)."""
    shutil.rmtree(partial, ignore_errors=True)  # a killed earlier build's
    bed = start()
    try:
        seconds = build_base(bed, template.base, template.pins, bed.root / "build")
        bed.docker("image", "prune", "--force", timeout=300)
        began = time.monotonic()
        bed.stop(keep_data=partial)
        seconds["daemon stop"] = time.monotonic() - began
    finally:
        bed.stop()
    partial.rename(template.data)
    return seconds


def _dockerd_version() -> str:
    """`dockerd --version`: a data root is read by the daemon version that wrote it."""
    return subprocess.run([str(DOCKERD), "--version"], capture_output=True, text=True, check=False).stdout.strip()


def ensure(bed: Dockerd, template: Template, cache: Path = CACHE) -> Image:
    """The test image in `bed` (a daemon seeded with `template`): the base plus the trtsweep wheel of the checkout."""
    from trtsweep.fleet.bootstrap import build_wheel

    began = time.monotonic()
    with locked(cache / ".lock"):  # one machine, several sessions: each may build (or prune) wheels in there
        wheel, build, _ = build_wheel(cache / "trtsweep-wheels")
        _prune(cache / "trtsweep-wheels", keep={wheel.parent})
    image = Image(f"{template.base.replace('/base:', '/triton:')}-{build}", template.base, build, template.pins)
    image.base_source = template.source
    image.seconds = {**template.seconds, "daemon seeded": bed.seed_s}
    _build_trtsweep_layer(bed, image, wheel, bed.root / "build" / "trtsweep")
    image.seconds["trtsweep layer"] = time.monotonic() - began
    image.size_bytes = int(bed.docker("image", "inspect", "-f", "{{.Size}}", image.name).stdout)
    return image


def build_base(bed: Dockerd, tag: str, versions: dict[str, str], work: Path) -> dict[str, float]:
    """Build the base image in `bed` from scratch; returns the seconds of each step."""
    seconds: dict[str, float] = {}
    work.mkdir(parents=True)
    try:
        rootfs_tag = tag.replace("/base:", "/rootfs:")
        steps = (
            ("mmdebstrap", lambda: build_rootfs(work / "rootfs.tar", work)),
            ("pip wheel", lambda: fetch_wheels(versions, work / "wheels")),
            ("docker import", lambda: bed.docker("import", str(work / "rootfs.tar"), rootfs_tag, timeout=600)),
            ("install and commit", lambda: install_and_commit(bed, rootfs_tag, tag, work / "wheels")),
        )
        for name, step in steps:
            began = time.monotonic()
            step()
            seconds[name] = time.monotonic() - began
    finally:
        unmount_below(work)  # a failed mmdebstrap may leave its chroot's /proc, /sys, /dev mounted
        shutil.rmtree(work, ignore_errors=True)
    return seconds


def build_rootfs(out: Path, work: Path) -> None:
    """`mmdebstrap --variant=minbase` of the suite into the tarball `out`, from the host's apt sources."""
    argv = [
        MMDEBSTRAP, "--variant=minbase", f"--include={','.join(DEBIAN_PACKAGES)}",
        *(f"--aptopt={opt}" for opt in apt_options()), f"--customize-hook={CLEAN_HOOK}",
        SUITE, str(out), *(str(p) for p in apt_sources()),
    ]  # fmt: skip
    env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "TMPDIR": str(work), "LC_ALL": "C.UTF-8"}
    _run(argv, "mmdebstrap", work / "mmdebstrap.log", env=env, timeout=900)


def fetch_wheels(versions: dict[str, str], dest: Path) -> None:
    """The wheels of exactly `versions` into `dest` (from pip's cache, PIP_FIND_LINKS or the index; built when only a
    source archive exists), with the requirements file the image installs from."""
    dest.mkdir(parents=True)
    reqs = [f"{name}=={version}" for name, version in versions.items()]
    (dest / "requirements.txt").write_text("\n".join(reqs) + "\n")
    argv = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--wheel-dir", str(dest), *reqs]
    _run(argv, "pip wheel", dest.parent / "pip-wheel.log", timeout=900)


def install_and_commit(bed: Dockerd, rootfs: str, tag: str, wheels: Path) -> None:
    """INSTALL in a container of `rootfs` (no network, the wheels read-only), committed as `tag` with BASE_ENV."""
    name = f"trtsweep-base-build-{tag.rsplit(':', 1)[1]}"
    run = bed.argv("run", "--name", name, "--network", "none", "-v", f"{wheels}:/tmp/wheels:ro", rootfs, "sh", "-c",
                   INSTALL)  # fmt: skip
    try:
        _run(run, "the base's install", wheels.with_suffix(".log"), env=bed.env(), timeout=900)
        changes = [arg for env in BASE_ENV for arg in ("--change", f"ENV {env}")]
        bed.docker("commit", *changes, name, tag, timeout=600)
    finally:
        bed.docker("rm", "-f", name, check=False, timeout=120)


def docker_build(bed: Dockerd, tag: str, containerfile: str, context: Path) -> None:
    """`docker build --network none` (the classic builder) of `containerfile` with `context` as the build context;
    its output goes to `<context>.log`."""
    context.mkdir(parents=True, exist_ok=True)
    (context / "Containerfile").write_text(containerfile)
    argv = bed.argv("build", "--network", "none", "--force-rm", "-t", tag, "-f", str(context / "Containerfile"))
    env = {**bed.env(), "DOCKER_BUILDKIT": "0"}
    _run([*argv, str(context)], "docker build", context.with_suffix(".log"), env=env, timeout=900)


def _build_trtsweep_layer(bed: Dockerd, image: Image, wheel: Path, work: Path) -> None:
    """The base plus the trtsweep wheel (no dependencies: the base has them)."""
    work.mkdir(parents=True)
    shutil.copy2(wheel, work / wheel.name)
    docker_build(bed, image.name, TRTSWEEP_CONTAINERFILE.format(base=image.base, wheel=wheel.name), work)


def _prune(parent: Path, keep: set[Path]) -> None:
    """Remove every entry of `parent` but `keep` and the lock (older templates and wheels, archives of older
    versions of this module), unmounting first whatever a killed daemon may have left mounted there."""
    for entry in parent.iterdir():
        if entry in keep or entry.name == ".lock" or entry.name.startswith(".wheel-"):
            continue
        if entry.is_dir() and not entry.is_symlink():
            unmount_below(entry)
            shutil.rmtree(entry, ignore_errors=True)
        else:
            entry.unlink(missing_ok=True)


def _run(argv: list[str], what: str, log: Path, env: dict[str, str] | None = None, timeout: float = 600) -> None:
    """Run a build step with its output in `log`; raise with the log's tail when it fails."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "wb") as out:
        proc = subprocess.run(
            argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, env=env, timeout=timeout, check=False
        )
    if proc.returncode != 0:
        tail = "\n".join(_text(log).splitlines()[-25:])
        raise ImageError(f"{what} failed (exit {proc.returncode}):\n{tail}")
