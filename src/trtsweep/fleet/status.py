"""Point status records on the controller, and what a rerun has to do (resume).

Every point ends with `results/<sweep>/<point>/status.json`:

    {"point": id, "status": "ok" | "failed" | "lost" | "running", "stage": the stage reached or failed,
     "cause": one line, "log_tail": [...], "stages": {stage: seconds}, "host", "lane", "gpus", "ports",
     "colocated", "run_id", "settings_hash", "trtsweep": {version, build}, "started_at", "finished_at"}

"running" is written on the controller when a point starts; a point still "running" after the run play is
*lost* (its host went away). A rerun skips points whose record is "ok" with the same settings hash (the
resolved point, its model revision, its prompts file's content hash and the trtsweep version) and reruns failed,
lost, missing or changed ones.

A record may hold `warnings`: what went wrong around the point without failing it (a broken line of its lane's
journal, skipped by the collector; a failed point's results archive that could not be unpacked). An ok point whose
results archive cannot be fetched or unpacked fails with that cause (stage: the one it ended in).

An ok record also holds `model_commit`: the commit its model revision resolved to on its host (repository.json's
`model_revision`). A revision that is not a commit (a branch or tag; none means `main`) can move: the prepare play
asks every host which commit it names now (`fleet_prepare`, one hub call per model, the cache's ref offline), and a
record whose commit is not the one a host names now is rerun. When no host could tell (hub unreachable, no cached
ref), the record is kept: nothing shows that it changed.
"""

from __future__ import annotations

import datetime as dt
import fnmatch
import hashlib
import itertools
import json
import shutil
import tarfile
import zlib
from pathlib import Path
from typing import Any

from trtsweep import __version__
from trtsweep.common.fileio import atomic_write_text
from trtsweep.errors import TrtsweepError
from trtsweep.fleet.release import describe
from trtsweep.hub.download import is_commit, ref_key
from trtsweep.toolchain.versions import canonical

STATUS_FILE = "status.json"
EVENTS_FILE = "events.json"  # the run's progress and unreachable hosts (callback trtsweep_events)
STAGES = ("preflight", "download", "quantize", "build", "repository", "serve", "benchmark")
FINAL = ("ok", "failed", "lost")
# set by placement, not part of what the point measures
# where and how the point is run and checked, not what it measures
PLACEMENT_KEYS = frozenset(
    {"host", "lane", "gpus", "visible_devices", "ports", "order", "colocated", "weight", "prompt_check"}
)
# the files an "ok" point must have on the controller to be skipped on a rerun
RESULT_FILES = ("llm_perf.summary.json",)
TAIL_LINES = 30  # of a failure's log, in the record
# what unpacking a broken archive raises: not a tar or gzip (tarfile.ReadError, gzip.BadGzipFile), cut short
# (EOFError, zlib.error), a member that would land elsewhere (TrtsweepError), a full disk (OSError)
ARCHIVE_ERRORS = (tarfile.TarError, EOFError, zlib.error, OSError, TrtsweepError)
ARCHIVE_TASK = "results archive"  # the failed step of a point whose archive could not be fetched or unpacked


def now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


