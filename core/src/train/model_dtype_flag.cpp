#include "timm/train/model_dtype_flag.hpp"

#include "timm/base/error.hpp"
#include "timm/base/python_repr.hpp"

namespace timm {

void check_model_dtype_name(const std::string& name) {
  if (name == "float32" || name == "float16" || name == "bfloat16") return;
  throw UsageError("--model-dtype " + in_quotes(name) + ": expected float32, float16 or bfloat16");
}

void check_amp_with_model_dtype(bool amp, const std::string& model_dtype) {
  if (!amp || model_dtype == "float32") return;
  throw UsageError("--amp with --model-dtype " + model_dtype +
                   ": float32 model dtype must be used with AMP (autocast lowers float32 weights to --amp-dtype "
                   "itself); give --amp alone for mixed precision, or --model-dtype " +
                   model_dtype + " alone");
}

}  // namespace timm
