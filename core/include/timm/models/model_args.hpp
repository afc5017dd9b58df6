// Helpers that turn the flags timm's scripts pass to create_model into
// ModelArgs, for timm-run and the tools alike.
#pragma once

#include "timm/models/model.hpp"

namespace timm {

// --drop-block (train.py's and benchmark.py's): create_model's keyword
// drop_block_rate, which a model without DropBlock refuses by name. Throws
// UsageError when --model-kwargs sets it too.
void set_drop_block_rate(ModelArgs& args, double rate);

}  // namespace timm
