# Copyright: trtsweep contributors
# Apache-2.0
"""Action plugin (controller): run this run's lanes on one host and collect their points as they end.

One task per host, over the host's own connection: hand the host its lanes (a host spec with the points, the
role settings of the host and the prompts), start `python -m trtsweep.lane` there once (detached; tied to the
run's lease; its pid recorded in the run folder by the start itself, so that a runner that dies before it registers
is seen), then follow the lanes' journals: each point that starts is recorded running on the controller, each
stage it enters is written into its record, each point that ends has its one archive fetched and its record
completed, and the report is refreshed every `report_refresh_s`. The controller's cost per point is one fetch
and two records, whatever the number of stages; no fork waits on a benchmark of its own (one per host).

Before the start, a point the plan collects from an earlier run (its controller went away before collecting it) is
collected from that run's journal and archive on the host, when that run ended it ok, and left out of the lanes.
A broken journal line is skipped and returned as a warning; an archive that cannot be fetched or unpacked fails its
point, not the host. A host that has not answered for `unreachable_after_s` since its last answer (a poll that hung
until ssh's keep-alives ended it counts) and was asked again at least once is given up; a link that stays down makes
the host unreachable (Ansible's own failure, which the events callback records as the cause of its lost points).
A collection that ends before the host's lanes did (the runner died, the controller could not record what the host
sent, the host stopped answering) stops the host: its heartbeat is ended and its lease removed over the connection
(when the host still answers), so that its servers and lanes stop. Documentation: library/trtsweep_lanes.py.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import tempfile
import time
from pathlib import Path

from ansible.errors import AnsibleConnectionFailure, AnsibleError
from ansible.plugins.action import ActionBase

ROLES_DIR = Path(__file__).resolve().parent.parent / "roles"
# a poll waits this long on the host for a new journal line (at most a third of the lease's TTL: a heartbeat that
# died alone is started again after the next poll, before the lease lapses)
WAIT_S = 15.0


class ActionModule(ActionBase):
    TRANSFERS_FILES = True
    _VALID_ARGS = frozenset(("state", "plan", "results_dir", "lease_file", "input_base", "slo",
                             "report_refresh_s", "unreachable_after_s"))  # fmt: skip

    # -- what the host gets
    def _settings(self, task_vars: dict, templar) -> dict:
        """Every role variable (its default unless the host's variables set it) and the trtsweep_* settings the
        stages read, resolved for this host."""
        import yaml

        from trtsweep.lane.spec import ROLES, TRTSWEEP_SETTINGS

        settings = {}
        for role in ROLES:
            defaults = yaml.safe_load((ROLES_DIR / role / "defaults" / "main.yml").read_text()) or {}
            for name, value in defaults.items():
                settings[name] = templar.template(task_vars[name]) if name in task_vars else value
        for name in TRTSWEEP_SETTINGS:
            settings[name] = templar.template(task_vars[name]) if name in task_vars else None
        return json.loads(json.dumps(settings, default=str))  # plain data (no templating types)

    def _remote(self, argv: list[str], what: str) -> str:
        result = self._low_level_execute_command(" ".join(shlex.quote(a) for a in argv), sudoable=False)
        if result["rc"] != 0:
            err = (result.get("stderr") or result.get("stdout") or "").strip().splitlines()
            raise RuntimeError(f"{what} failed (status {result['rc']}): {err[-1] if err else ''}")
        return result["stdout"]

    def _start(self, spec: dict, inputs: dict[str, str], python: str) -> int:
        """Send the host spec and the inputs, start the runner detached; returns the runner's pid."""
        from trtsweep.lane.journal import RUNNER_LOG, RUNNER_PID, SPEC_FILE

        folder = spec["journal_dir"]
        # the folder is the owner's alone: the host spec holds the host's settings (a hub token among them)
        quoted = shlex.quote(folder)
        self._remote(["sh", "-c", f"mkdir -p {quoted}/inputs && chmod 0700 {quoted}"], "making the run's folder")
        for number, (name, local) in enumerate(sorted(inputs.items())):
            remote = f"{folder}/inputs/{number}-{Path(local).name}"
            self._connection.put_file(local, remote)
            spec["inputs"][name] = remote
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as handle:
            json.dump(spec, handle)
        try:
            self._connection.put_file(handle.name, f"{folder}/{SPEC_FILE}")
        finally:
            os.unlink(handle.name)
        argv = [python, "-m", "trtsweep.lane", f"{folder}/{SPEC_FILE}"]
        out = self._remote(start_command(argv, f"{folder}/{RUNNER_LOG}", f"{folder}/{RUNNER_PID}"),
                           "starting the lane runner")  # fmt: skip
        return int(out.strip().splitlines()[-1])

    def _take_earlier(self, collector, python: str, folder: str) -> list[str]:
        """Collect the host's points the plan collects from an earlier run, from that run's journals and archives
        on the host; returns them. Best effort: a host that cannot say leaves them to run."""
        from trtsweep.fleet.collect import host_file_name

        wanted = collector.earlier()
        if not wanted:
            return []
        argv = [python, "-m", "trtsweep.lane.journal", str(Path(folder).parent), "--host",
                host_file_name(collector.host), "--ended", json.dumps(wanted)]  # fmt: skip
        try:
            ends = json.loads(self._remote(argv, "reading earlier runs' journals").strip().splitlines()[-1])
            return collector.take_earlier(ends, self._fetch)
        except (AnsibleError, RuntimeError, ValueError, IndexError) as exc:
            print(f"trtsweep_lanes: {collector.host}: earlier runs' points not collected, they run: {exc}")
            return sorted(collector.finished)  # those collected before it failed

    # -- what the controller does with the journal
    def _poll(self, python: str, folder: str, offsets: dict, wait_s: float) -> dict:
        out = self._remote([python, "-m", "trtsweep.lane.journal", folder, "--offsets", json.dumps(offsets),
                            "--wait", f"{wait_s:g}"], "reading the lanes' journals")  # fmt: skip
        return json.loads(out.strip().splitlines()[-1])

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        task_vars = task_vars or {}
        try:
            from trtsweep.fleet.collect import Collector, ControllerFailed
        except ImportError as exc:
            return {**result, "failed": True, "msg": f"trtsweep is not importable on the controller: {exc}"}
        args = self._task.args
        plan = args["plan"]
        host = task_vars.get("inventory_hostname", "localhost")
        collector = Collector(Path(args["results_dir"]), plan, host)
        lanes = collector.lanes
        if not lanes:
            return {**result, "changed": False, "msg": "no lane on this host"}
        templar = self._templar.copy_with_new_env(available_variables=task_vars)
        python = str(templar.template(task_vars.get("ansible_python_interpreter", "python3")))
        base = Path(args["input_base"])
        settings = self._settings(task_vars, templar)
        spec = collector.host_spec(settings, str(args["lease_file"]))
        # the files a point reads on its host: its prompts, a trace it replays, conversations it sends and the data
        # set synthetic prompts draw their lengths from
        inputs = {}
        for bench in (p["benchmark"] for p in collector.points.values()):
            talks = (bench.get("conversations") or {}).get("path")
            drawn = (bench.get("synthetic") or {}).get("lengths_from")
            for name in (bench["input_data"], (bench.get("trace") or {}).get("path"), talks, drawn):
                if name:
                    inputs[name] = str(base / name)
        if self._play_context.check_mode:
            return {**result, "changed": True, "lanes": [lane["name"] for lane in lanes]}
        if args.get("state", "started") == "started":
            try:
                collected = self._take_earlier(collector, python, spec["journal_dir"])
            except ControllerFailed as exc:
                return {**result, "failed": True, "msg": f"{host}: {exc}"}
            try:  # the points collected from an earlier run are not run again
                pid = self._start(collector.host_spec(settings, str(args["lease_file"])), inputs, python)
            except (RuntimeError, OSError, ValueError) as exc:
                collector.fail_unstarted(str(exc))
                return {**result, "failed": True, "msg": f"{host}: {exc}"}
            return {**result, "changed": True, "lanes": [lane["name"] for lane in lanes], "runner_pid": pid,
                    "points_collected": collected}  # fmt: skip
        out = self._collect(collector, python, spec, args, task_vars)
        # Ansible shows the result's `warnings` (broken journal lines, say) as warnings
        return {**result, "changed": True, **out, "warnings": [*result.get("warnings", []), *collector.warnings]}

    def _collect(self, collector, python: str, spec: dict, args: dict, task_vars: dict) -> dict:
        """Follow the host's journals until its lanes ended (the collector's summary) or the host is given up
        (failed, with the cause; the host stopped); a host that stayed unreachable raises Ansible's failure. The
        host's heartbeat is looked at after every poll: one that died alone (an exception, a full disk under its
        log, the OOM killer) is started again before the host's lease lapses."""
        from trtsweep.fleet.collect import ControllerFailed

        host, folder = collector.host, spec["journal_dir"]
        collector.take_collected()
        unreachable_after = float(args.get("unreachable_after_s", 30))
        ttl = (spec.get("settings") or {}).get("trtsweep_server_lease_ttl")
        wait_s = min(WAIT_S, float(ttl) / 3) if ttl else WAIT_S
        offsets: dict = {}
        # a host is given up once it has not answered for unreachable_after_s (since its last answer: a poll that
        # hung until ssh's keep-alives ended it counts) and was asked again at least once after a failure
        answered, failures = time.monotonic(), 0
        while not collector.done():
            try:
                polled = self._poll(python, folder, offsets, wait_s)
                collector.take(polled["events"], self._fetch)  # again from the same offsets if a fetch fails
                offsets, answered, failures = polled["offsets"], time.monotonic(), 0
            except ControllerFailed as exc:
                self._stop_host(collector, str(exc), spec)
                return {"failed": True, "msg": f"{host}: {exc}", **collector.summary()}
            except (AnsibleError, RuntimeError, ValueError, OSError) as exc:
                failures += 1
                if failures > 1 and time.monotonic() - answered > unreachable_after:
                    cut = isinstance(exc, AnsibleConnectionFailure)
                    self._stop_host(collector, f"the controller gave up on {host}: {exc}", None if cut else spec)
                    if cut:
                        raise
                    return {"failed": True, "msg": f"{host}: {exc}", **collector.summary()}
                time.sleep(1.0)
                continue
            self._keep_heartbeat(args, task_vars)
            if polled["events"]:
                self._refresh_report(
                    Path(args["results_dir"]), args.get("slo"), float(args.get("report_refresh_s", 30))
                )
            if polled.get("runner_alive") is False and not collector.done():
                collector.take_runner_death(polled.get("runner_log") or [], polled["runner_ended"])
                self._stop_host(collector, None, spec)
                return collector.summary()
        self._clean(folder)
        return collector.summary()

    def _keep_heartbeat(self, args: dict, task_vars: dict) -> None:
        """The host's heartbeat (action plugin trtsweep_heartbeat, with the lanes play's arguments): a no-op while it
        beats, a new one when it died."""
        task = self._task.copy()
        task.args = {"lease_file": args["lease_file"], "state_dir": f"{args['results_dir']}/.run"}
        beat = self._shared_loader_obj.action_loader.get(
            "trtsweep_heartbeat", task=task, connection=self._connection, play_context=self._play_context,
            loader=self._loader, templar=self._templar, shared_loader_obj=self._shared_loader_obj,
        )  # fmt: skip
        result = beat.run(task_vars=task_vars)
        if result.get("changed"):
            print(f"trtsweep_lanes: {task_vars.get('inventory_hostname')}: the run's heartbeat had died; started "
                  f"again (pid {result.get('pid')})")  # fmt: skip

    def _stop_host(self, collector, why: str | None, spec: dict | None) -> None:
        """Nothing more is collected from the host: the collector gives it up (`why`, unless it did already: its
        heartbeat ended), then its lease is removed over the connection (`spec`: the host still answers), so that
        its servers and lanes stop now rather than when the lease lapses."""
        if why is not None:
            collector.give_up(why)
        if spec is not None:
            with contextlib.suppress(AnsibleError, RuntimeError, OSError):
                self._remote(["rm", "-f", "--", spec["lease_file"]], "removing the host's lease")
            self._clean(spec["journal_dir"])

    def _clean(self, folder: str) -> None:
        """Remove the host spec (it may hold a hub token) once its lanes ended; best effort."""
        from trtsweep.lane.journal import SPEC_FILE

        with contextlib.suppress(AnsibleError, RuntimeError, OSError):
            self._remote(["rm", "-f", "--", f"{folder}/{SPEC_FILE}"], "removing the host spec")

    @staticmethod
    def _refresh_report(results_dir: Path, slo: dict | None, every_s: float) -> None:
        """The report as a view of the run so far, rewritten when its page is older than `every_s` (whichever
        host's collector gets there first); never fails the run: the run's end writes it again."""
        from trtsweep.report.writer import HTML_FILE, write

        page = results_dir / HTML_FILE
        if page.exists() and time.time() - page.stat().st_mtime < every_s:
            return
        try:
            write(results_dir, slo)
        except Exception as exc:  # a view: whatever broke it, the run goes on
            print(f"trtsweep_lanes: the report could not be refreshed: {exc}")

    def _fetch(self, remote: str, local: Path) -> None:
        """Fetch a point's archive; a failure that is not the connection's fails the point (FetchFailed)."""
        from trtsweep.fleet.collect import FetchFailed

        local.parent.mkdir(parents=True, exist_ok=True)
        try:
            self._connection.fetch_file(remote, str(local))
        except AnsibleConnectionFailure:
            raise
        except AnsibleError as exc:
            raise FetchFailed(str(exc)) from exc


def start_command(argv: list[str], log: str, pid_file: str) -> list[str]:
    """The host command that starts `argv` detached (its own session, from /, output to `log`), writes its pid to
    `pid_file` and prints it. The pid is the runner's own: without job control (`set +m`) a background command is
    not a process group leader, so `setsid` makes its session in place rather than forking a child."""
    runner = " ".join(shlex.quote(a) for a in argv)
    pid = shlex.quote(pid_file)
    script = (f"set +m; chmod 0600 {shlex.quote(argv[-1])} && cd / || exit 1; "
              f"setsid {runner} >{shlex.quote(log)} 2>&1 </dev/null & echo $! >{pid} && echo $!")  # fmt: skip
    return ["sh", "-c", script]
