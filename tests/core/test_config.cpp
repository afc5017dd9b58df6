#include <doctest/doctest.h>

#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "test_support.hpp"
#include "timm/base/error.hpp"
#include "timm/config/config.hpp"

using timm::Action;
using timm::CommandLine;
using timm::Config;
using timm::ConfigValue;

namespace {

CommandLine parse(std::vector<std::string> args) {
  args.insert(args.begin(), "timm-train");
  std::vector<const char*> argv;
  for (const std::string& arg : args) argv.push_back(arg.c_str());
  return timm::parse_train_command_line(static_cast<int>(argv.size()), argv.data());
}

// The message of the UsageError that parsing `args` throws ("" if none).
std::string parse_error(const std::vector<std::string>& args) {
  try {
    parse(args);
  } catch (const timm::UsageError& e) {
    return e.what();
  }
  return "";
}

std::string implemented_error(const Config& config) {
  try {
    timm::check_implemented(config);
  } catch (const timm::UsageError& e) {
    return e.what();
  }
  return "";
}

std::vector<std::string> split(const std::string& line) {
  std::vector<std::string> words;
  std::istringstream in(line);
  for (std::string word; in >> word;) words.push_back(word);
  return words;
}

std::string write_file(const timm::test::TempDir& dir, const std::string& name, const std::string& text) {
  std::string path = (dir / name).string();
  std::ofstream(path) << text;
  return path;
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("defaults are timm's") {
  const Config c;
  CHECK(c.get<int64_t>("batch_size") == 128);
  CHECK_FALSE(c.has("lr"));
  CHECK(c.get<double>("lr_base") == 0.1);
  CHECK(c.get<double>("warmup_lr") == 1e-5);
  CHECK(c.get<double>("smoothing") == 0.1);
  CHECK(c.get<std::vector<double>>("scale") == std::vector<double>{0.08, 1.0});
  CHECK(c.get<std::vector<double>>("ratio") == std::vector<double>{0.75, 1.3333333333333333});
  CHECK(c.get<double>("hflip") == 0.5);
  CHECK(c.get<double>("color_jitter") == 0.4);
  CHECK(c.get<int64_t>("workers") == 4);
  CHECK(c.get<int64_t>("epochs") == 300);
  CHECK(c.get<std::string>("sched") == "cosine");
  CHECK(c.get<std::string>("opt") == "sgd");
  CHECK(c.get<double>("weight_decay") == 2e-5);
  CHECK(c.get<double>("momentum") == 0.9);
  CHECK(c.get<std::string>("model") == "resnet50");
  CHECK(c.get<int64_t>("seed") == 42);
  CHECK(c.get<std::string>("dist_bn") == "reduce");
  CHECK(c.get<std::string>("mixup_mode") == "batch");
  CHECK(c.get<std::vector<int64_t>>("decay_milestones") == std::vector<int64_t>{90, 180, 270});
  CHECK(c.get<double>("decay_epochs") == 90.0);
  CHECK(c.get<int64_t>("warmup_epochs") == 5);
  CHECK(c.get<double>("min_lr") == 0.0);
  CHECK(c.get<bool>("amp") == false);
  CHECK(c.get<std::string>("dataset").empty());
  CHECK(c.get<std::vector<std::string>>("wandb_tags").empty());
  CHECK(c.get_kwargs("model_kwargs").empty());
  CHECK_FALSE(c.has("torchcompile"));
  CHECK(c.get<int64_t>("dist_timeout") == 1800);
  CHECK_FALSE(c.is_explicit("batch_size"));
  CHECK_NOTHROW(timm::check_implemented(c));
}

TEST_CASE("the flag table covers timm's groups and derives dests") {
  const auto* flag = timm::find_flag("validation-batch-size");
  REQUIRE(flag != nullptr);
  CHECK(flag->dest == "validation_batch_size");
  CHECK(flag->short_name == "vb");
  CHECK(timm::find_flag("dr") == timm::find_flag("decay_rate"));
  CHECK(timm::find_flag("train-steps-per-epoch")->dest == "train_batches_per_epoch");
  CHECK(timm::find_flag("input_size")->nargs == 3);
  CHECK(timm::find_flag("local_rank") != nullptr);
  CHECK(timm::find_flag("nope") == nullptr);
  for (const char* name : {"kd-model-name", "naflex-loader", "train-size-schedule", "log-wandb",
                           "dataset-trust-remote-code", "torchcompile-mode"}) {
    CHECK_MESSAGE(timm::find_flag(name) != nullptr, name);
  }
  CHECK(timm::train_flags().front().name == "data");
  CHECK(timm::train_flags().back().group == "timm-cpp");
}

TEST_CASE("the EfficientNet-B2 documented line parses") {
  CommandLine cli =
      parse(split("--data-dir /imagenet/ --model efficientnet_b2 -b 128 --sched step --epochs 450 "
                  "--decay-epochs 2.4 --decay-rate .97 --opt rmsproptf --opt-eps .001 -j 8 --warmup-lr 1e-6 "
                  "--weight-decay 1e-5 --drop 0.3 --drop-path 0.2 --model-ema --model-ema-decay 0.9999 "
                  "--aa rand-m9-mstd0.5 --remode pixel --reprob 0.2 --amp --lr .016"));
  const Config& c = cli.config;
  CHECK(cli.action == Action::kTrain);
  CHECK(c.get<std::string>("data_dir") == "/imagenet/");
  CHECK(c.get<std::string>("model") == "efficientnet_b2");
  CHECK(c.get<double>("decay_epochs") == 2.4);
  CHECK(c.get<double>("decay_rate") == 0.97);
  CHECK(c.get<double>("opt_eps") == 0.001);
  CHECK(c.get<int64_t>("workers") == 8);
  CHECK(c.get<double>("lr") == 0.016);
  CHECK(c.get<std::string>("aa") == "rand-m9-mstd0.5");
  CHECK(c.get<bool>("model_ema"));
  CHECK(c.is_explicit("remode"));
  // Every feature of the line is implemented (--amp, --model-ema, --aa, ...).
  CHECK(implemented_error(c).empty());
}

TEST_CASE("the ResNet50 JSD documented line parses, --jsd abbreviating --jsd-loss") {
  CommandLine cli =
      parse(split("--data-dir /imagenet -b 64 --model resnet50 --sched cosine --epochs 200 --lr 0.05 --amp "
                  "--remode pixel --reprob 0.6 --aug-splits 3 --aa rand-m9-mstd0.5-inc1 --resplit "
                  "--split-bn --jsd --dist-bn reduce"));
  const Config& c = cli.config;
  CHECK(c.get<int64_t>("batch_size") == 64);
  CHECK(c.get<int64_t>("aug_splits") == 3);
  CHECK(c.get<bool>("jsd_loss"));
  CHECK(c.get<bool>("split_bn"));
  CHECK(c.get<double>("reprob") == 0.6);
  CHECK_FALSE(contains(implemented_error(c), "--split-bn"));    // implemented (distributed runtime)
  CHECK_FALSE(contains(implemented_error(c), "--aug-splits"));  // implemented
}

TEST_CASE("the SE-ResNet34 documented line parses") {
  CommandLine cli =
      parse(split("--data-dir /data/imagenet --model seresnet34 --sched cosine --epochs 150 "
                  "--warmup-epochs 5 --lr 0.4 --reprob 0.5 --remode pixel --batch-size 256 --amp -j 4"));
  const Config& c = cli.config;
  CHECK(c.get<std::string>("model") == "seresnet34");
  CHECK(c.get<int64_t>("epochs") == 150);
  CHECK(c.get<double>("lr") == 0.4);
  CHECK(c.get<int64_t>("batch_size") == 256);
  CHECK(implemented_error(c).empty());
}

TEST_CASE("long flags may be abbreviated to a unique prefix") {
  CHECK(parse({"--warmup-e", "3"}).config.get<int64_t>("warmup_epochs") == 3);
  CHECK(parse({"--lr", "0.5"}).config.get<double>("lr") == 0.5);  // exact beats --lr-base
  CHECK_FALSE(parse({"--lr", "0.5"}).config.is_explicit("lr_base"));
  CHECK(parse({"--dr", "0.5"}).config.get<double>("decay_rate") == 0.5);
  CHECK(parse({"--warmup-e=7"}).config.get<int64_t>("warmup_epochs") == 7);
  std::string error = parse_error({"--lr-c", "2"});
  CHECK(contains(error, "ambiguous option '--lr-c'"));
  CHECK(contains(error, "--lr-cycle-mul"));
  CHECK(contains(error, "--lr-cycle-decay"));
  CHECK(contains(error, "--lr-cycle-limit"));
}

TEST_CASE("short flags and attached values") {
  CHECK(parse({"-vb", "64"}).config.get<int64_t>("validation_batch_size") == 64);
  CHECK(parse({"-vb=32"}).config.get<int64_t>("validation_batch_size") == 32);
  CHECK(parse({"--batch-size=64"}).config.get<int64_t>("batch_size") == 64);
  CHECK(parse({"-b128"}).config.get<int64_t>("batch_size") == 128);
  CHECK(parse({"-j", "8"}).config.get<int64_t>("workers") == 8);
  CHECK(parse({"--lr", "-1e-3"}).config.get<double>("lr") == -1e-3);  // a number, not a flag
  CHECK(parse({"--local_rank", "3"}).config.get<int64_t>("local_rank") == 3);
  CHECK(contains(parse_error({"--amp=1"}), "--amp takes no value"));
  CHECK(parse_error(std::vector<std::string>(10'001, "--amp")) ==
        "the command line has 10001 words; expected at most 10000 (a long configuration belongs in a --config file)");
  CHECK(parse(std::vector<std::string>(10'000, "--amp")).config.get<bool>("amp"));
  CHECK(contains(parse_error({"-b"}), "--batch-size expects a value"));
}

TEST_CASE("list flags take their values; --input-size takes exactly three") {
  Config c = parse({"--input-size", "3", "32", "32", "--mean", "0.5", "0.5", "0.5", "--lr-noise", "0.42", "0.9",
                    "--decay-milestones", "30", "60"})
                 .config;
  CHECK(c.get<std::vector<int64_t>>("input_size") == std::vector<int64_t>{3, 32, 32});
  CHECK(c.get<std::vector<double>>("mean") == std::vector<double>{0.5, 0.5, 0.5});
  CHECK(c.get<std::vector<double>>("lr_noise") == std::vector<double>{0.42, 0.9});
  CHECK(c.get<std::vector<int64_t>>("decay_milestones") == std::vector<int64_t>{30, 60});
  std::string error = parse_error({"--input-size", "3", "32", "--amp"});
  CHECK(contains(error, "--input-size expects 3 integer values, got 2"));
  CHECK(contains(parse_error({"--scale"}), "--scale expects one or more number values"));
  CHECK(contains(parse_error({"--input-size", "3", "x", "32"}), "'x'"));
}

TEST_CASE("an unknown flag is named, with the nearest flags") {
  std::string error = parse_error({"--bach-size", "3"});
  CHECK(contains(error, "unrecognized option '--bach-size'"));
  CHECK(contains(error, "--batch-size"));
  CHECK(contains(parse_error({"--warmup-lrr=3"}), "'--warmup-lrr'"));
}

TEST_CASE("a bad value names the flag, the value and the expected type") {
  CHECK(parse_error({"-b", "abc"}) == "invalid value 'abc' for --batch-size: expected an integer");
  CHECK(parse_error({"--hflip", "x"}) == "invalid value 'x' for --hflip: expected a number");
  CHECK(contains(parse_error({"--kd-distill-type", "x"}), "one of logit feature token"));
  CHECK(contains(parse_error({"--model-kwargs", "novalue"}), "expected key=value"));
  CHECK(contains(parse_error({"a", "b"}), "unrecognized argument 'b'"));
  CHECK(contains(parse_error({"--torchscript", "--torchcompile"}), "cannot be combined"));
}

TEST_CASE("optional-value flags, kwargs and the positional data path") {
  CHECK(parse({"--torchcompile"}).config.get<std::string>("torchcompile") == "inductor");
  CHECK(parse({"--torchcompile", "eager"}).config.get<std::string>("torchcompile") == "eager");
  CHECK(parse({"--torchcompile", "--amp"}).config.get<std::string>("torchcompile") == "inductor");
  auto kwargs = parse({"--model-kwargs", "a=1", "b=x", "--amp"}).config.get_kwargs("model_kwargs");
  CHECK(kwargs == std::map<std::string, std::string>{{"a", "1"}, {"b", "x"}});
  Config c = parse({"/data/imagenet", "--amp"}).config;
  CHECK(c.get<std::string>("data") == "/data/imagenet");
  CHECK(c.get<std::string>("data_dir") == "/data/imagenet");
  c = parse({"/old", "--data-dir", "/new"}).config;
  CHECK(c.get<std::string>("data_dir") == "/new");
}

TEST_CASE("argparse's reading of values, repeats, positionals and -h") {
  // A flag is never taken as a value; a missing value is counted.
  CHECK(parse_error({"--model", "--amp"}) == "--model expects a value (string), got 0");
  CHECK(contains(parse_error({"--input-size", "--amp"}), "expects 3 integer values, got 0"));
  // Negative numbers are values, also inside a list.
  CHECK(parse({"--mean", "-0.5", "0", "-1e-3"}).config.get<std::vector<double>>("mean") ==
        std::vector<double>{-0.5, 0.0, -1e-3});
  // A fixed count takes no more; the rest is the positional data path.
  Config c = parse({"--input-size", "3", "32", "32", "/data"}).config;
  CHECK(c.get<std::vector<int64_t>>("input_size") == std::vector<int64_t>{3, 32, 32});
  CHECK(c.get<std::string>("data") == "/data");
  // An attached value is a list flag's only value.
  c = parse({"--scale=0.5", "/data"}).config;
  CHECK(c.get<std::vector<double>>("scale") == std::vector<double>{0.5});
  CHECK(c.get<std::string>("data") == "/data");
  CHECK(contains(parse_error({"--input-size=3", "32", "32"}), "expects 3 integer values, got 1"));
  // The last occurrence wins; an empty attached value is a value.
  CHECK(parse({"-b", "32", "--batch-size", "64"}).config.get<int64_t>("batch_size") == 64);
  CHECK(parse({"--dataset=", "--amp"}).config.is_explicit("dataset"));
  // Short spellings: "-b=96", "-v" for "-vb", "-j8".
  CHECK(parse({"-b=96"}).config.get<int64_t>("batch_size") == 96);
  CHECK(parse({"-v", "16"}).config.get<int64_t>("validation_batch_size") == 16);
  CHECK(parse({"-j8"}).config.get<int64_t>("workers") == 8);
  CHECK(contains(parse_error({"-h1"}), "--help takes no value, got '1'"));
  // `data` is positional only: "--data" abbreviates several flags.
  CHECK(contains(parse_error({"--data", "x"}), "ambiguous option '--data' could match --data-dir"));
  CHECK(parse({"--", "-x"}).config.get<std::string>("data") == "-x");
  // Nothing after -h is parsed.
  CHECK(parse({"--amp", "-h", "--bogus"}).action == Action::kHelp);
  CHECK(parse({"--hel"}).action == Action::kHelp);
  CHECK(contains(parse_error({"-x"}), "unrecognized option '-x'"));
}

TEST_CASE("timm-cpp's own flags") {
  CommandLine cli = parse({"--plugin-dir", "a", "--plugin-dir", "b"});
  CHECK(cli.plugin_dirs == std::vector<std::string>{"a", "b"});
  cli = parse({"--list-models", "resnet*"});
  CHECK(cli.action == Action::kListModels);
  CHECK(cli.list_pattern == "resnet*");
  cli = parse({"--list-models"});
  CHECK(cli.action == Action::kListModels);
  CHECK(cli.list_pattern == "*");
  CHECK(parse({"--list-optimizers", "adam*"}).action == Action::kListOptimizers);
  CHECK(parse({"--list-schedulers"}).action == Action::kListSchedulers);
  CHECK(parse({"--list-augmentations"}).action == Action::kListAugmentations);
  CHECK(parse({"--list-plugins"}).action == Action::kListPlugins);
  cli = parse({"--amp", "-h"});
  CHECK(cli.action == Action::kHelp);
  CHECK(contains(cli.help_text, "Dataset parameters:"));
  CHECK(contains(cli.help_text, "-b, --batch-size N"));
  CHECK(contains(cli.help_text, "--decay-rate, --dr RATE"));
  CHECK(contains(cli.help_text, "--amp"));
  CHECK(contains(cli.help_text, "[not implemented]"));
  CHECK(contains(cli.help_text, "[not supported]"));
  Config c = parse({"--dist-backend", "gloo", "--dist-timeout", "60"}).config;
  CHECK(implemented_error(c).empty());  // the distributed runtime's own flags are implemented
  CHECK(c.get<std::string>("dist_backend") == "gloo");
  CHECK(c.get<int64_t>("dist_timeout") == 60);
  // The train loader's JPEG DCT scaling: a switch, off by default.
  c = parse({"--jpeg-dct-scale"}).config;
  CHECK(implemented_error(c).empty());
  CHECK(c.get<bool>("jpeg_dct_scale"));
  CHECK_FALSE(parse({}).config.get<bool>("jpeg_dct_scale"));
  CHECK(contains(cli.help_text, "--jpeg-dct-scale"));
}

TEST_CASE("Config rejects unknown dests and wrong types") {
  Config c;
  CHECK_THROWS_AS(c.value("nope"), timm::Error);
  CHECK_THROWS_AS(c.set("nope", int64_t{1}), timm::Error);
  CHECK_THROWS_AS(c.set("plugin_dir", std::string("x")), timm::Error);
  CHECK_THROWS_AS(c.set("batch_size", std::string("x")), timm::Error);
  CHECK_THROWS_AS(c.get<std::string>("batch_size"), timm::Error);
  CHECK_THROWS_AS(c.get<double>("lr"), timm::Error);  // None
  c.set("lr", int64_t{2});                            // an int for a float flag converts
  CHECK(std::holds_alternative<double>(c.value("lr")));
  CHECK_FALSE(c.is_explicit("lr"));
  CHECK(c.get_optional<double>("lr") == 2.0);
  CHECK(c.get<double>("batch_size") == 128.0);
}

TEST_CASE("to_toml reads back as the same Config") {
  timm::test::TempDir dir;
  CommandLine cli =
      parse(split("--model efficientnet_b2 -b 64 --lr .016 --input-size 3 32 32 --mean 0.5 0.25 0.125 "
                  "--model-kwargs drop_rate=0.3 act_layer=silu --torchcompile --wandb-tags a b "
                  "--warmup-lr 1e-6 --amp /data --kd-distill-type token --decay-epochs 90"));
  cli.config.set("class_map", std::string("quote\" back\\slash\ttab"));
  std::string text = cli.config.to_toml();
  CHECK(contains(text, "batch_size = 64\n"));
  CHECK(contains(text, "# num_classes = None\n"));
  CHECK(contains(text, "model_kwargs = { act_layer = \"silu\", drop_rate = \"0.3\" }\n"));
  CHECK(contains(text, "decay_epochs = 90.0\n"));
  CHECK_FALSE(contains(text, "plugin_dir"));
  CHECK_FALSE(contains(text, "list_models"));
  CHECK_FALSE(contains(text, "config ="));
  std::string path = write_file(dir, "args.toml", text);
  Config again = parse({"--config", path}).config;
  CHECK(again == cli.config);
  CHECK(again.to_toml() == text);
  CHECK(again.is_explicit("batch_size"));
  CHECK(Config() != cli.config);
}

TEST_CASE("the config file gives defaults that the command line overrides") {
  timm::test::TempDir dir;
  std::string path = write_file(dir, "c.toml",
                                "batch-size = 32\n"
                                "lr = 1\n"  // an int for a float flag
                                "model = \"resnet18\"\n"
                                "model-kwargs = { output_stride = 16, act = \"silu\" }\n"
                                "scale = [0.5, 1]\n");
  Config c = parse({"-c", path, "-b", "16"}).config;
  CHECK(c.get<int64_t>("batch_size") == 16);
  CHECK(c.get<double>("lr") == 1.0);
  CHECK(c.get<std::string>("model") == "resnet18");
  CHECK(c.get_kwargs("model_kwargs").at("output_stride") == "16");
  CHECK(c.get<std::vector<double>>("scale") == std::vector<double>{0.5, 1.0});
  CHECK(c.is_explicit("model"));
  CHECK_FALSE(c.is_explicit("epochs"));
  CHECK(parse({"--config", path}).config_file == path);
}

TEST_CASE("config file errors name the file, the key and the line") {
  timm::test::TempDir dir;
  std::string unknown = write_file(dir, "unknown.toml", "model = \"x\"\n\nbatch_sise = 3\n");
  std::string error = parse_error({"--config", unknown});
  CHECK(contains(error, unknown + ":3:"));
  CHECK(contains(error, "unknown key 'batch_sise'"));
  CHECK(contains(error, "batch_size"));

  std::string wrong = write_file(dir, "wrong.toml", "epochs = \"many\"\n");
  error = parse_error({"--config", wrong});
  CHECK(contains(error, wrong + ":1:"));
  CHECK(contains(error, "key 'epochs' expects an integer, got a string"));

  std::string arity = write_file(dir, "arity.toml", "input_size = [3, 32]\n");
  CHECK(contains(parse_error({"--config", arity}), "expects 3 values, got 2"));

  std::string syntax = write_file(dir, "syntax.toml", "a = 1\nlr = = 2\n");
  error = parse_error({"--config", syntax});
  CHECK(contains(error, syntax + ":2:"));
  CHECK(contains(error, "invalid TOML"));

  std::string twice = write_file(dir, "twice.toml", "lr = 1.0\nlr-base = 2\nbatch_size = 1\nbatch-size = 2\n");
  CHECK(contains(parse_error({"--config", twice}), "sets the same value as"));

  std::string action = write_file(dir, "action.toml", "plugin-dir = \"x\"\n");
  CHECK(contains(parse_error({"--config", action}), "not a config value"));

  CHECK(contains(parse_error({"--config", (dir / "missing.toml").string()}), "does not exist"));
}
