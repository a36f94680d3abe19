#!/usr/bin/env bash
# Create .venv with the CPU build of torch 2.13.0 and windtunnel installed in editable mode, with
# the optional extras in WINDTUNNEL_EXTRAS (comma-separated: test, llm, ray, data, transformerlens, nnsight, tensorboard, mlflow, wandb; default test;
# `make setup EXTRAS=llm` sets it). Extras installed earlier stay installed: the venv holds the
# union, so `make test` after `make setup EXTRAS=llm` does not reinstall anything.
# Idempotent: when pyproject.toml, this script and the extras are unchanged since the last
# successful set-up, it only checks the stamp and returns in well under a second.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
have=$(cat .venv/.windtunnel-extras 2>/dev/null || true)
asked=${WINDTUNNEL_EXTRAS:-test}
for e in ${asked//,/ }; do
  grep -q "^$e = \[" pyproject.toml || { echo "unknown extra '$e'; the extras are: test, llm, ray, data, transformerlens, nnsight, tensorboard, mlflow, wandb" >&2; exit 2; }
done
EXTRAS=$(printf '%s\n' ${have//,/ } ${asked//,/ } | sort -u | paste -sd, -)
stamp_src=$(cat pyproject.toml scripts/setup.sh; echo "extras=$EXTRAS")
want=$(printf '%s' "$stamp_src" | sha256sum | cut -d' ' -f1)
if [ -f .venv/.windtunnel-stamp ] && [ "$(cat .venv/.windtunnel-stamp)" = "$want" ]; then
  exit 0
fi
[ -x .venv/bin/python ] || "$PY" -m venv .venv
# Pin the CPU build first: an unpinned torch would pull a multi-GB CUDA build. The extras leave
# it alone (they need torch >= 2.3, which 2.13.0 satisfies).
pipi() { .venv/bin/python -m pip install -q --disable-pip-version-check "$@" 2> >(grep -v "^WARNING: Location" >&2); }
pipi "torch==2.13.0"
pipi -e ".[$EXTRAS]"
.venv/bin/python -c "import torch, windtunnel" # fail loudly if the install did not work
echo "$EXTRAS" > .venv/.windtunnel-extras
echo "$want" > .venv/.windtunnel-stamp
