// timm's optimizer names that bind external libraries timm-cpp does not
// include: NVIDIA APEX's fused optimizers ("fused*") and bitsandbytes'
// ("bnb*", 8-bit or full precision). Each name is registered so that
// --opt NAME says what it is and which built-in optimizer does the same
// maths, instead of "unknown optimizer"; creating one is a usage error.
#include "timm/base/error.hpp"
#include "timm/base/names.hpp"
#include "timm/optim/optimizer.hpp"
#include "timm/plugin/plugin.hpp"

namespace timm {
namespace {

struct ExternalOptimizer {
  const char* name;
  const char* description;  // timm's, with the library
  const char* library;      // the Python package timm imports
  const char* instead;      // the built-in --opt with the same maths ("" when none)
};

// timm 1.0.31's _register_apex_optimizers and _register_bnb_optimizers.
constexpr ExternalOptimizer kExternalOptimizers[] = {
    {"fusedsgd", "NVIDIA APEX fused SGD implementation for faster training", "apex", "sgd"},
    {"fusedadam", "NVIDIA APEX fused Adam implementation", "apex", "adam"},
    {"fusedadamw", "NVIDIA APEX fused AdamW implementation", "apex", "adamw"},
    {"fusedlamb", "NVIDIA APEX fused LAMB implementation", "apex", "lamb"},
    {"fusednovograd", "NVIDIA APEX fused NovoGrad implementation", "apex", "novograd"},
    {"bnbsgd", "bitsandbytes SGD", "bitsandbytes", "sgd"},
    {"bnbsgd8bit", "bitsandbytes 8-bit SGD with dynamic quantization", "bitsandbytes", "sgd"},
    {"bnbadam", "bitsandbytes Adam", "bitsandbytes", "adam"},
    {"bnbadam8bit", "bitsandbytes 8-bit Adam with dynamic quantization", "bitsandbytes", "adam"},
    {"bnbadamw", "bitsandbytes AdamW", "bitsandbytes", "adamw"},
    {"bnbadamw8bit", "bitsandbytes 8-bit AdamW with dynamic quantization", "bitsandbytes", "adamw"},
    {"bnblion", "bitsandbytes Lion", "bitsandbytes", "lion"},
    {"bnblion8bit", "bitsandbytes 8-bit Lion with dynamic quantization", "bitsandbytes", "lion"},
    {"bnbademamix", "bitsandbytes AdEMAMix", "bitsandbytes", ""},
    {"bnbademamix8bit", "bitsandbytes 8-bit AdEMAMix with dynamic quantization", "bitsandbytes", ""},
};

OptimizerFactory refuse(const ExternalOptimizer& external) {
  return [external](std::vector<ParamGroup> /*groups*/, const OptimizerArgs& args) -> OptimizerPtr {
    std::string message = "optimizer " + in_quotes(args.opt) + " is " + external.description + ", from the Python " +
                          "package " + in_quotes(external.library) + ", which timm-cpp does not include; ";
    if (*external.instead != '\0') {
      message += "use --opt " + std::string(external.instead) + ", the same update in full precision";
    } else {
      message += "no built-in optimizer has its update (adamw is the nearest)";
    }
    throw UsageError(message);
  };
}

}  // namespace
}  // namespace timm

TIMM_PLUGIN("external") {
  for (const timm::ExternalOptimizer& external : timm::kExternalOptimizers) {
    // train.py's --lr-base scaling rule reads the name ("ada", "lamb").
    const std::string name = external.name;
    const bool adaptive = name.find("ada") != std::string::npos || name.find("lamb") != std::string::npos;
    registrar.add_optimizer(
        external.name, std::string(external.description) + " (not included: needs " + external.library + ")",
        timm::refuse(external),
        timm::OptimizerTraits{.lr_base_scale = adaptive ? timm::LrBaseScale::kSqrt : timm::LrBaseScale::kLinear});
  }
}
