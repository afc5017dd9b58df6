// The only translation unit that includes spdlog (see core/CMakeLists.txt).
#include <unistd.h>

#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <vector>

#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include "timm/log/log.hpp"

namespace timm {
namespace {

struct LogState {
  int rank = 0;
  int world_size = 1;
  std::shared_ptr<spdlog::logger> out;
  std::mutex status_mutex;
  bool status_open = false;  // a status line without its newline is on stdout
};

LogState& state() {
  static LogState* s = [] {
    auto* created = new LogState();
    // timm's console handler writes to stderr; we keep info on stdout so the
    // train and eval lines can be piped, and warnings on stderr.
    created->out = std::make_shared<spdlog::logger>("timm", std::make_shared<spdlog::sinks::stdout_sink_mt>());
    created->out->set_pattern("%v");
    created->out->flush_on(spdlog::level::info);
    return created;
  }();
  return *s;
}

std::shared_ptr<spdlog::logger> error_logger() {
  static auto* logger = new std::shared_ptr<spdlog::logger>(
      std::make_shared<spdlog::logger>("timm-err", std::make_shared<spdlog::sinks::stderr_sink_mt>()));
  (*logger)->set_pattern("%v");
  return *logger;
}

std::string rank_prefix() {
  const LogState& s = state();
  return s.world_size > 1 ? "[rank " + std::to_string(s.rank) + "] " : "";
}

// Ends an open status line, so that the next line starts on its own.
void end_status() {
  LogState& s = state();
  const std::lock_guard<std::mutex> lock(s.status_mutex);
  if (!s.status_open) return;
  std::fputc('\n', stdout);
  std::fflush(stdout);
  s.status_open = false;
}

}  // namespace

void setup_logging(int rank, int world_size) {
  state().rank = rank;
  state().world_size = world_size;
}

void log_info(const std::string& message) {
  if (state().rank != 0) return;
  end_status();
  state().out->info(message);
}

void log_info_all_ranks(const std::string& message) {
  end_status();
  state().out->info(rank_prefix() + message);
}

void log_warning(const std::string& message) {
  end_status();
  error_logger()->warn(rank_prefix() + "WARNING: " + message);
}

void log_error(const std::string& message) {
  end_status();
  error_logger()->error(rank_prefix() + "ERROR: " + message);
}

void log_status(const std::string& line) {
  LogState& s = state();
  if (s.rank != 0) return;
  const std::lock_guard<std::mutex> lock(s.status_mutex);
  std::fprintf(stdout, "\r%s\033[K", line.c_str());
  std::fflush(stdout);
  s.status_open = true;
}

void log_status_end() { end_status(); }

bool shows_progress(int fd) {
  if (const char* forced = std::getenv("TIMM_PROGRESS"); forced != nullptr && *forced != '\0') {
    return std::strcmp(forced, "0") != 0;
  }
  return isatty(fd) != 0;
}

bool log_status_enabled() { return shows_progress(STDOUT_FILENO); }

std::string format(const char* spec, ...) {
  va_list args;
  va_start(args, spec);
  va_list copy;
  va_copy(copy, args);
  const int size = std::vsnprintf(nullptr, 0, spec, copy);
  va_end(copy);
  std::string out(size > 0 ? static_cast<std::size_t>(size) : 0, '\0');
  if (size > 0) std::vsnprintf(out.data(), out.size() + 1, spec, args);
  va_end(args);
  return out;
}

}  // namespace timm
