"""What the controller hands a host: its lanes, their points and the settings the stages read (one JSON file).

    {"run_id", "sweep", "journal_dir", "lease_file", "settings": {...}, "inputs": {sweep path: host path},
     "lanes": [{"name", "host", "gpus": [...], "ports": {...}, "points": [placed point, ...]}, ...]}

`settings` are the role variables of the host (hf_download_*, quantize_*, trtllm_build_*, triton_repo_*, triton_serve_*,
llm_perf_*: each role's default unless the inventory sets it) and the trtsweep_* variables the stages read; the
controller resolves them (action plugin trtsweep_lanes), so inventory settings reach a point as they reach a role.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trtsweep.errors import TrtsweepError

# the trtsweep_* variables the stages read (besides the role variables)
TRTSWEEP_SETTINGS = (
    "trtsweep_work_dir", "trtsweep_cache_dir", "trtsweep_hf_cache_dir", "trtsweep_hf_offline",
    "trtsweep_triton_runtime", "trtsweep_triton_bind_address", "trtsweep_triton_container_image",
    "trtsweep_server_lease_ttl", "trtsweep_gpus", "trtsweep_slurm_job", "trtsweep_slurm_cpus",
)  # fmt: skip
ROLES = ("hf_download", "quantize", "trtllm_build", "triton_repo", "triton_serve", "llm_perf")


@dataclass(frozen=True)
class PointPaths:
    """A point's directories on its host: `point_dir` (shared by runs: repository, prompts), `run_dir` (this run's
    server state and archive), `results` (this run's results, packed for the controller)."""

    point_dir: Path
    run_dir: Path
    results: Path


@dataclass(frozen=True)
class HostSpec:
    run_id: str
    sweep: str
    journal_dir: Path
    lease_file: Path
    settings: dict[str, Any]
    inputs: dict[str, str]
    lanes: list[dict[str, Any]]

    @classmethod
    def load(cls, path: Path) -> HostSpec:
        try:
            data = json.loads(path.read_text())
            return cls(run_id=data["run_id"], sweep=data["sweep"], journal_dir=Path(data["journal_dir"]),
                       lease_file=Path(data["lease_file"]), settings=data["settings"], inputs=data["inputs"],
                       lanes=data["lanes"])  # fmt: skip
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise TrtsweepError(f"{path}: not a lane runner's host spec ({exc})") from exc

    def lane(self, name: str) -> dict[str, Any]:
        for lane in self.lanes:
            if lane["name"] == name:
                return lane
        raise TrtsweepError(f"no lane {name!r} in the host spec (lanes: {', '.join(ln['name'] for ln in self.lanes)})")

    def paths(self, point: dict[str, Any]) -> PointPaths:
        point_dir = Path(self.settings["trtsweep_work_dir"]) / point["sweep"] / point["id"]
        run_dir = point_dir / "runs" / self.run_id
        return PointPaths(point_dir, run_dir, run_dir / "results")

    def journal(self, lane: str) -> Path:
        return self.journal_dir / f"{lane}.jsonl"
