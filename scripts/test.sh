#!/usr/bin/env bash
# Set up, then build and run every test through ctest.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
"$TIMM_CPP_ROOT/scripts/setup.sh"
cd "$TIMM_CPP_BUILD"
exec ctest --output-on-failure --timeout 1200 --parallel "$(nproc)" "$@"
