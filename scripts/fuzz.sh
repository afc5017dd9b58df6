#!/usr/bin/env bash
# Long fuzzing runs with clang's libFuzzer, AddressSanitizer and UBSan.
#
# Configures a build folder of its own (build-fuzz: clang++, the whole build
# compiled with -fsanitize=fuzzer-no-link,address,undefined,
# TIMM_FUZZ_ENGINE=libfuzzer), builds the fuzz targets alone
# (tests/fuzz/CMakeLists.txt), copies each target's seed corpus and
# regression inputs into a work folder, runs libFuzzer on it, and prints per
# target the executions, the crashes and libFuzzer's final coverage figure.
#
# Usage: scripts/fuzz.sh [TARGET...] [--seconds S | --runs N] [-- LIBFUZZER_FLAG...]
#   TARGET   one of tests/fuzz/CMakeLists.txt's TIMM_FUZZ_TARGETS (default: all)
#   --seconds S   per target (default 60); --runs N   executions per target
# A finding lands in build-fuzz/fuzz-work/<target>/crashes/; replay it with
#   build-fuzz/bin/timm-fuzz-<target> FILE     (sanitized)
#   build/bin/timm-fuzz <target> --runs 0 --inputs FILE   (the g++ build)
# and add it to tests/fuzz/regressions/<target>/ once fixed.
# Environment: CXX (default clang++), TIMM_CPP_FUZZ_BUILD (default build-fuzz),
# ASAN_OPTIONS, UBSAN_OPTIONS, LSAN_OPTIONS (default: tests/sanitizers/lsan.supp).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"

log() { printf '[fuzz] %s\n' "$*" >&2; }
die() {
  printf 'fuzz.sh: error: %s\n' "$*" >&2
  exit 2
}

BUILD="${TIMM_CPP_FUZZ_BUILD:-$TIMM_CPP_ROOT/build-fuzz}"
FUZZ_SRC="$TIMM_CPP_ROOT/tests/fuzz"
CXX="${CXX:-clang++}"
# The target list lives once, in CMake.
read -r -a ALL_TARGETS <<<"$(sed -n 's/^set(TIMM_FUZZ_TARGETS \(.*\))$/\1/p' "$FUZZ_SRC/CMakeLists.txt")"
[ ${#ALL_TARGETS[@]} -gt 0 ] || die "no TIMM_FUZZ_TARGETS in $FUZZ_SRC/CMakeLists.txt"

targets=()
limit=(-max_total_time=60)
extra=()
while [ $# -gt 0 ]; do
  case "$1" in
    --seconds) [ $# -ge 2 ] || die "--seconds expects a number"; limit=(-max_total_time="$2"); shift 2 ;;
    --runs) [ $# -ge 2 ] || die "--runs expects a number"; limit=(-runs="$2"); shift 2 ;;
    --) shift; extra=("$@"); break ;;
    -*) die "unknown option $1 (usage: fuzz.sh [TARGET...] [--seconds S | --runs N] [-- LIBFUZZER_FLAG...])" ;;
    *)
      [[ " ${ALL_TARGETS[*]} " == *" $1 "* ]] || die "unknown target '$1'; expected one of: ${ALL_TARGETS[*]}"
      targets+=("$1"); shift ;;
  esac
