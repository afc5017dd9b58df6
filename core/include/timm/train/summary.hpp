// The output folder and summary.csv, in timm's layout.
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace timm {

// timm's safe_model_name: alphanumerics kept, everything else '_', trailing
// '_' stripped.
std::string safe_model_name(const std::string& model_name);

// The experiment folder: <output or ./output/train>/<experiment>, where the
// experiment defaults to "YYYYmmdd-HHMMSS-<model>-<img size>"; created if
// missing.
std::filesystem::path make_output_dir(const std::string& output, const std::string& experiment,
                                      const std::string& model_name, int64_t img_size);

// Writes epoch `epoch`'s row of summary.csv with timm's columns (epoch,
// train_*, eval_*, lr), atomically. Rows of earlier epochs under the same
// header are kept: a resumed run continues its file (timm appends a second
// header there, and timm-cpp used to start the file afresh). Rows of this
// epoch or later ones are dropped: an epoch trained again after a restart
// replaces its row. A file with other columns is replaced.
void update_summary(const std::filesystem::path& csv_path, int64_t epoch,
                    const std::vector<std::pair<std::string, double>>& train_metrics,
                    const std::vector<std::pair<std::string, double>>& eval_metrics, double lr);

}  // namespace timm
