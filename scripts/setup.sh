#!/usr/bin/env bash
# Create a virtual env (.venv, or WINDTUNNEL_VENV) with torch 2.13.0 and windtunnel: the checkout in
# editable mode (or WINDTUNNEL_PACKAGE: a built wheel, as .ci/run installs it), with the optional
# extras in WINDTUNNEL_EXTRAS (comma-separated: test, docs, llm, ray, data, transformerlens, nnsight,
# tensorboard, mlflow, wandb; default none: the core alone, which the main job needs). `make setup
# EXTRAS=llm` sets it; `make test` asks for the test extra.
# Which torch build: WINDTUNNEL_TORCH_INDEX (`make setup TORCH_INDEX=...`) is an extra package index
# for torch, `none` for pip's own configuration alone, or `auto` (the default): pip's own
# configuration where it already points at local wheels (find-links or a file:// index: an
# offline machine), else PyTorch's CPU index on Linux x86-64 (where PyPI's torch is the CUDA
# build, with several GB of GPU libraries), else nothing (PyPI's macOS and ARM wheels are CPU builds).
# Extras installed earlier stay installed: the venv holds the union, so `make run` after `make test`
# does not reinstall anything.
# Idempotent: when pyproject.toml, this script, the package and the extras are unchanged since the
# last successful set-up, it only checks the stamp and returns in well under a second.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
VENV=${WINDTUNNEL_VENV:-.venv}
PACKAGE=${WINDTUNNEL_PACKAGE:-.}
have=$(cat "$VENV/.windtunnel-extras" 2>/dev/null || true)
asked=${WINDTUNNEL_EXTRAS:-}
for e in ${asked//,/ }; do
  grep -q "^$e = \[" pyproject.toml || { echo "unknown extra '$e'; the extras are: test, docs, llm, ray, data, transformerlens, nnsight, tensorboard, mlflow, wandb" >&2; exit 2; }
done
EXTRAS=$(printf '%s\n' ${have//,/ } ${asked//,/ } | sed '/^$/d' | sort -u | paste -sd, -)
TORCH_INDEX=${WINDTUNNEL_TORCH_INDEX:-auto}
stamp_src=$(cat pyproject.toml scripts/setup.sh; echo "extras=$EXTRAS torch_index=$TORCH_INDEX package=$PACKAGE")
want=$(printf '%s' "$stamp_src" | sha256sum | cut -d' ' -f1)
if [ -f "$VENV"/.windtunnel-stamp ] && [ "$(cat "$VENV"/.windtunnel-stamp)" = "$want" ]; then
  exit 0
fi
[ -x "$VENV"/bin/python ] || "$PY" -m venv "$VENV"
# Pin torch first, from the index chosen above; the extras leave it alone (they need torch >= 2.3,
# which 2.13.0 satisfies).
pipi() { "$VENV"/bin/python -m pip install -q --disable-pip-version-check "$@" 2> >(grep -v "^WARNING: Location" >&2); }
if [ "$TORCH_INDEX" = auto ]; then
  # read the whole listing first: with pipefail, `pip ... | grep -q` fails when grep stops reading early
  pip_config=$("$VENV"/bin/python -m pip config list 2>/dev/null || true)
  if grep -Eq "find-links|index-url='file:" <<<"$pip_config"; then
    TORCH_INDEX=none
  elif [ "$(uname -s)-$(uname -m)" = Linux-x86_64 ]; then
    TORCH_INDEX=https://download.pytorch.org/whl/cpu
  else
    TORCH_INDEX=none
  fi
fi
if [ "$TORCH_INDEX" = none ]; then pipi "torch==2.13.0"; else pipi "torch==2.13.0" --extra-index-url "$TORCH_INDEX"; fi
if [ "$PACKAGE" = . ]; then pipi -e ".${EXTRAS:+[$EXTRAS]}"
else pipi "windtunnel${EXTRAS:+[$EXTRAS]} @ file://$(realpath "$PACKAGE")"; fi
# fail loudly if the install did not work, and say which torch build it is
"$VENV"/bin/python -c "import torch, windtunnel; print('torch', torch.__version__, 'CUDA ' + torch.version.cuda + ' build' if torch.version.cuda else 'CPU build')"
echo "$EXTRAS" > "$VENV"/.windtunnel-extras
echo "$want" > "$VENV"/.windtunnel-stamp
