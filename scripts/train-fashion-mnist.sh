#!/usr/bin/env bash
# The main job: set up, then train the default model on the built-in
# Fashion-MNIST default for one epoch and print test top-1.
# Extra arguments go to timm-run (e.g. --epochs 3).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
"$TIMM_CPP_ROOT/scripts/setup.sh"
exec "$TIMM_CPP_BUILD/bin/timm-run" --epochs 1 --output "$TIMM_CPP_ROOT/output/train" "$@"
