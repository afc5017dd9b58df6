// A picture of the run: loss, accuracy (top-1/top-5) and learning-rate curves
// from a summary.csv (timm's columns epoch,train_loss,eval_loss,eval_top1,
// eval_top5,lr) as a hand-written SVG, one panel per quantity, x = epoch.
//
// Each curve is a <polyline class="series" data-series="<column>"> whose
// data-x-range / data-y-range attributes give the data values mapped to the
// panel's plot area (data-area="left top width height" on its <g>), so the
// points can be read back; a single epoch is drawn as a dot.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace timm {

struct SummaryTable {
  std::vector<std::string> columns;       // as in the header
  std::vector<std::vector<double>> rows;  // one per epoch; NaN for an empty cell
  // The column's values (throws Error when there is no such column).
  std::vector<double> column(const std::string& name) const;
  bool has(const std::string& name) const;
};

// Parses summary.csv; throws Error naming the file and line on a bad cell.
SummaryTable read_summary_csv(const std::filesystem::path& file);

// The SVG document for the table.
std::string render_summary_svg(const SummaryTable& table, const std::string& title = "");

// read_summary_csv + render_summary_svg, written atomically to `out_svg`.
// What the trainer calls at the end of training:
//   plot_summary(output_dir / "summary.csv", output_dir / "summary.svg");
void plot_summary(const std::filesystem::path& summary_csv, const std::filesystem::path& out_svg);

}  // namespace timm