def settings_hash(point: dict[str, Any]) -> str:
    """What the point measures: its resolved settings (not where it ran; with the model revision it names and its
    prompts file's content hash, `input_data_sha256`) and the trtsweep version. TensorRT-LLM versions are hashed as
    releases (`1.2`, `1.2.0` and `v1.2.0` hash alike). The exact build (a hash of trtsweep's files) is recorded
    beside it, not hashed: a rerun after an edit that leaves the version alone keeps complete points
    (-e trtsweep_force=true redoes them). The chat template is the `benchmark.chat_template` setting plus the
    tokenizer's own template, which is part of the model's files: a pinned commit never changes it, and a moving
    revision is rerun when its commit moves (`model_moved`)."""
    settings = {k: v for k, v in point.items() if k not in PLACEMENT_KEYS}
    for section in ("trtllm", "triton"):
        versioned = settings.get(section) or {}
        key = "version" if section == "trtllm" else "trtllm_version"
        if isinstance(versioned.get(key), str):
            settings[section] = {**versioned, key: canonical(versioned[key])}
    blob = json.dumps({"point": settings, "trtsweep": __version__}, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def commits_now(hosts: dict[str, dict[str, Any]]) -> dict[str, set[str]]:
    """`repo_id@revision` -> the commits the hosts' prepare step resolved it to now (fleet_prepare's
    `model_commits`); a ref no host could resolve is absent."""
    found: dict[str, set[str]] = {}
    for facts in hosts.values():
        for ref, commit in (facts.get("model_commits") or {}).items():
            if commit:
                found.setdefault(ref, set()).add(commit)
    return found


def model_moved(record: dict[str, Any], point: dict[str, Any], commits: dict[str, set[str]]) -> bool:
    """Whether the point's moving model revision names another commit now than the one its record measured. A commit
    revision never moves; a ref no host resolved now is taken as unmoved (nothing shows it changed)."""
    revision = point["model"].get("revision")
    if is_commit(revision):
        return False
    now = commits.get(ref_key(point["model"]["repo_id"], revision), set())
    return bool(now - {record.get("model_commit")})


def read(results_dir: Path, point_id: str) -> dict[str, Any] | None:
    path = results_dir / point_id / STATUS_FILE
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except (OSError, json.JSONDecodeError) as exc:
        raise TrtsweepError(f"{path}: unreadable status record ({exc}); remove it to rerun the point") from exc
    return data if isinstance(data, dict) else None


def is_complete(results_dir: Path, point: dict[str, Any], commits: dict[str, set[str]] | None = None) -> bool:
    """An ok record of the same settings, with its results, whose model revision names the same commit now
    (`commits`: see `commits_now`)."""
    record = read(results_dir, point["id"])
    return (
        record is not None
        and record.get("status") == "ok"
        and record.get("settings_hash") == settings_hash(point)
        and not model_moved(record, point, commits or {})
        and all((results_dir / point["id"] / name).is_file() for name in RESULT_FILES)
    )


def select(
    points: list[dict[str, Any]],
    results_dir: Path,
    force: bool = False,
    only: str | None = None,
    commits: dict[str, set[str]] | None = None,
) -> tuple[list[dict[str, Any]], list[str], list[str]]:
    """(points to run, ids kept from an earlier run, ids left out by `only`)."""
    run, kept, left_out = [], [], []
    for point in points:
        if only and not any(fnmatch.fnmatchcase(point["id"], g.strip()) for g in only.split(",") if g.strip()):
            left_out.append(point["id"])
        elif not force and is_complete(results_dir, point, commits):
            kept.append(point["id"])
        else:
            run.append(point)
    return run, kept, left_out


def model_commit(results_dir: Path, point_id: str) -> str | None:
    """The commit the point's model resolved to on its host, as its fetched repository.json records it."""
    try:
        recorded = json.loads((results_dir / point_id / "repository.json").read_text())
    except (OSError, json.JSONDecodeError):
        return None
    commit = recorded.get("model_revision") if isinstance(recorded, dict) else None
    return commit if isinstance(commit, str) else None


def unpack(results_dir: Path, point_id: str, archive: Path) -> int:
    """Extract a point's fetched results archive (a tar of its host results directory) into
    `results_dir/<point>/` and remove the archive; return the number of files. Only plain files and directories
    below the point's directory are taken (a member that would land elsewhere fails in one line)."""
    dest = (results_dir / point_id).resolve()
    count = 0
    with tarfile.open(archive) as tar:
        for member in tar.getmembers():
            target = (dest / member.name).resolve()
            if not (member.isfile() or member.isdir()) or not target.is_relative_to(dest):
                raise TrtsweepError(f"{archive}: member {member.name!r} is not a file below the point's results")
            if member.isdir():
                target.mkdir(parents=True, exist_ok=True)
                continue
            source = tar.extractfile(member)
            assert source is not None  # a regular file
            target.parent.mkdir(parents=True, exist_ok=True)
            with source, open(target, "wb") as out:
                shutil.copyfileobj(source, out)
            count += 1
    archive.unlink()
    return count


def write(results_dir: Path, record: dict[str, Any]) -> Path:
    path = results_dir / record["point"] / STATUS_FILE
    atomic_write_text(path, json.dumps(record, indent=2, sort_keys=True) + "\n")
    return path


def begin(results_dir: Path, point: dict[str, Any], run_id: str, started_at: str,
          where: dict[str, Any] | None = None) -> dict[str, Any]:  # fmt: skip
    """Clear the point's controller directory (nothing of an earlier run may pass as this one's) and
    record it as running; `where`: what its host said on starting it (the GPUs its Slurm step was bound, the job,
    step and node), over the plan's."""
    point_dir = results_dir / point["id"]
    if point_dir.exists():
        shutil.rmtree(point_dir)
    record = {
        "point": point["id"],
        "status": "running",
        "stage": STAGES[0],
        "cause": None,
        "log_tail": [],
        "stages": {},
        "host": point.get("host"),
        "lane": point.get("lane"),
        "gpus": point.get("gpus", []),
        "ports": point.get("ports", {}),
        "colocated": point.get("colocated", False),
        "run_id": run_id,
        "settings_hash": settings_hash(point),
        "trtsweep": describe(),
        "started_at": started_at,
        "finished_at": None,
        **(where or {}),
    }
    write(results_dir, record)
    return record


def finish(results_dir: Path, point_id: str, run_id: str, **fields: Any) -> dict[str, Any]:
    """Complete the running record of this run (status ok or failed, stage, cause, log tail, stage seconds)."""
    record = read(results_dir, point_id)
    if record is None or record.get("run_id") != run_id:
        raise TrtsweepError(
            f"{results_dir / point_id / STATUS_FILE}: not started by run {run_id} "
            f"(found run {record.get('run_id') if record else None}); refusing to mix runs"
        )
    if fields.get("status") not in ("ok", "failed"):
        raise TrtsweepError(f"point status must be ok or failed, got {fields.get('status')!r}")
    record.update(fields)
    write(results_dir, record)
    return record


def failure_cause(result: Any, task: str | None) -> tuple[str, list[str]]:
    """(one-line cause, log tail) from a failure: a failed step's result (`msg`, and `details`, `stderr_tail`,
    `stderr_lines` or `stdout_lines` for the tail) and the name of the step."""
    if not isinstance(result, dict):
        return (f"{task}: {result}" if result else task or "failed"), []
    msg = str(result.get("msg") or result.get("stderr") or "failed").strip()
    first, _, rest = msg.partition("\n")
    tail: list[str] = []
    for key in ("details", "stderr_tail", "stderr_lines", "stdout_lines"):
        value = result.get(key)
        if value:
            tail = value.splitlines() if isinstance(value, str) else [str(v) for v in value]
            break
    tail = tail or rest.splitlines()
    cause = f"{task}: {first}" if task else first
    return cause, tail[-TAIL_LINES:]


def durations(times: dict[str, float]) -> dict[str, float]:
    """{stage: seconds} from {stage: start epoch, ..., end: epoch} in the order the stages began."""
    marks = sorted(((float(t), name) for name, t in times.items()), key=lambda m: m[0])
    return {name: round(nxt[0] - t, 3) for (t, name), nxt in itertools.pairwise(marks) if name != "end"}


def add_warning(results_dir: Path, point_id: str, run_id: str, message: str) -> None:
    """Add `message` to the `warnings` of the point's record of this run (another run's record is left alone)."""
    record = read(results_dir, point_id)
    if record is not None and record.get("run_id") == run_id:
        write(results_dir, {**record, "warnings": [*record.get("warnings", []), message]})


def one_line(exc: BaseException) -> str:
    """An error's first line (its type's name when it says nothing)."""
    lines = str(exc).strip().splitlines()
    return lines[0] if lines else type(exc).__name__


def record_finished(
    results_dir: Path,
    point_id: str,
    run_id: str,
    status: str,
    stage: str,
    failure: Any = None,
    failed_task: str | None = None,
    stage_times: dict[str, float] | None = None,
    archive: Path | None = None,
    archive_problem: str | None = None,
) -> dict[str, Any]:
    """A point's end on the controller: its fetched archive unpacked into `results_dir/<point>/`, then its
    record completed (`finish`) with the cause and log tail of a failure and the seconds per stage.

    An archive that cannot be unpacked, or one that could not be fetched (`archive_problem`, one line), fails an ok
    point with that cause, and is a warning of a failed one."""
    if archive is not None:
        try:
            unpack(results_dir, point_id, archive)
        except ARCHIVE_ERRORS as exc:
            archive.unlink(missing_ok=True)
            archive_problem = f"could not be unpacked ({one_line(exc)})"
    if archive_problem and status == "ok":
        status, failure, failed_task = "failed", {"msg": archive_problem}, ARCHIVE_TASK
    elif archive_problem:
        add_warning(results_dir, point_id, run_id, f"{ARCHIVE_TASK}: {archive_problem}")
    cause, tail = failure_cause(failure, failed_task) if status == "failed" else (None, [])
    return finish(
        results_dir, point_id, run_id, status=status, stage=stage, cause=cause, log_tail=tail,
        stages=durations(stage_times or {}), finished_at=now(), model_commit=model_commit(results_dir, point_id),
    )  # fmt: skip


def outcome(
    results_dir: Path,
    planned: list[dict[str, Any]],
    run_id: str,
    lost_reasons: dict[str, str],
) -> list[dict]:
    """Final status of every point planned in this run; a point this run started but never finished is lost, at
    the stage its record names (the host's collector writes each stage a point enters into its record).

    `lost_reasons`: host -> why it went away (`lost_reasons()`), used for the lost points' cause.
    """
    records = []
    for point in planned:
        record = read(results_dir, point["id"])
        if record is not None and record.get("run_id") == run_id and record.get("status") in ("ok", "failed"):
            records.append(record)
            continue
        started = record is not None and record.get("run_id") == run_id
        reason = (lost_reasons.get(f"{point['host']}/{point.get('lane')}") or lost_reasons.get(point["host"])
                  or f"host {point['host']} stopped running the sweep")  # fmt: skip
        stage = record.get("stage") if started and record else None
        cause = f"{reason} (during stage {stage})" if stage else f"{reason} (before the point started)"
        lost = {
            **(record if started and record else {}),
            "point": point["id"],
            "status": "lost",
            "stage": stage,
            "cause": cause,
            "host": point["host"],
            "lane": point.get("lane"),
            "gpus": point.get("gpus", []),
            "run_id": run_id,
            "settings_hash": settings_hash(point),
        }
        write(results_dir, lost)
        records.append(lost)
    return records


def run_events(results_dir: Path, run_id: str) -> dict[str, Any]:
    """The events of run `run_id` (empty when the file is missing, unreadable or another run's)."""
    try:
        events = json.loads((results_dir / EVENTS_FILE).read_text())
    except (OSError, json.JSONDecodeError):
        return {}
    return events if isinstance(events, dict) and events.get("run_id") == run_id else {}


def lost_reasons(results_dir: Path, run_id: str) -> dict[str, str]:
    """Host (or "host/lane") -> why it went away: unreachable, from the run's events file, or its lane runner ended
    early (a lane: its Slurm step ended first), from the collector's records in the run folder (empty when there is
    none)."""
    reasons = {}
    for path in sorted([*(results_dir / ".run").glob("runner-*.json"), *(results_dir / ".run").glob("lane-*.json")]):
        try:
            record = json.loads(path.read_text())
            if record["run_id"] == run_id:
                where = f"{record['host']}/{record['lane']}" if "lane" in record else record["host"]
                reasons[where] = record["cause"]
        except (OSError, ValueError, KeyError, TypeError):
            continue
    unreachable = run_events(results_dir, run_id).get("unreachable", {})
    reasons.update({host: f"host {host} unreachable: {msg}" for host, msg in unreachable.items()})
    return reasons


def close_run(results_dir: Path, plan: dict[str, Any]) -> list[dict]:
    """The run's end on the controller: every point it planned gets its final record (`outcome`), the lost ones
    with the reason the run recorded. Called before the report, which only reads records."""
    run_id = plan["run_id"]
    return outcome(results_dir, plan["points"], run_id, lost_reasons(results_dir, run_id))
