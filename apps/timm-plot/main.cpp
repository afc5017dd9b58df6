// timm-plot: renders a run's summary.csv (loss, accuracy and lr per epoch)
// into an SVG picture.
//
//   timm-plot output/train/run/summary.csv run.svg

#include "timm/base/app_main.hpp"
#include "timm/base/error.hpp"
#include "timm/log/log.hpp"
#include "timm/tools/tool_args.hpp"
#include "timm/train/plot.hpp"

namespace {

int run(int argc, char** argv) {
  timm::ToolArgs args("timm-plot", "Renders loss, accuracy and lr curves of a summary.csv into an SVG file.");
  args.add_positional("SUMMARY.csv", "timm's summary.csv (epoch,train_loss,eval_loss,eval_top1,eval_top5,lr)");
  args.add_positional("OUT.svg", "the SVG file to write");
  if (!args.parse_or_print_help(argc, argv)) return 0;
  timm::plot_summary(args.get("SUMMARY.csv"), args.get("OUT.svg"));
  timm::log_info("Wrote " + args.get("OUT.svg"));
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return timm::run_app("timm-plot", argc, argv, run); }
