# Copyright: trtsweep contributors
# Apache-2.0
"""Action plugin (controller): run this run's lanes on one host and collect their points as they end.

One task per host, over the host's own connection: hand the host its lanes (a host spec with the points, the
role settings of the host and the prompts), start `python -m trtsweep.lane` there once (detached; tied to the
run's lease), then follow the lanes' journals: each point that starts is recorded running on the controller, each
stage it enters is written into its record, each point that ends has its one archive fetched and its record
completed, and the report is refreshed every `report_refresh_s`. The controller's cost per point is one fetch
and two records, whatever the number of stages; no fork waits on a benchmark of its own (one per host).

A host that stops answering is retried for `unreachable_after_s`; a link that stays down makes the host
unreachable (Ansible's own failure, which the events callback records as the cause of its lost points).
Documentation: library/trtsweep_lanes.py.
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
WAIT_S = 15.0  # a poll waits this long on the host for a new journal line


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

    def _start(self, spec: dict, inputs: dict[str, str], python: str) -> None:
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
            self._connection.put_file(handle.name, f"{folder}/host.json")
        finally:
            os.unlink(handle.name)
        runner = " ".join(shlex.quote(a) for a in [python, "-m", "trtsweep.lane", f"{folder}/host.json"])
        log = shlex.quote(f"{folder}/runner.log")
        start = f"chmod 0600 {shlex.quote(folder)}/host.json && cd / && (setsid {runner} >{log} 2>&1 </dev/null &)"
        self._remote(["sh", "-c", start], "starting the lane runner")

    # -- what the controller does with the journal
    def _poll(self, python: str, folder: str, offsets: dict) -> dict:
        out = self._remote([python, "-m", "trtsweep.lane.journal", folder, "--offsets", json.dumps(offsets),
                            "--wait", str(WAIT_S)], "reading the lanes' journals")  # fmt: skip
        return json.loads(out.strip().splitlines()[-1])

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        task_vars = task_vars or {}
        try:
            from trtsweep.fleet.collect import Collector
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
        spec = collector.host_spec(self._settings(task_vars, templar), str(args["lease_file"]))
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
                self._start(spec, inputs, python)
            except (RuntimeError, OSError) as exc:
                collector.fail_unstarted(str(exc))
                return {**result, "failed": True, "msg": f"{host}: {exc}"}
            return {**result, "changed": True, "lanes": [lane["name"] for lane in lanes]}
        unreachable_after = float(args.get("unreachable_after_s", 30))
        offsets: dict = {}
        failing_since = None
        while not collector.done():
            try:
                polled = self._poll(python, spec["journal_dir"], offsets)
                collector.take(polled["events"], self._fetch)  # again from the same offsets if a fetch fails
                offsets, failing_since = polled["offsets"], None
            except (AnsibleError, RuntimeError, ValueError, OSError) as exc:
                failing_since = failing_since or time.monotonic()
                if time.monotonic() - failing_since > unreachable_after:
                    if isinstance(exc, AnsibleConnectionFailure):
                        raise
                    return {**result, "failed": True, "msg": f"{host}: {exc}"}
                time.sleep(1.0)
                continue
            if polled["events"]:
                self._refresh_report(
                    Path(args["results_dir"]), args.get("slo"), float(args.get("report_refresh_s", 30))
                )
            if polled.get("runner_alive") is False and not collector.done():
                collector.take_runner_death(polled.get("runner_log") or [])
                break
        # the host spec may hold a hub token: gone once its lanes ended (best effort)
        with contextlib.suppress(AnsibleError, RuntimeError, OSError):
            self._remote(["rm", "-f", "--", f"{spec['journal_dir']}/host.json"], "removing the host spec")
        return {**result, "changed": True, **collector.summary()}

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
        local.parent.mkdir(parents=True, exist_ok=True)
        self._connection.fetch_file(remote, str(local))
