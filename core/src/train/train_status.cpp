#include "timm/train/train_status.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace timm {

std::string format_eta(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  const auto total = static_cast<long long>(std::llround(seconds));
  const long long hours = total / 3600, minutes = total / 60 % 60, secs = total % 60;
  char text[48];
  if (hours > 0) {
    std::snprintf(text, sizeof(text), "%lld:%02lld:%02lld", hours, minutes, secs);
  } else {
    std::snprintf(text, sizeof(text), "%lld:%02lld", minutes, secs);
  }
  return text;
}

std::string format_train_status(const TrainStatus& s) {
  const int64_t updates = std::max<int64_t>(s.updates, 1);
  const int64_t done = std::clamp<int64_t>(s.update_idx + 1, 1, updates);
  const double eta = s.epoch_seconds / static_cast<double>(done) * static_cast<double>(updates - done);
  const int width = static_cast<int>(std::to_string(updates).size());
  char text[256];
  std::snprintf(text, sizeof(text), "Train: %lld [%*lld/%lld %3.0f%%]  Loss: %#.3g (%#.3g)  %.1f img/s  ETA %s",
                static_cast<long long>(s.epoch), width, static_cast<long long>(s.update_idx),
                static_cast<long long>(updates), 100.0 * static_cast<double>(done) / static_cast<double>(updates),
                s.loss, s.loss_avg, s.images_per_second, format_eta(eta).c_str());
  return text;
}

}  // namespace timm
