"""A point's results reach the controller as one archive (the lane packs its results directory with
PointRun._pack, the controller fetches that one file): status.unpack puts them into results/<sweep>/<point>/ and
takes nothing that would land elsewhere; status.record_finished unpacks it and completes the point's record."""

from __future__ import annotations

import io
import json
import shutil
import tarfile
from pathlib import Path

import pytest

from trtsweep.errors import TrtsweepError
from trtsweep.fleet import status
from trtsweep.lane.point import PointRun
from trtsweep.lane.spec import HostSpec

POINT = {"id": "p1", "sweep": "sweep", "host": "h", "lane": "h--lane0", "benchmark": {"input_data": "prompts.jsonl"}}


def packed(tmp_path: Path) -> Path:
    """The lane's archive of a point's results directory (a results file and a repository below it)."""
    host = tmp_path / "host"
    spec = HostSpec(run_id="run-1", sweep="sweep", journal_dir=host / "journal", lease_file=host / "lease",
                    settings={"trtsweep_work_dir": str(host / "work")}, inputs={}, lanes=[])  # fmt: skip
    run = PointRun(spec, POINT, host / "journal" / "h--lane0.jsonl", "h")
    assert run._pack() is None  # a point that failed before its results directory existed has nothing to fetch
    results = run.paths.results
    (results / "triton_repo" / "ensemble").mkdir(parents=True)
    (results / "llm_perf.json").write_text('{"levels": []}')
    (results / "triton_repo" / "ensemble" / "config.pbtxt").write_text('name: "ensemble"')
    archive = run._pack()
    assert archive == str(run.paths.run_dir / "results.tar.gz")
    return Path(archive)


def test_the_lanes_archive_of_a_results_directory_is_unpacked_into_the_points_folder(tmp_path):
    archive = tmp_path / "p1.tar.gz"
    shutil.copyfile(packed(tmp_path), archive)  # the controller's fetch
    results = tmp_path / "results" / "sweep"
    assert status.unpack(results, "p1", archive) == 2
    assert (results / "p1" / "llm_perf.json").read_text() == '{"levels": []}'
    assert (results / "p1" / "triton_repo" / "ensemble" / "config.pbtxt").read_text() == 'name: "ensemble"'
    assert not archive.exists()


def test_the_controller_records_the_point_finished_with_its_archive_unpacked(tmp_path):
    results = tmp_path / "results" / "sweep"
    status.begin(results, POINT, "run-1", status.now())
    archive = results / ".fetched" / "p1.tar.gz"
    archive.parent.mkdir()
    shutil.copyfile(packed(tmp_path), archive)
    record = status.record_finished(results, "p1", "run-1", "ok", "benchmark", archive=archive,
                                    stage_times={"preflight": 1.0, "benchmark": 3.0, "end": 4.5})  # fmt: skip
    assert (record["status"], record["stage"], record["stages"]) == ("ok", "benchmark", {"preflight": 2.0,
                                                                                       "benchmark": 1.5})  # fmt: skip
    assert json.loads((results / "p1" / status.STATUS_FILE).read_text()) == record
    assert (results / "p1" / "llm_perf.json").read_text() == '{"levels": []}'
    assert (results / "p1" / "triton_repo" / "ensemble" / "config.pbtxt").read_text() == 'name: "ensemble"'
    assert not archive.exists()


@pytest.mark.parametrize("name", ["../outside.json", "/etc/evil", "./a/../../outside.json"])
def test_a_member_that_would_land_outside_the_point_is_refused(tmp_path, name):
    archive = tmp_path / "bad.tar"
    with tarfile.open(archive, "w") as tar:
        info = tarfile.TarInfo(name)
        info.size = 2
        tar.addfile(info, io.BytesIO(b"{}"))
    with pytest.raises(TrtsweepError, match="is not a file below the point's results"):
        status.unpack(tmp_path / "results", "p1", archive)
    assert not (tmp_path / "outside.json").exists()


def test_a_link_in_the_archive_is_refused(tmp_path):
    archive = tmp_path / "link.tar"
    with tarfile.open(archive, "w") as tar:
        info = tarfile.TarInfo("passwd")
        info.type = tarfile.SYMTYPE
        info.linkname = "/etc/passwd"
        tar.addfile(info)
    with pytest.raises(TrtsweepError, match="'passwd'"):
        status.unpack(tmp_path / "results", "p1", archive)
