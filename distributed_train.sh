#!/usr/bin/env bash
# Distributed training on one machine, as timm's distributed_train.sh:
#   ./distributed_train.sh N [timm-run flags...]
# runs N ranks of timm-run under the venv's torchrun (one process per device).
# Multi-node: put torchrun options before `--`:
#   ./distributed_train.sh 8 --nnodes 2 --node-rank 0 --rdzv-endpoint host:29500 -- --model resnet50 ...
# TIMM_RUN overrides the binary (default: build/bin/timm-run of this checkout).
# See docs/distributed.md.
set -euo pipefail
if [[ $# -lt 1 || ! "$1" =~ ^[0-9]+$ ]]; then
  echo "usage: $0 NUM_PROC [TORCHRUN_OPTIONS... --] [TIMM_RUN_FLAGS...]" >&2
  exit 2
fi
NUM_PROC=$1
shift
source "$(dirname "${BASH_SOURCE[0]}")/scripts/env.sh"
TIMM_RUN="${TIMM_RUN:-$TIMM_CPP_BUILD/bin/timm-run}"
TORCHRUN="${TORCHRUN:-$TIMM_CPP_VENV/bin/torchrun}"
if [[ ! -x "$TIMM_RUN" ]]; then
  echo "$0: $TIMM_RUN not found; build it first (scripts/setup.sh) or set TIMM_RUN" >&2
  exit 1
fi
if [[ ! -x "$TORCHRUN" ]]; then
  echo "$0: torchrun not found at $TORCHRUN; run scripts/setup.sh or set TORCHRUN" >&2
  exit 1
fi
LAUNCH_ARGS=()
if [[ " $* " == *" -- "* ]]; then
  while [[ $# -gt 0 && "$1" != "--" ]]; do
    LAUNCH_ARGS+=("$1")
    shift
  done
  shift  # the --
fi
exec "$TORCHRUN" --no-python --nproc_per_node="$NUM_PROC" "${LAUNCH_ARGS[@]}" "$TIMM_RUN" "$@"
