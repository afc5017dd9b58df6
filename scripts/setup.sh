#!/usr/bin/env bash
# Idempotent set-up: Debian packages, the pinned Python environment (torch for
# LibTorch, timm as the test oracle), CMake configure and build.
# Each step is skipped when already done, so a second run costs seconds.
#
# Usage: setup.sh [TARGET...]   builds only those CMake targets (default: all),
# e.g. `setup.sh timm_runtime` for timm-run and the plugins alone.
#        setup.sh --deps-only   the packages and the Python environment, for a
# script that configures its own build (scripts/sanitize.sh).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"

log() { printf '[setup] %s\n' "$*" >&2; }

install_apt_packages() {
  local missing=()
  for pkg in "${APT_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed' || missing+=("$pkg")
  done
  [ ${#missing[@]} -eq 0 ] && return
  log "installing Debian packages: ${missing[*]}"
  local sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
}

create_venv() {
  local marker="$TIMM_CPP_VENV/.timm-cpp-complete"
  [ -f "$marker" ] && return
  log "creating Python environment $TIMM_CPP_VENV (torch $TORCH_VERSION, timm $TIMM_VERSION)"
  mkdir -p "$TIMM_CPP_CACHE"
  python3 -m venv "$TIMM_CPP_VENV"
  "$TIMM_CPP_VENV/bin/pip" install -q --disable-pip-version-check \
    "torch==$TORCH_VERSION" "timm==$TIMM_VERSION" \
    "safetensors==$SAFETENSORS_VERSION" "pillow==$PILLOW_VERSION" numpy \
    "tensorboard==$TENSORBOARD_VERSION" "webdataset==$WEBDATASET_VERSION" \
    "scikit-learn==$SKLEARN_VERSION" >&2
  touch "$marker"
}

# Packages added to the set-up after a cached venv was made: installed into
# it when missing, so existing caches get them too.
complete_venv() {
  if ! "$TIMM_CPP_VENV/bin/python" -c "import tensorboard" 2>/dev/null; then
    log "installing tensorboard $TENSORBOARD_VERSION into $TIMM_CPP_VENV"
    "$TIMM_CPP_VENV/bin/pip" install -q --disable-pip-version-check "tensorboard==$TENSORBOARD_VERSION" >&2
  fi
  # timm's wds reader, for tests/oracle/wds_oracle.py.
  if ! "$TIMM_CPP_VENV/bin/python" -c "import webdataset" 2>/dev/null; then
    log "installing webdataset $WEBDATASET_VERSION into $TIMM_CPP_VENV"
    "$TIMM_CPP_VENV/bin/pip" install -q --disable-pip-version-check "webdataset==$WEBDATASET_VERSION" >&2
  fi
  # scikit-learn's precision / recall / F1, for tests/oracle/tools_oracle.py (--metrics-avg).
  if ! "$TIMM_CPP_VENV/bin/python" -c "import sklearn" 2>/dev/null; then
    log "installing scikit-learn $SKLEARN_VERSION into $TIMM_CPP_VENV"
    "$TIMM_CPP_VENV/bin/pip" install -q --disable-pip-version-check "scikit-learn==$SKLEARN_VERSION" >&2
  fi
}

configure_and_build() {
  local generator=()
  command -v ninja >/dev/null && generator=(-G Ninja)
  if [ ! -f "$TIMM_CPP_BUILD/CMakeCache.txt" ]; then
    log "configuring $TIMM_CPP_BUILD"
    cmake -S "$TIMM_CPP_ROOT" -B "$TIMM_CPP_BUILD" "${generator[@]}" \
      -DCMAKE_BUILD_TYPE=Release \
      -DTIMM_PYTHON="$TIMM_CPP_VENV/bin/python" \
      -DCMAKE_CXX_COMPILER_LAUNCHER=ccache >&2
  fi
  local targets=()
  [ $# -gt 0 ] && targets=(--target "$@")
  log "building ${*:-everything}"
  cmake --build "$TIMM_CPP_BUILD" -j "$(nproc)" "${targets[@]}" >&2
}

install_apt_packages
create_venv
complete_venv
if [ "${1:-}" = "--deps-only" ]; then
  exit 0
fi
configure_and_build "$@"
