// What timm-validate, timm-benchmark and timm-infer share: the data flags of
// validate.py turned into a resolved DataConfig, checkpoint discovery and
// loading, and the eval loader.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <c10/core/ScalarType.h>

#include "timm/config/config.hpp"
#include "timm/data/data_config.hpp"
#include "timm/data/dataset.hpp"
#include "timm/data/loader.hpp"
#include "timm/models/model.hpp"
#include "timm/models/model_input.hpp"
#include "timm/tools/tool_args.hpp"

namespace timm {

// Declares the data and model flags the three tools share (--model,
// --img-size, --input-size, --in-chans, --crop-pct, --crop-mode, --mean,
// --std, --interpolation, --num-classes, --gp, --model-kwargs), with
// `default_model` as --model's default.
void add_model_data_flags(ToolArgs& args, const std::string& default_model);
// Declares validate.py's and inference.py's precision and weight flags:
// --amp, --amp-dtype (float16, their default), --model-dtype,
// --channels-last, --pretrained.
void add_eval_model_flags(ToolArgs& args);

// Declares what validate.py, benchmark.py and inference.py take to pick a
// device or compile the model: --device (default cpu: the tools run on the
// CPU), --use-train-size (the caller passes its negation as
// resolve_data_config's use_test_size, or ignores it as inference.py does),
// with `num_gpu` --num-gpu,
// and their compilers refused with the reasons timm-run gives
// (--torchscript, --torchcompile, --torchcompile-mode, --aot-autograd,
// --fuser).
void add_runtime_flags(ToolArgs& args, bool num_gpu);
// Throws UsageError for a --device other than cpu or a --num-gpu other than 1.
void check_runtime_flags(const ToolArgs& args);

// The bulk runs' model names (benchmark.py's --model-list, validate.py's
// --model FILE): one per line, trailing blanks dropped, empty lines skipped.
// Throws UsageError naming `flag` and the file when it cannot be opened or
// names no model.
std::vector<std::string> read_model_names(const std::string& flag, const std::string& file);
// The registered models that the wildcard `pattern` matches (timm's
// list_models filter), in timm's order; throws UsageError naming `flag`
// when none does.
std::vector<std::string> models_matching(const std::string& flag, const std::string& pattern);

// Declares --reparam (validate.py's and benchmark.py's).
void add_reparam_flag(ToolArgs& args);

// Declares --test-pool (validate.py's and inference.py's).
void add_test_pool_flag(ToolArgs& args);
// With --test-pool, timm's apply_test_time_pool (timm/tools/
// test_time_pool.hpp): where it pools, the model wrapped in its
// TestTimePoolHead and `data_config`'s crop_pct set to 1.0, as validate.py
// and inference.py load the images. Returns the model to run. Call it after
// the data config is resolved and logged, before the model's dtype is set.
ModelPtr test_pool_if_asked(const ToolArgs& args, ModelPtr model, const std::string& model_name,
                            DataConfig& data_config);

// Declares --fast-norm (validate.py's and benchmark.py's), and with it sets
// timm's fast norm for the models built afterwards (layers::set_fast_norm;
// call it before create_model, as they do).
void add_fast_norm_flag(ToolArgs& args);
void set_fast_norm_if_asked(const ToolArgs& args);
// With --reparam, timm's reparameterize_model: folds the model's
// multi-branch blocks in place (ClassifierImpl::reparameterize) and logs how
// many; a model without such blocks is left as it is, as timm's. Call it
// after the weights are loaded, as validate.py does.
void reparameterize_if_asked(const ToolArgs& args, ClassifierImpl& model);

// --amp / --amp-dtype / --model-dtype / --channels-last as the forward needs
// them (--fast-norm acts when the model is built).
struct EvalPrecision {
  // Autocast on the CPU in this dtype (torch.autocast(device.type, dtype));
  // none without --amp.
  std::optional<c10::ScalarType> amp_dtype;
  // --model-dtype: the weights (to_model_dtype) and each input batch
  // (prepare_eval_images), as validate.py's model.to(dtype=model_dtype) and
  // its loader's img_dtype.
  c10::ScalarType model_dtype = c10::ScalarType::Float;
  // The model's weights and each input batch in channels_last memory format.
  bool channels_last = false;
};
// Reads the flags, and with --fast-norm sets timm's fast norm for the models
// built afterwards (layers::set_fast_norm); an --amp-dtype other than float16 or bfloat16 is a
// UsageError, with or without --amp (validate.py asserts it only with --amp),
// and so are a --model-dtype other than float32, float16 or bfloat16 and
// --amp beside a --model-dtype other than float32 (validate.py's asserts).
EvalPrecision eval_precision(const ToolArgs& args);

// The tools' log line: "<doing> in mixed precision with native PyTorch AMP
// (<amp-dtype> autocast on the CPU)." or "<doing> in <model dtype>. AMP not
// enabled." (validate.py's words, `doing` = "Validating").
std::string describe_eval_precision(const EvalPrecision& precision, const std::string& doing);

// The head size of timm's create_model(model_name, pretrained=True) without
// num_classes: the pretrained weights' (pretrained_cfg().num_classes), as
// validate.py and inference.py take it when --num-classes is not given.
int64_t pretrained_num_classes(const std::string& model_name);

// Declares --data-dir, --dataset, --split, --class-map, --num-samples, -b, -j, --log-freq.
void add_dataset_flags(ToolArgs& args, int64_t default_batch, int64_t default_workers);

// The given data flags as a train Config (marked explicit), so the trainer's
// resolve_data_config applies the same priority rules. --crop-mode has no
// train flag: apply it with apply_crop_mode().
Config data_flags_config(const ToolArgs& args);

// --crop-mode over the resolved config (center, squash or border).
void apply_crop_mode(const ToolArgs& args, DataConfig& data_config);

// timm-run's dataset naming: --dataset, else Fashion-MNIST when no
// --data-dir is given, else an image folder.
std::string tool_dataset_name(const ToolArgs& args);

// --checkpoint: a .safetensors file, or a folder whose *.safetensors are
// taken in natural order (validate.py's directory mode). Throws UsageError
// when nothing is found.
std::vector<std::filesystem::path> find_checkpoints(const std::filesystem::path& path);

// Loads a timm-run checkpoint (safetensors, timm's keys) strictly.
void load_checkpoint_weights(ClassifierImpl& model, const std::filesystem::path& checkpoint);

// The head and stem sizes a checkpoint was trained with: the classifier
// weight's rows ("fc.weight") and the stem conv's input channels
// ("conv1.weight"), named by the model's pretrained cfg; nullopt when absent.
struct CheckpointShape {
  std::optional<int64_t> num_classes;
  std::optional<int64_t> in_chans;
};
CheckpointShape checkpoint_shape(const std::filesystem::path& checkpoint, const std::string& model_name);

struct EvalLoaderOptions {
  int64_t batch_size = 256;
  int64_t workers = 4;
  // validate.py's --naflex-loader: timm's NaFlex eval loader, each image
  // resized to at most max_seq_len patches of patch_size (aspect kept), the
  // batches Batch::patches.
  std::optional<NaFlexTransformArgs> naflex;
  // validate.py's --crop-border-pixels: TrimBorder before the crop.
  int64_t crop_border_pixels = 0;
};

// An in-order eval loader over `dataset` with create_transform(is_training
// false) of `data_config`.
std::shared_ptr<Loader> make_eval_loader(std::shared_ptr<const Dataset> dataset, const DataConfig& data_config,
                                         const EvalLoaderOptions& options);

// A uint8 batch as `dtype` (float32, or --model-dtype's: timm's img_dtype)
// on the CPU with the loader's batch transforms (normalisation) applied in
// that dtype, as timm's prefetcher does; in channels_last memory format when
// `channels_last` is set (validate.py's input.contiguous(
// memory_format=torch.channels_last)).
at::Tensor prepare_eval_images(const Batch& batch, const TransformPipeline& transform, bool channels_last = false,
                               c10::ScalarType dtype = c10::ScalarType::Float);

// The model's input of an eval batch: prepare_eval_images' images, or a
// NaFlex batch's patches normalised with `data_config`'s mean and std in
// `dtype` (timm's NaFlexPrefetchLoader), each patch's pixels laid out as
// `patchify_channels_last` says (the model's), with their coordinates and
// mask.
ModelInput prepare_eval_input(const Batch& batch, const TransformPipeline& transform, const DataConfig& data_config,
                              bool channels_last = false, c10::ScalarType dtype = c10::ScalarType::Float,
                              bool patchify_channels_last = true);

}  // namespace timm
