#!/usr/bin/env bash
# Create (if missing) and fill the environment scalebench runs in. Idempotent: a second run
# with nothing changed only checks the stamp. Usage: scripts/setup.sh VENV_DIR
set -euo pipefail
VENV=${1:-.venv}
HERE=$(cd "$(dirname "$0")/.." && pwd)
STAMP="$VENV/.scalebench-setup"
# The stamp records what was installed from; a change in any of these re-runs the setup.
# The checkout's path is part of it: the editable install points at one checkout.
want=$( (echo "$HERE"; cat "$HERE/pyproject.toml" "$HERE/scripts/setup.sh" \
        "$HERE/scripts/install_horovod.sh") | sha256sum | cut -c1-16)

if [[ -f "$STAMP" && "$(cat "$STAMP")" == "$want" ]]; then
    echo "setup: $VENV is up to date"
    exit 0
fi

start=$(date +%s)
if [[ ! -x "$VENV/bin/python" ]]; then
    echo "setup: creating $VENV"
    python3 -m venv "$VENV"
fi
PIP=("$VENV/bin/python" -m pip --disable-pip-version-check)
"${PIP[@]}" install -q --upgrade pip setuptools wheel
# Exact pins: these builds lie on local disk; an unpinned torch would pull a new CUDA build.
"${PIP[@]}" install -q torch==2.14.1 torchvision==0.29.1
"${PIP[@]}" install -q -e "$HERE[dev,ray]"
if [[ "${SCALEBENCH_SKIP_HOROVOD:-0}" != 1 ]]; then
    bash "$HERE/scripts/install_horovod.sh" "$VENV"
fi
echo "$want" > "$STAMP"
echo "setup: done in $(( $(date +%s) - start ))s"
