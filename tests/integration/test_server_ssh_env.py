"""A Triton started from an SSH session keeps the virtualenv for its python-backend stubs.

Triton's python backend starts every stub through bash. With SSH_CLIENT set and SHLVL below 2 bash reads
~/.bashrc even when not interactive; there conda or pyenv init (here: a test HOME whose .bashrc puts a bare
system python3 first on PATH) decides which python3 the stub embeds, and the stub loses the venv. The
server's environment therefore goes without the SSH session variables (SSH_SESSION_VARS).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.integration.test_server_lifecycle import model_repo, spec_for
from trtsweep.errors import TrtsweepError
from trtsweep.serve import command, server
from trtsweep.serve.spec import ServerSpec

BARE_PYTHON = Path("/usr/bin/python3")


def _bare_python_lacks_transformers() -> bool:
    if not BARE_PYTHON.exists():
        return False
    probe = subprocess.run([str(BARE_PYTHON), "-c", "import transformers"], capture_output=True, check=False)
    return probe.returncode != 0


pytestmark = pytest.mark.skipif(
    not _bare_python_lacks_transformers(), reason=f"needs {BARE_PYTHON} without transformers (a bare system python)"
)


@pytest.fixture
def ssh_session(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """os.environ as a task started over SSH sees it, with a HOME whose .bashrc hides the venv's python3."""
    shim = tmp_path / "shim"
    shim.mkdir()
    (shim / "python3").symlink_to(BARE_PYTHON)
    home = tmp_path / "home"
    home.mkdir()
    (home / ".bashrc").write_text(f'export PATH="{shim}:$PATH"  # what conda/pyenv init does to a GPU host\n')
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("SSH_CLIENT", "1.2.3.4 1 22")
    monkeypatch.setenv("SSH_CONNECTION", "1.2.3.4 1 5.6.7.8 22")
    monkeypatch.setenv("SHLVL", "0")
    return home


def transformers_model(tmp_path: Path) -> ServerSpec:
    spec = spec_for(model_repo(tmp_path, init="import transformers"), tmp_path)
    spec.cache_dir = tmp_path / "cache"
    return spec


def test_python_model_importing_transformers_loads_in_a_server_started_over_ssh(tmp_path, ssh_session):
    spec = transformers_model(tmp_path)
    state = server.start(spec, tmp_path / "state.json")
    try:
        server.wait_ready(state, 180)
    finally:
        server.stop(state)
    assert "No module named" not in spec.log_file.read_text(errors="replace")


def test_without_dropping_the_ssh_variables_the_stub_loses_the_venv(tmp_path, ssh_session, monkeypatch):
    """The control: the same start with SSH_CLIENT passed on (the code before the fix) fails, so the test above
    shows the fix and not a machine where the problem cannot happen."""
    monkeypatch.setattr(command, "SSH_SESSION_VARS", ())
    spec = transformers_model(tmp_path)
    state = server.start(spec, tmp_path / "state.json")
    try:
        # the stub's python is now the bare one: which import fails first depends on how far its stdlib matches
        # the venv's interpreter ("No module named 'transformers'" on the test bed, "'_struct'" with a pyenv venv)
        with pytest.raises(TrtsweepError, match=r"model 'm' failed to load: .*ModuleNotFoundError: No module named"):
            server.wait_ready(state, 180)
    finally:
        server.stop(state)
