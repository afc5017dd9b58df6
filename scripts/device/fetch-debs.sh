#!/usr/bin/env bash
# Downloads the Debian packages the GPU machine lacks (it has no package
# registry) into .device/debs, for scripts/device/cuda-check.sh to unpack
# there with dpkg -x. Run here, in the repository root; .device/ is ignored by
# git and travels to the device as a carried path (64 MiB at most).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
PACKAGES=(
  # headers and CMake configs
  libboost1.74-dev libboost-filesystem1.74-dev libboost-program-options1.74-dev
  libtomlplusplus-dev libspdlog-dev libfmt-dev doctest-dev nlohmann-json3-dev
  libturbojpeg0-dev libjpeg62-turbo-dev libpng-dev zlib1g-dev libgloo-dev
  # their run-time libraries
  libboost-filesystem1.74.0 libboost-program-options1.74.0 libspdlog1.10 libfmt9
  libturbojpeg0 libjpeg62-turbo libpng16-16 libtomlplusplus3
  # the main job's data
  dataset-fashion-mnist
)
mkdir -p .device/debs
grep -qx '/.device/' .git/info/exclude 2>/dev/null || echo '/.device/' >> .git/info/exclude
(cd .device/debs && apt-get download "${PACKAGES[@]}")
du -sh .device/debs
