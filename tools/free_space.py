"""Whether the disk has room for the test suite, checked before `make test` starts it.

    .venv/bin/python tools/free_space.py GIB

Fails in one line when the filesystem of the checkout or of the temporary folder (TMPDIR, else /tmp: the tests'
folders, test hosts, clusters and the daemons' images) has less than GIB GiB free: the suite's peak is measured in
CONTRIBUTING.md ("Disk"), and a disk that fills half an hour in fails tests far from the cause.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

GIB = 2**30


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    needed = float(argv[0])
    for where in dict.fromkeys([Path.cwd(), Path(tempfile.gettempdir())]):
        free = shutil.disk_usage(where).free / GIB
        if free < needed:
            print(f"make test: {free:.1f} GiB free on the filesystem of {where}; the suite needs {needed:g} GiB at its "
                  "peak (CONTRIBUTING.md, \"Disk\"): free some and run it again", file=sys.stderr)  # fmt: skip
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
