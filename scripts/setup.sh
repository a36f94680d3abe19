#!/usr/bin/env bash
# Create .venv with the CPU build of torch 2.13.0 and windtunnel installed in editable mode.
# Idempotent: when pyproject.toml and this script are unchanged since the last successful
# set-up, it only checks the stamp and returns in well under a second.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
EXTRAS=${WINDTUNNEL_EXTRAS:-test}
stamp_src=$(cat pyproject.toml scripts/setup.sh; echo "extras=$EXTRAS")
want=$(printf '%s' "$stamp_src" | sha256sum | cut -d' ' -f1)
if [ -f .venv/.windtunnel-stamp ] && [ "$(cat .venv/.windtunnel-stamp)" = "$want" ]; then
  exit 0
fi
[ -x .venv/bin/python ] || "$PY" -m venv .venv
# Pin the CPU build first: an unpinned torch would pull a multi-GB CUDA build.
pipi() { .venv/bin/python -m pip install -q --disable-pip-version-check "$@" 2> >(grep -v "^WARNING: Location" >&2); }
pipi "torch==2.13.0"
pipi -e ".[$EXTRAS]"
.venv/bin/python -c "import torch, windtunnel" # fail loudly if the install did not work
echo "$want" > .venv/.windtunnel-stamp
