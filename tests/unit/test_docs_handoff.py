"""docs/handoff.md's first look at a bundle, run as written: `trtsweep handoff` of the checkout's sample results
(tests/data/report_results, a real run of the embedded sweep) makes a bundle whose README says how to deploy it, its
model repository the one the sample served, its smoke prompts the sweep's."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

from tests.conftest import ROOT
from trtsweep.handoff.smoke import SMOKE_REQUESTS

BIN = Path(sys.executable).parent


def test_the_handoff_of_the_sample_results_makes_a_bundle(tmp_path):
    text = (ROOT / "docs" / "handoff.md").read_text()
    line = next(m for m in re.findall(r"^trtsweep handoff tests/data/.*$", text, flags=re.M))
    argv = [a.replace("/tmp/handoff-try", str(tmp_path / "handoff-try")) for a in shlex.split(line)]
    done = subprocess.run([str(BIN / argv[0]), *argv[1:]], cwd=ROOT, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    bundle = tmp_path / "handoff-try"
    manifest = json.loads((bundle / "bundle.json").read_text())
    assert manifest["point"]["id"] in done.stdout and (bundle / "README.md").is_file()
    served = ROOT / "tests/data/report_results/smollm2-cpu-demo" / manifest["point"]["id"] / "triton_repo"
    assert sorted(p.name for p in (bundle / "model_repository").iterdir()) == sorted(p.name for p in served.iterdir())
    prompts = (ROOT / "data" / "prompts.jsonl").read_text().splitlines()
    assert (bundle / "smoke" / "prompts.jsonl").read_text().splitlines() == prompts[:SMOKE_REQUESTS]
    assert manifest["input_data"] == str(ROOT / "data" / "prompts.jsonl")