done
[ ${#targets[@]} -gt 0 ] || targets=("${ALL_TARGETS[@]}")

command -v "$CXX" >/dev/null || die "$CXX not found: libFuzzer needs clang (Debian: apt-get install clang)"
[ -x "$TIMM_CPP_VENV/bin/python" ] || die "no Python environment at $TIMM_CPP_VENV (its torch wheel is our LibTorch): run scripts/setup.sh first"

configure() {
  [ -f "$BUILD/CMakeCache.txt" ] && return
  local generator=()
  command -v ninja >/dev/null && generator=(-G Ninja)
  local launcher=()
  command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
  log "configuring $BUILD with $CXX, libFuzzer, ASan and UBSan"
  # fuzzer-no-link: coverage for libFuzzer in the core too, whose parsers are
  # what is fuzzed; the fuzz executables add -fsanitize=fuzzer at link time.
  cmake -S "$TIMM_CPP_ROOT" -B "$BUILD" "${generator[@]}" "${launcher[@]}" \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_CXX_COMPILER="$CXX" \
    -DCMAKE_CXX_FLAGS="-fsanitize=fuzzer-no-link,address,undefined -fno-omit-frame-pointer" \
    -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=address,undefined" \
    -DCMAKE_SHARED_LINKER_FLAGS="-fsanitize=address,undefined" \
    -DTIMM_FUZZ_ENGINE=libfuzzer \
    -DTIMM_PYTHON="$TIMM_CPP_VENV/bin/python" >&2
}

# Inputs of text targets stay short; binary formats need room for a header,
# a directory and some data.
max_len_of() {
  case "$1" in
    aug_config) echo 512 ;;
    config) echo 8192 ;;
    *) echo 65536 ;;
  esac
}

# Runs one target; prints "<target> <executions> <crashes> <cov>".
run_target() {
  local target="$1"
  local work="$BUILD/fuzz-work/$target"
  mkdir -p "$work/corpus" "$work/crashes"
  local folder
  for folder in corpus regressions; do
    [ -d "$FUZZ_SRC/$folder/$target" ] && cp -n "$FUZZ_SRC/$folder/$target"/* "$work/corpus/"
  done
  local before
  before=$(find "$work/crashes" -type f | wc -l)
  log "$target: fuzzing (log: $work/fuzz.log)"
  # LibTorch is not instrumented; its allocations are still ASan's.
  # UBSan halts, so that libFuzzer saves the input of an undefined behaviour.
  local status=0
  # LeakSanitizer skips LibTorch's own leaks, as in the asan preset.
  (cd "$work" &&
    ASAN_OPTIONS="${ASAN_OPTIONS:-abort_on_error=1}" \
      LSAN_OPTIONS="${LSAN_OPTIONS:-suppressions=$TIMM_CPP_ROOT/tests/sanitizers/lsan.supp:print_suppressions=0}" \
      UBSAN_OPTIONS="${UBSAN_OPTIONS:-halt_on_error=1:abort_on_error=1:print_stacktrace=1}" \
      "$BUILD/bin/timm-fuzz-$target" -max_len="$(max_len_of "$target")" -rss_limit_mb=2048 -malloc_limit_mb=2048 \
      -timeout=10 "${limit[@]}" -artifact_prefix="$work/crashes/" -print_final_stats=1 "${extra[@]}" \
      "$work/corpus" >"$work/fuzz.log" 2>&1) || status=$?
  local executions cov crashes
  executions=$(sed -n 's/^stat::number_of_executed_units: *//p' "$work/fuzz.log" | tail -1)
  cov=$(grep -o 'cov: [0-9]*' "$work/fuzz.log" | tail -1 | cut -d' ' -f2)
  crashes=$(($(find "$work/crashes" -type f | wc -l) - before))
  if [ "$status" -ne 0 ] && [ "$crashes" -eq 0 ]; then
    log "$target: libFuzzer exited with status $status and saved nothing; see $work/fuzz.log"
    crashes="?"
  fi
  echo "$target ${executions:-?} $crashes ${cov:-?}"
}

configure
log "building ${targets[*]}"
cmake --build "$BUILD" -j "$(nproc)" --target "${targets[@]/#/timm-fuzz-}" >&2

results=()
for target in "${targets[@]}"; do
  results+=("$(run_target "$target")")
done

failed=0
printf '\n%-12s %12s %8s %8s\n' target executions crashes cov
for line in "${results[@]}"; do
  read -r target executions crashes cov <<<"$line"
  printf '%-12s %12s %8s %8s\n' "$target" "$executions" "$crashes" "$cov"
  [ "$crashes" = 0 ] || failed=1
done
[ "$failed" -eq 0 ] || echo "findings: $BUILD/fuzz-work/<target>/crashes/ (replay: $BUILD/bin/timm-fuzz-<target> FILE)"
exit "$failed"
