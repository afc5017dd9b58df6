#!/usr/bin/env bash
# The whole suite under AddressSanitizer and UndefinedBehaviorSanitizer (the
# "asan" preset of CMakePresets.json): set-up, configure build-asan, build
# everything, run every test. Extra arguments go to ctest (e.g. -R test_tar).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
"$TIMM_CPP_ROOT/scripts/setup.sh" --deps-only
cd "$TIMM_CPP_ROOT"
if [ ! -f build-asan/CMakeCache.txt ]; then
  cmake --preset asan -DTIMM_PYTHON="$TIMM_CPP_VENV/bin/python" >&2
fi
cmake --build --preset asan -j "$(nproc)" >&2
exec ctest --preset asan --parallel "$(nproc)" "$@"
