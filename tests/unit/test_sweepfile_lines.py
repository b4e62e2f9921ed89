"""`trtsweep plan` names the sweep file and the line of the field a one-line error is about."""

from __future__ import annotations

from pathlib import Path

from trtsweep.cli import main
from trtsweep.sweep.sweepfile import line_of

SWEEP = """\
# yaml-language-server: $schema=../sweep.schema.json
trtsweep_sweep:
  name: t
  backend: hf
  models: [{{repo_id: HuggingFaceTB/SmolLM2-135M-Instruct}}]
  precisions: [float32]
  max_batch_sizes:
    - 4
    - {bad}
  lengths: [{{input: 1024, {output}: 128}}]
  streaming: [true]
"""


def write(tmp_path: Path, bad: str = "8", output: str = "output") -> Path:
    path = tmp_path / "sweep.yml"
    path.write_text(SWEEP.format(bad=bad, output=output))
    return path


def test_a_field_is_found_at_its_line_and_a_missing_key_at_its_mapping(tmp_path):
    path = write(tmp_path)
    assert line_of(path, "max_batch_sizes[1]") == 9
    assert line_of(path, "max_batch_sizes") == 7
    assert line_of(path, "lengths[0].outptu") == 10  # the mapping that lacks it
    assert line_of(path, "nowhere.at.all") == 3  # the sweep itself (its first key)
    (tmp_path / "broken.yml").write_text("trtsweep_sweep: [")
    assert line_of(tmp_path / "broken.yml", "name") is None


def test_plan_errors_name_the_file_and_line(tmp_path, capsys):
    path = write(tmp_path, bad="-2")
    assert main(["plan", str(path)]) == 2
    assert capsys.readouterr().err.strip() == (
        f"trtsweep: error: {path}:9: sweep field 'max_batch_sizes[1]': expected a positive integer, got -2"
    )
    path = write(tmp_path, output="outptu")
    assert main(["plan", str(path)]) == 2
    assert capsys.readouterr().err.startswith(f"trtsweep: error: {path}:10: sweep field 'lengths[0]': unknown key")
