// Rank-aware logging in timm's layout.
//
// Info lines are printed bare, other levels as "WARNING: message", as timm's
// FormatterNoInfo does. Only the primary rank prints info lines unless
// `all_ranks` is set; warnings and errors are printed by every rank, prefixed
// with "[rank N] " when the world has more than one process.
//
// Messages are plain strings; format them with timm::format(), which takes
// printf specs (Python's "{:#.3g}" is "%#.3g").
#pragma once

#include <string>

namespace timm {

// Call once at start-up and again once the rank is known.
void setup_logging(int rank = 0, int world_size = 1);

void log_info(const std::string& message);
void log_info_all_ranks(const std::string& message);
void log_warning(const std::string& message);
void log_error(const std::string& message);

// A status line redrawn in place on stdout by the primary rank: a carriage
// return, `line`, and a clear to the end of the line, without a newline. The
// next info line, warning or error, or log_status_end(), first ends it with a
// newline. Keep `line` shorter than a terminal's 80 columns: a wrapped line
// is not redrawn in place.
void log_status(const std::string& line);
void log_status_end();

// Whether output to the file descriptor `fd` (STDOUT_FILENO, STDERR_FILENO)
// shows progress redrawn in place rather than periodic log lines: when `fd`
// is a terminal, unless TIMM_PROGRESS=0 in the environment (plain log lines);
// TIMM_PROGRESS=1 forces progress. The training loop's status line (stdout)
// and the tools' progress bars (stderr) both ask it.
bool shows_progress(int fd);

// Whether this process shows status lines on stdout instead of periodic log
// lines: shows_progress(STDOUT_FILENO).
bool log_status_enabled();

// printf-style formatting into a std::string.
std::string format(const char* spec, ...) __attribute__((format(printf, 1, 2)));

}  // namespace timm
