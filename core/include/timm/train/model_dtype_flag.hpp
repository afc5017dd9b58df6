// --model-dtype's rules on its text, free of LibTorch so that timm-run
// refuses bad arguments while reading them, before any data or model is
// loaded (amp.hpp's parse_model_dtype and check_amp_model_dtype use these).
#pragma once

#include <string>

namespace timm {

// The choices train.py, validate.py and inference.py assert: "float32",
// "float16", "bfloat16". Anything else throws UsageError naming the value
// and the choices.
void check_model_dtype_name(const std::string& name);

// train.py's rule: autocast computes from float32 weights, so --amp with a
// --model-dtype other than float32 throws UsageError ("float32 model dtype
// must be used with AMP").
void check_amp_with_model_dtype(bool amp, const std::string& model_dtype);

}  // namespace timm
