// The training status line shown on a terminal instead of train.py's
// periodic "Train: ..." log lines (timm/log/log.hpp: log_status), redrawn
// after each optimizer update:
//
//   Train: 3 [ 120/468  26%]  Loss: 0.432 (0.501)  1234.5 img/s  ETA 1:23
#pragma once

#include <cstdint>
#include <string>

namespace timm {

struct TrainStatus {
  int64_t epoch = 0;
  int64_t update_idx = 0;  // 0-based, within the epoch
  int64_t updates = 0;     // per epoch
  double loss = 0.0;       // this update's
  double loss_avg = 0.0;   // the epoch's so far
  double images_per_second = 0.0;
  double epoch_seconds = 0.0;  // since the epoch began
};

// The line, at most about 80 columns for realistic figures. The ETA is the
// rest of the epoch at the epoch's mean pace so far.
std::string format_train_status(const TrainStatus& status);

// A duration as "M:SS", or "H:MM:SS" from an hour on; "?" when not finite or
// negative.
std::string format_eta(double seconds);

}  // namespace timm
