#include "timm/train/plot.hpp"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>
#include <sstream>

#include "timm/base/error.hpp"
#include "timm/base/python_repr.hpp"
#include "timm/io/atomic_file.hpp"
#include "timm/log/log.hpp"

namespace timm {
namespace {

constexpr double kWidth = 720, kPanelHeight = 240, kLeft = 80, kRight = 160, kTop = 30, kBottom = 40;
const char* const kColors[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e"};

std::vector<std::string> split_csv_line(std::string line) {
  if (!line.empty() && line.back() == '\r') line.pop_back();
  std::vector<std::string> cells;
  std::stringstream in(line);
  std::string cell;
  while (std::getline(in, cell, ',')) cells.push_back(cell);
  if (!line.empty() && line.back() == ',') cells.emplace_back();
  return cells;
}

std::string escape_xml(const std::string& text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

struct Range {
  double lo = std::numeric_limits<double>::infinity();
  double hi = -std::numeric_limits<double>::infinity();
  void add(double v) {
    if (std::isnan(v)) return;
    lo = std::min(lo, v);
    hi = std::max(hi, v);
  }
  bool valid() const { return lo <= hi; }
  // A degenerate range is widened so the mapping stays defined.
  Range padded() const {
    Range r = *this;
    if (r.hi == r.lo) {
      const double pad = r.lo == 0.0 ? 1.0 : std::abs(r.lo) * 0.05;
      r.lo -= pad;
      r.hi += pad;
    }
    return r;
  }
};

std::string num(double v) { return format("%.3f", v); }
std::string label(double v) { return format("%.4g", v); }

struct Panel {
  std::string title;
  std::vector<std::string> series;
};

void render_panel(std::ostringstream& svg, const SummaryTable& table, const Panel& panel, double top) {
  const std::vector<double> epochs = table.column("epoch");
  Range xr, yr;
  for (double e : epochs) xr.add(e);
  std::vector<std::string> present;
  for (const auto& name : panel.series) {
    if (!table.has(name)) continue;
    present.push_back(name);
    for (double v : table.column(name)) yr.add(v);
  }
  if (present.empty() || !yr.valid() || !xr.valid()) return;
  xr = xr.padded();
  yr = yr.padded();
  const double w = kWidth - kLeft - kRight, h = kPanelHeight - kTop - kBottom;
  const double left = kLeft, plot_top = top + kTop;
  auto px = [&](double x) { return left + (x - xr.lo) / (xr.hi - xr.lo) * w; };
  auto py = [&](double y) { return plot_top + h - (y - yr.lo) / (yr.hi - yr.lo) * h; };
  svg << "<g class=\"panel\" data-title=\"" << escape_xml(panel.title) << "\" data-area=\"" << num(left) << " "
      << num(plot_top) << " " << num(w) << " " << num(h) << "\">\n";
  svg << "<text x=\"" << num(left) << "\" y=\"" << num(top + 20) << "\" font-size=\"14\" font-weight=\"bold\">"
      << escape_xml(panel.title) << "</text>\n";
  svg << "<rect x=\"" << num(left) << "\" y=\"" << num(plot_top) << "\" width=\"" << num(w) << "\" height=\"" << num(h)
      << "\" fill=\"none\" stroke=\"#888\"/>\n";
  for (int t = 0; t <= 4; ++t) {  // y grid and labels
    const double v = yr.lo + (yr.hi - yr.lo) * t / 4.0;
    svg << "<line x1=\"" << num(left) << "\" x2=\"" << num(left + w) << "\" y1=\"" << num(py(v)) << "\" y2=\""
        << num(py(v)) << "\" stroke=\"#eee\"/>\n";
    svg << "<text x=\"" << num(left - 6) << "\" y=\"" << num(py(v) + 4) << "\" font-size=\"11\" text-anchor=\"end\">"
        << label(v) << "</text>\n";
  }
  for (int t = 0; t <= 4; ++t) {  // x labels
    const double v = xr.lo + (xr.hi - xr.lo) * t / 4.0;
    svg << "<text x=\"" << num(px(v)) << "\" y=\"" << num(plot_top + h + 16) << "\" font-size=\"11\" "
        << "text-anchor=\"middle\">" << label(v) << "</text>\n";
  }
  svg << "<text x=\"" << num(left + w / 2) << "\" y=\"" << num(plot_top + h + 32)
      << "\" font-size=\"12\" text-anchor=\"middle\">epoch</text>\n";
  for (std::size_t s = 0; s < present.size(); ++s) {
    const std::vector<double> values = table.column(present[s]);
    const char* color = kColors[s % 4];
    std::string points;
    for (std::size_t i = 0; i < values.size(); ++i) {
      if (std::isnan(values[i])) continue;
      if (!points.empty()) points += ' ';
      points += num(px(epochs[i]));
      points += ',';
      points += num(py(values[i]));
    }
    svg << "<polyline class=\"series\" data-series=\"" << escape_xml(present[s]) << "\" data-x-range=\""
        << python_float_repr(xr.lo) << " " << python_float_repr(xr.hi) << "\" data-y-range=\""
        << python_float_repr(yr.lo) << " " << python_float_repr(yr.hi) << "\" fill=\"none\" stroke=\"" << color
        << "\" stroke-width=\"2\" points=\"" << points << "\"/>\n";
    for (std::size_t i = 0; i < values.size(); ++i) {
      if (std::isnan(values[i])) continue;
      svg << "<circle cx=\"" << num(px(epochs[i])) << "\" cy=\"" << num(py(values[i])) << "\" r=\"3\" fill=\"" << color
          << "\"/>\n";
    }
    const double ly = plot_top + 14 + 18 * static_cast<double>(s);
    svg << "<line x1=\"" << num(left + w + 12) << "\" x2=\"" << num(left + w + 32) << "\" y1=\"" << num(ly - 4)
        << "\" y2=\"" << num(ly - 4) << "\" stroke=\"" << color << "\" stroke-width=\"2\"/>\n";
    svg << "<text x=\"" << num(left + w + 38) << "\" y=\"" << num(ly) << "\" font-size=\"12\">"
        << escape_xml(present[s]) << "</text>\n";
  }
  svg << "</g>\n";
}

}  // namespace

bool SummaryTable::has(const std::string& name) const {
  return std::find(columns.begin(), columns.end(), name) != columns.end();
}

std::vector<double> SummaryTable::column(const std::string& name) const {
  const auto it = std::find(columns.begin(), columns.end(), name);
  if (it == columns.end()) throw Error("summary table: no column " + in_quotes(name));
  const auto k = static_cast<std::size_t>(it - columns.begin());
  std::vector<double> out;
  for (const auto& row : rows) out.push_back(row[k]);
  return out;
}

SummaryTable read_summary_csv(const std::filesystem::path& file) {
  std::ifstream in(file);
  if (!in) throw Error("cannot open " + in_quotes(file.string()));
  SummaryTable table;
  std::string line;
  if (!std::getline(in, line)) throw Error(in_quotes(file.string()) + ": empty file, expected a CSV header");
  table.columns = split_csv_line(line);
  if (!table.has("epoch")) throw Error(in_quotes(file.string()) + ": no 'epoch' column in the header");
  for (int line_no = 2; std::getline(in, line); ++line_no) {
    if (line.empty() || line == "\r") continue;
    const auto cells = split_csv_line(line);
    if (cells.size() != table.columns.size()) {
      throw Error(format("%s line %d: %zu cells, expected %zu", in_quotes(file.string()).c_str(), line_no, cells.size(),
                         table.columns.size()));
    }
    std::vector<double> row;
    for (const auto& cell : cells) {
      if (cell.empty()) {
        row.push_back(std::numeric_limits<double>::quiet_NaN());
        continue;
      }
      try {
        std::size_t used = 0;
        row.push_back(std::stod(cell, &used));
        if (used != cell.size()) throw std::invalid_argument(cell);
      } catch (const std::exception&) {
        throw Error(format("%s line %d: %s is not a number", in_quotes(file.string()).c_str(), line_no,
                           in_quotes(cell).c_str()));
      }
    }
    table.rows.push_back(std::move(row));
  }
  return table;
}

std::string render_summary_svg(const SummaryTable& table, const std::string& title) {
  const std::vector<Panel> panels = {
      {"Loss", {"train_loss", "eval_loss"}}, {"Accuracy (%)", {"eval_top1", "eval_top5"}}, {"Learning rate", {"lr"}}};
  const double height = kPanelHeight * static_cast<double>(panels.size()) + 30;
  std::ostringstream svg;
  svg << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
      << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << num(kWidth) << "\" height=\"" << num(height)
      << "\" viewBox=\"0 0 " << num(kWidth) << " " << num(height) << "\" font-family=\"sans-serif\">\n"
      << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
      << "<text x=\"" << num(kWidth / 2) << "\" y=\"20\" font-size=\"15\" text-anchor=\"middle\">"
      << escape_xml(title.empty() ? "Training summary" : title) << "</text>\n";
  for (std::size_t p = 0; p < panels.size(); ++p) {
    render_panel(svg, table, panels[p], 30 + kPanelHeight * static_cast<double>(p));
  }
  svg << "</svg>\n";
  return svg.str();
}

void plot_summary(const std::filesystem::path& summary_csv, const std::filesystem::path& out_svg) {
  const SummaryTable table = read_summary_csv(summary_csv);
  write_file_atomically(out_svg, render_summary_svg(table, summary_csv.parent_path().filename().string()));
}

}  // namespace timm
