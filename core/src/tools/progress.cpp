#include "timm/tools/progress.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdio>

#include "timm/log/log.hpp"

namespace timm {

Progress::Progress(std::string label, int64_t total, int64_t log_freq)
    : Progress(std::move(label), total, log_freq, shows_progress(STDERR_FILENO)) {}

Progress::Progress(std::string label, int64_t total, int64_t log_freq, bool terminal)
    : label_(std::move(label)),
      total_(std::max<int64_t>(total, 1)),
      log_freq_(std::max<int64_t>(log_freq, 1)),
      terminal_(terminal) {}

Progress::~Progress() { finish(); }

std::string Progress::render_bar(int64_t done, int64_t total, int width) {
  total = std::max<int64_t>(total, 1);
  done = std::clamp<int64_t>(done, 0, total);
  const auto filled = static_cast<int>(done * width / total);
  std::string bar = "[";
  bar.append(filled, '#');
  bar.append(width - filled, '.');
  bar += ']';
  return bar;
}

void Progress::step(int64_t index, const std::string& status, const std::string& line) {
  const bool last = index + 1 >= total_;
  if (!terminal_) {
    if (index % log_freq_ == 0 || last) log_info(line);
    return;
  }
  const double elapsed = watch_.seconds();
  const int64_t done = index + 1;
  const double eta = done > 0 ? elapsed / done * static_cast<double>(total_ - done) : 0.0;
  std::fprintf(stderr, "\r%s %s %lld/%lld  %s  %.0fs elapsed, ~%.0fs left\033[K", label_.c_str(),
               render_bar(done, total_, 30).c_str(), static_cast<long long>(done), static_cast<long long>(total_),
               status.c_str(), elapsed, eta);
  std::fflush(stderr);
  open_ = true;
}

void Progress::finish() {
  if (open_) {
    std::fputc('\n', stderr);
    std::fflush(stderr);
    open_ = false;
  }
}

}  // namespace timm
