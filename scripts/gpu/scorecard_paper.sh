#!/usr/bin/env bash
# The paper-profile primitive scorecard of one mixer on one GPU: what `windtunnel scorecard MODEL
# --profile paper` decides at the paper's budget (Paper I's three tunnels; 50-100k steps of batch
# 128), the transformer trained beside it (no reference is shipped for the paper profile).
#
#   scripts/gpu/scorecard_paper.sh [MODEL] [OUT]        # e.g. mamba runs/scorecard-paper-mamba
#   SMOKE=1 scripts/gpu/scorecard_paper.sh mamba /tmp/x # a few steps, on whatever device there is
#
# Needs a CUDA build of torch (>= 2.3) in .venv: `make setup` installs the CPU build; on a GPU
# machine install the CUDA one first (see docs: the set-up's torch index). Prints the device, the
# scorecard (verdicts, steps to realise, the searches' cautions) and the wall time; every run
# resumes from its folder if the job is stopped, so the same command continues it.
set -euo pipefail
cd "$(dirname "$0")/../.."
MODEL=${1:-mamba}
OUT=${2:-runs/scorecard-paper-${MODEL//:/.}}
PY=.venv/bin/python
[ -x "$PY" ] || make setup
"$PY" - <<'PY'
import torch
print("torch", torch.__version__, "cuda", torch.version.cuda, "available:", torch.cuda.is_available())
if torch.cuda.is_available():
    print("device:", torch.cuda.get_device_name(0), f"{torch.cuda.get_device_properties(0).total_memory / 2**30:.0f} GiB")
PY
ARGS=(--profile paper --reference train --out "$OUT" --quiet)
if [ -n "${SMOKE:-}" ]; then  # a check of the script itself: a few steps, a small evaluation
  ARGS+=(--primitives accumulation --no-rungs --set train.steps=20 --set train.eval_every=10 --set eval.n_sequences=64
         --set eval.n_boot=10 --set train.checkpoints=1)
fi
/usr/bin/time -f "wall %e s, peak RSS %M kB" .venv/bin/windtunnel scorecard "$MODEL" "${ARGS[@]}"
