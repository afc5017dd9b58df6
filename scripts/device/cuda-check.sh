#!/usr/bin/env bash
# The CUDA checks, run on the GPU machine (torch 2.11 in its python3, no
# package registry): unpacks the .deb files that scripts/device/fetch-debs.sh
# put in .device/debs (carried there), builds timm-cpp against that torch with
# the CUDA tests on, and runs them, plus the NCCL-labelled distributed tests
# where present. Logs go to $OUT when set.
#
# From this machine, with the device tool:
#   ./scripts/device/fetch-debs.sh
#   run(command="bash scripts/device/cuda-check.sh", carry=[".device"], timeout_s=540)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
out="${OUT:-/tmp}"
prefix=/tmp/timm-deps
mkdir -p "$prefix"
for deb in "$root"/.device/debs/*.deb; do dpkg -x "$deb" "$prefix"; done
export CMAKE_PREFIX_PATH="$prefix/usr"
export LD_LIBRARY_PATH="$prefix/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export TIMM_FASHION_MNIST_DIR="$prefix/usr/share/datasets/fashion-mnist"
torch_root="$(python3 -c 'import os, torch; print(os.path.dirname(torch.__file__))')"
python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, torch.cuda.get_device_name(0))'
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true

build=/tmp/build-cuda
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DTORCH_ROOT="$torch_root" \
  -DGLOO_ROOT="$prefix/usr" -DTIMM_PYTHON="$(command -v python3)" -DTIMM_CUDA_TESTS=ON \
  -DCMAKE_INCLUDE_PATH="$prefix/usr/include" -DCMAKE_LIBRARY_PATH="$prefix/usr/lib/x86_64-linux-gnu" \
  2>&1 | tee "$out/configure.log" | tail -5
ninja -C "$build" -j "$(nproc)" 2>&1 | tee "$out/build.log" | tail -3
ctest --test-dir "$build" -L 'cuda|nccl' --output-on-failure 2>&1 | tee "$out/ctest-cuda.log"
