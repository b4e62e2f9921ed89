"""Fixtures of the container tests: a dockerd of the session's own and the test image in it.

- ``base_template`` (session): the base image as a stopped daemon's data root in ~/.cache/trtsweep-tests (a
  ``tests.container.image.Template``), built once per set of inputs on this machine.
- ``dockerd`` (session): a started ``tests.container.dockerd.Dockerd``. ``dockerd.argv("run", ...)`` is the Debian
  client's command line and ``dockerd.env()`` its environment (DOCKER_HOST set), for tests that start the client
  themselves; ``dockerd.docker("ps", ...)`` runs it and returns the completed process; ``dockerd.containers()`` /
  ``dockerd.container_names()`` list the daemon's containers; ``dockerd.hook_log`` is where the stand-in NVIDIA hook
  logs each call. Its data root starts as a copy of ``base_template``. Stopped, and its directory removed, at the end
  of the session (also on SIGTERM / SIGHUP).
- ``container_image`` (session): a ``tests.container.image.Image``; ``.name`` is the image to run (tritonserver on
  PATH, the python backend in /opt/tritonserver/backends, the venv /opt/trtsweep-venv first on PATH, trtsweep
  installed), ``.pins`` the Python versions in it, ``.trtsweep_build`` the build id of its trtsweep.
- ``container_name`` (function): a fresh container name; a container of that name left at the end is removed.

Without docker.io or mmdebstrap the tests skip, saying why; under CI (CI=true) they fail instead.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator

import pytest

from tests.beds import require, stopped_on_exit
from tests.container import dockerd as dockerd_mod
from tests.container import image as image_mod

SUMMARY: dict[str, str] = {}  # what the run measured, printed at its end


@pytest.fixture(scope="session")
def base_template() -> image_mod.Template:
    """The base image as a stopped daemon's data root in the cache (built now if no session made it before)."""
    require(dockerd_mod.unavailable_reason(), "container")
    require(image_mod.unavailable_reason(), "container")
    return image_mod.ensure_base()


@pytest.fixture(scope="session")
def dockerd(base_template: image_mod.Template) -> Iterator[dockerd_mod.Dockerd]:
    """A dockerd of the session's own, seeded with the base image (see the module docstring)."""
    bed = dockerd_mod.start(seed=base_template.data)
    info = bed.info
    SUMMARY["dockerd"] = (
        f"{info.get('ServerVersion')}, storage {info.get('Driver')}, cgroup {info.get('CgroupDriver')} "
        f"v{info.get('CgroupVersion')}, init {info.get('InitBinary')} ({_commit(info.get('InitCommit'))})"
    )
    SUMMARY["dockerd start"] = f"{bed.start_s:.2f} s (of which seeding its data root with the base: {bed.seed_s:.2f} s)"
    with stopped_on_exit(bed.stop):
        try:
            yield bed
        finally:
            bed.stop()
            SUMMARY["dockerd stop"] = f"{bed.stop_s:.2f} s"


def _commit(commit: object) -> str:
    return str(commit.get("ID", "")) if isinstance(commit, dict) else str(commit)


@pytest.fixture(scope="session")
def container_image(dockerd: dockerd_mod.Dockerd, base_template: image_mod.Template) -> image_mod.Image:
    """The test image, in the session's dockerd (see the module docstring)."""
    image = image_mod.ensure(dockerd, base_template)
    SUMMARY["image"] = f"{image.name}, {image.size_bytes / 1e6:.0f} MB, base {image.base_source}"
    SUMMARY["image steps"] = ", ".join(f"{step} {s:.1f} s" for step, s in image.seconds.items())
    return image


@pytest.fixture
def container_name(dockerd: dockerd_mod.Dockerd) -> Iterator[str]:
    """A fresh container name; a container still there under that name at the end is removed."""
    name = f"trtsweep-test-{secrets.token_hex(4)}"
    yield name
    if name in dockerd.container_names():
        dockerd.docker("rm", "-f", name)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if not SUMMARY:
        return
    terminalreporter.section("container test bed")
    for key, value in SUMMARY.items():
        terminalreporter.write_line(f"{key}: {value}")
