// The precompiled header shared by the targets that use LibTorch. Sources
// include the narrow headers they need; this only makes those includes cheap.
//
// Kept to ATen and the nn module core on purpose: GCC loads the whole file
// into every translation unit, and loading costs about 1 s per 100 MB. The
// earlier header (torch/nn.h, optim.h, serialize.h: 724 MB) cost 6.4 s for an
// empty file; this one (566 MB) costs 4.0 s, and a typical source compiles
// faster with it (measured in docs/build.md). Torch-free sources take no
// precompiled header at all.
#pragma once

#include <ATen/ATen.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/container/any.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/linear.h>

#include <algorithm>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>
