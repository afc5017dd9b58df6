# Shared settings for the set-up scripts: pinned versions and cache locations.
# Sourced, not run. Everything here can be overridden from the environment.

TIMM_CPP_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
TORCH_VERSION="${TORCH_VERSION:-2.15.0}"
TIMM_VERSION="${TIMM_VERSION:-1.0.31}"
SAFETENSORS_VERSION="${SAFETENSORS_VERSION:-0.8.0}"
PILLOW_VERSION="${PILLOW_VERSION:-13.0.0}"
NUMPY_VERSION="${NUMPY_VERSION:-}"
# The tests read --log-tensorboard's event files with tensorboard's own reader.
TENSORBOARD_VERSION="${TENSORBOARD_VERSION:-2.21.0}"
WEBDATASET_VERSION="${WEBDATASET_VERSION:-1.0.2}"
# validate.py's --metrics-avg scores with scikit-learn; its oracle does too.
SKLEARN_VERSION="${SKLEARN_VERSION:-1.9.1}"

# The virtual environment lives in a cache keyed by the pinned versions, so a
# fresh clone (or CI's) reuses it instead of downloading gigabytes again.
TIMM_CPP_CACHE="${TIMM_CPP_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/timm-cpp}"
TIMM_CPP_VENV="${TIMM_CPP_VENV:-$TIMM_CPP_CACHE/venv-torch$TORCH_VERSION-timm$TIMM_VERSION}"
TIMM_CPP_BUILD="${TIMM_CPP_BUILD:-$TIMM_CPP_ROOT/build}"

# ccache: paths relative to the checkout, so a clone in another folder hits.
export CCACHE_DIR="${CCACHE_DIR:-$TIMM_CPP_CACHE/ccache}"
export CCACHE_BASEDIR="$TIMM_CPP_ROOT"
export CCACHE_NOHASHDIR=true
export CCACHE_SLOPPINESS="pch_defines,time_macros,include_file_mtime,include_file_ctime"
export CCACHE_MAXSIZE="${CCACHE_MAXSIZE:-5G}"

APT_PACKAGES=(
  build-essential cmake ninja-build pkg-config python3 python3-venv
  libboost-dev libboost-filesystem-dev libboost-program-options-dev
  libtomlplusplus-dev libspdlog-dev libfmt-dev doctest-dev
  libturbojpeg0-dev libjpeg62-turbo-dev libpng-dev zlib1g-dev nlohmann-json3-dev
  ccache dataset-fashion-mnist iproute2 libgloo-dev
)
