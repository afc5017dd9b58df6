// Progress of a long loop (timm-validate, timm-infer): a bar redrawn in place
// when stderr is a terminal, else the caller's plain log lines every
// `log_freq` steps and at the last step, as timm's scripts print them.
#pragma once

#include <cstdint>
#include <string>

#include "timm/base/stopwatch.hpp"

namespace timm {

class Progress {
 public:
  // `total` steps; `log_freq` >= 1. `terminal` defaults to isatty(stderr);
  // TIMM_PROGRESS=0 / 1 in the environment forces plain lines / the bar.
  Progress(std::string label, int64_t total, int64_t log_freq);
  Progress(std::string label, int64_t total, int64_t log_freq, bool terminal);
  ~Progress();

  // Step `index` (0-based) is done. `status` is a short summary for the bar
  // ("Acc@1 91.2"); `line` is the full log line printed in plain mode.
  void step(int64_t index, const std::string& status, const std::string& line);
  // Ends the bar's line (no-op in plain mode); called by the destructor too.
  void finish();

  bool terminal() const { return terminal_; }

  // The bar's text for `done` of `total` steps, `width` cells wide.
  static std::string render_bar(int64_t done, int64_t total, int width);

 private:
  std::string label_;
  int64_t total_;
  int64_t log_freq_;
  bool terminal_;
  bool open_ = false;
  Stopwatch watch_;
};

}  // namespace timm
