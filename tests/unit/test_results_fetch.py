"""A point's results reach the controller as one archive (run_point.yml packs them with tar, fetches one file):
status.unpack puts them into results/<sweep>/<point>/ and takes nothing that would land elsewhere."""

from __future__ import annotations

import io
import subprocess
import tarfile

import pytest

from trtsweep.errors import TrtsweepError
from trtsweep.fleet import status


def test_the_hosts_tar_of_a_results_directory_is_unpacked_into_the_points_folder(tmp_path):
    host = tmp_path / "host" / "results"
    (host / "triton_repo" / "ensemble").mkdir(parents=True)
    (host / "llm_perf.json").write_text('{"levels": []}')
    (host / "triton_repo" / "ensemble" / "config.pbtxt").write_text('name: "ensemble"')
    archive = tmp_path / "p1.tar.gz"
    # the very command line of run_point.yml's "pack the results" task
    subprocess.run(["tar", "-czf", str(archive), "-C", str(host), "."], check=True)
    results = tmp_path / "results" / "sweep"
    assert status.unpack(results, "p1", archive) == 2
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
