"""A lane's journal gets a line cut short while its first point runs (a writer killed mid-line, or a disk that filled
mid-write and then had space again): the lane's next line runs into it. On this machine with the stand-in server,
two points on one host, the real `ansible-playbook sweep.yml`: both points must end ok, and the run must say the
broken line (a warning).

Fails on a reader that parsed every line as JSON: every poll of the host raised JSONDecodeError, the collector gave
the host up after its retries, and its points were lost while the host went on measuring them.
"""

from __future__ import annotations

import subprocess

import pytest

from tests.conftest import ROOT, wait_for
from tests.integration.standin_run import (
    all_gone,
    journal_stages,
    kill_all,
    playbook_argv,
    playbook_env,
    procs,
    records,
    write_run,
)

CUT = '{"event": "sta'


@pytest.mark.e2e
@pytest.mark.timeout(600)
@pytest.mark.fault("a journal line cut short while the first of two points runs",
                   "both points end ok; the run warns of the broken line")  # fmt: skip
def test_a_journal_line_cut_short_is_skipped_and_both_points_end_ok(tmp_path):
    marker = str(tmp_path)
    extravars = write_run(tmp_path, "cut", 3, 10, points=2)  # a model load of 3 s: the cut is made while it loads
    run = subprocess.Popen(playbook_argv(extravars), cwd=ROOT, env=playbook_env(), stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True, start_new_session=True)  # fmt: skip
    try:
        wait_for(lambda: "serve" in journal_stages(tmp_path / "work"), 300)
        journal = next((tmp_path / "work").glob("*/.runs/*/*.jsonl"))
        with journal.open("a", encoding="utf-8") as handle:  # as a writer killed mid-line leaves it
            handle.write(CUT)
        out, _ = run.communicate(timeout=300)
        all_gone(marker, 30)
    finally:
        if run.poll() is None:
            run.kill()
        kill_all(list(procs(marker)))
    found = records(tmp_path, "cut")
    assert [(r["status"], r["cause"]) for r in found.values()] == [("ok", None), ("ok", None)], out[-4000:]
    assert run.returncode == 0, out[-4000:]
    assert CUT in journal.read_text()  # the cut was made before the point's next line
    warned = [w for r in found.values() for w in r.get("warnings", [])]
    assert len(warned) == 1 and "a broken line of journal" in warned[0] and repr(CUT) in warned[0], found
    assert "a broken line of journal" in out  # and the run said it
