"""What a run leaves on its host: the host spec (which can hold the Hub token) is deleted by the host's runner when it
ends, after its lanes have read it; the files a lane writes (the host's copy of the prompts) are as private as the
user's umask keeps new files, never widened to 0644."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from types import SimpleNamespace

import pytest

from tests.conftest import PROMPTS
from tests.integration.test_lane_faults_ports import LANE, heartbeat, journal, point, write_spec
from trtsweep.hub import download
from trtsweep.lane.point import PointRun
from trtsweep.lane.spec import HostSpec


@pytest.mark.timeout(120)
def test_the_host_spec_is_deleted_by_the_runner_once_its_lanes_have_ended(tmp_path):
    other = "h--lane1"
    spec = write_spec(tmp_path, [{"name": LANE, "host": "h", "ports": {}, "points": []},
                                 {"name": other, "host": "h", "ports": {}, "points": []}], ttl_s=30)  # fmt: skip
    with heartbeat(tmp_path):
        runner = subprocess.run([sys.executable, "-m", "trtsweep.lane", str(spec)], timeout=60, check=False)
    assert runner.returncode == 0
    for lane in (LANE, other):  # each lane read the spec: it ran to its end
        assert [e["event"] for e in journal(tmp_path, lane)] == ["lane_end"]
    assert not spec.exists()


def test_the_hosts_copy_of_the_prompts_takes_the_users_umask(tmp_path, monkeypatch):
    model = tmp_path / "model"
    model.mkdir()
    monkeypatch.setattr(download, "resolve", lambda **_: SimpleNamespace(path=model, revision="0123abc"))
    placed = {**point("a", {}), "model": {"repo_id": "org/tiny"}, "prompt_check": "planned",
              "benchmark": {"input_data": "prompts.jsonl"}}  # fmt: skip
    settings = {"trtsweep_work_dir": str(tmp_path / "work"), "trtsweep_cache_dir": str(tmp_path / "cache"),
                "trtsweep_hf_cache_dir": str(tmp_path / "hf"), "trtsweep_hf_offline": True}  # fmt: skip
    spec = HostSpec("run-1", "s", tmp_path, tmp_path / "run.lease", settings, {"prompts.jsonl": str(PROMPTS)},
                    [{"name": LANE, "ports": {}, "points": [placed]}])  # fmt: skip
    run = PointRun(spec, placed, tmp_path / "lane.jsonl", "h")
    old = os.umask(0o077)
    try:
        run._preflight()
        run._download()
    finally:
        os.umask(old)
    assert run.prompts.read_bytes() == PROMPTS.read_bytes()
    assert stat.S_IMODE(run.prompts.stat().st_mode) == 0o600
