# Copyright: trtsweep contributors
# Apache-2.0
"""Shared by the trtsweep modules: import the trtsweep package on the target host and turn its
one-line errors into fail_json."""

from __future__ import annotations

import traceback

from ansible.module_utils.basic import missing_required_lib

try:
    from trtsweep.errors import TrtsweepError
except ImportError:
    TRTSWEEP_IMPORT_ERROR = traceback.format_exc()

    class TrtsweepError(Exception):  # type: ignore[no-redef]
        """Placeholder so modules can name the type before the import check fails them."""
else:
    TRTSWEEP_IMPORT_ERROR = None


def require_trtsweep(module):
    """Fail the module with installation advice when the trtsweep package is not importable."""
    if TRTSWEEP_IMPORT_ERROR is not None:
        module.fail_json(
            msg=missing_required_lib("trtsweep", reason="on the target host's ansible_python_interpreter"),
            exception=TRTSWEEP_IMPORT_ERROR,
        )


def run_or_fail(module, func, *args, **kwargs):
    """Call func; a TrtsweepError becomes fail_json with its first line as the message."""
    try:
        return func(*args, **kwargs)
    except TrtsweepError as exc:
        text = str(exc)
        first, _, rest = text.partition("\n")
        module.fail_json(msg=first, details=rest or None)


def run_cli(module, argv, ok=(0,)):
    """Run a trtsweep command line (a list, no shell); fail with its last error line unless its exit status is
    one of `ok`. Returns stdout."""
    rc, out, err = module.run_command(argv)
    fail_on_status(module, argv, rc, err, ok)
    return out


def fail_on_status(module, argv, rc, err, ok=(0,)):
    """Fail with the last error line of a trtsweep command that ended with a status not in `ok`."""
    if rc not in ok:
        lines = [line for line in err.strip().splitlines() if line.strip()]
        module.fail_json(
            msg=lines[-1] if lines else f"{argv[2]} exited with status {rc}", rc=rc, cmd=argv, stderr_tail=lines[-20:]
        )
