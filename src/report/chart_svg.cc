#include "report/chart_svg.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "core/config.h"
#include "report/svg_util.h"

namespace infinipipe::report {

namespace {

constexpr int kChartLeft = 78, kChartRight = 16, kChartTitle = 26, kChartBottom = 44;
// A legend row under the title, and the width of a legend entry's text per character (11 px
// sans-serif, a little generous so an entry never runs into the next).
constexpr int kLegendRow = 16;
constexpr double kLegendCharWidth = 6.8;

std::string axis_text(double v, AxisFormat f) {
  switch (f) {
    case AxisFormat::seconds:
      return svg_format_seconds(v);
    case AxisFormat::bytes:
      return format_bytes(static_cast<int64_t>(std::llround(v)));
    case AxisFormat::number:
      break;
  }
  const double a = std::fabs(v);
  if (a >= 1e7 || (a != 0 && a < 1e-3)) return fmt::format("{:.3g}", v);
  if (a >= 1e3) return fmt::format("{:.0f}", v);
  return fmt::format("{:.4g}", v);
}

// Where each legend entry goes: left to right under the title, wrapping before the right edge,
// so no entry overlaps the title or leaves the picture however many series there are.
struct LegendEntry {
  double x = 0;
  int row = 0;
};
std::vector<LegendEntry> legend_layout(const std::vector<LineSeries>& series, int width) {
  std::vector<LegendEntry> out;
  double x = kChartLeft;
  int row = 0;
  for (const LineSeries& ls : series) {
    const double w = 24 + kLegendCharWidth * static_cast<double>(ls.label.size());
    if (x > kChartLeft && x + w > width - kChartRight) {
      x = kChartLeft;
      ++row;
    }
    out.push_back({x, row});
    x += w;
  }
  return out;
}

// The plotted ranges and the plot's box: the data's extent (finite points only), widened as the
// options ask, with a little room above; the box starts below the title and the legend's rows.
struct ChartFrame {
  double x0 = INFINITY, x1 = -INFINITY, y0 = INFINITY, y1 = -INFINITY;
  bool empty = false;  // no finite point at all
  double top = kChartTitle, pw = 0, ph = 0;
  int height = 0;  // the whole picture's

  double x(double v) const { return kChartLeft + (v - x0) / (x1 - x0) * pw; }
  double y(double v) const { return top + ph - (v - y0) / (y1 - y0) * ph; }
};

ChartFrame chart_frame(const std::vector<LineSeries>& series, const LineChartOptions& o,
                       const std::vector<LegendEntry>& legend) {
  ChartFrame f;
  for (const LineSeries& s : series) {
    for (const auto& [x, y] : s.points) {
      if (!std::isfinite(x) || !std::isfinite(y)) continue;
      f.x0 = std::min(f.x0, x);
      f.x1 = std::max(f.x1, x);
      f.y0 = std::min(f.y0, y);
      f.y1 = std::max(f.y1, y);
    }
  }
  f.empty = !(f.x1 >= f.x0);
  if (f.empty) f.x0 = 0, f.x1 = 1, f.y0 = 0, f.y1 = 1;
  if (o.x_max > 0) f.x1 = std::max(f.x1, o.x_max);
  if (o.y_from_zero) f.y0 = std::min(0.0, f.y0);
  if (f.x1 <= f.x0) f.x1 = f.x0 + 1;
  if (f.y1 <= f.y0) f.y1 = f.y0 + (f.y0 == 0 ? 1 : std::fabs(f.y0) * 0.1);
  f.y1 += (f.y1 - f.y0) * 0.05;
  const int legend_rows = legend.empty() ? 0 : legend.back().row + 1;
  f.top = kChartTitle + legend_rows * kLegendRow + 6;
  f.pw = o.width - kChartLeft - kChartRight;
  f.ph = o.height - kChartTitle - 10 - kChartBottom;  // the plot keeps its size; the picture grows
  f.height = static_cast<int>(f.top + f.ph) + kChartBottom;
  return f;
}

// Grid lines and ticks on both axes, and the axis labels. Byte ticks fall on round KiB / MiB /
// GiB; iteration ticks on whole numbers.
std::string chart_axes(const ChartFrame& f, const LineChartOptions& o) {
  std::string s;
  double unit = 1;
  if (o.y_format == AxisFormat::bytes) {
    while (unit * 1024 <= std::max(std::fabs(f.y0), std::fabs(f.y1))) unit *= 1024;
  }
  const double dy = svg_tick_step((f.y1 - f.y0) / unit, 5) * unit;
  const double dx = o.x_integer ? std::max(1.0, std::round(svg_tick_step(f.x1 - f.x0, 8)))
                                : svg_tick_step(f.x1 - f.x0, 8);
  for (double y = std::ceil(f.y0 / dy) * dy; y <= f.y1 + 1e-12; y += dy) {
    s += fmt::format(
        "<line x1=\"{}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"#e4e4e4\"/><text "
        "x=\"{}\" y=\"{:.1f}\" text-anchor=\"end\">{}</text>\n",
        kChartLeft, f.y(y), kChartLeft + f.pw, f.y(y), kChartLeft - 5, f.y(y) + 4,
        svg_escape(axis_text(y, o.y_format)));
  }
  for (double x = std::ceil(f.x0 / dx) * dx; x <= f.x1 + 1e-12; x += dx) {
    s += fmt::format(
        "<line x1=\"{0:.1f}\" y1=\"{1:.1f}\" x2=\"{0:.1f}\" y2=\"{2:.1f}\" stroke=\"black\"/><text "
        "x=\"{0:.1f}\" y=\"{3:.1f}\" text-anchor=\"middle\">{4}</text>\n",
        f.x(x), f.top + f.ph, f.top + f.ph + 4, f.top + f.ph + 16,
        svg_escape(axis_text(x, o.x_format)));
  }
  s += fmt::format("<text x=\"{:.1f}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n",
                   kChartLeft + f.pw / 2, f.height - 8, svg_escape(o.x_label));
  s += fmt::format(
      "<text x=\"14\" y=\"{0:.1f}\" text-anchor=\"middle\" transform=\"rotate(-90 14 {0:.1f})\">"
      "{1}</text>\n",
      f.top + f.ph / 2, svg_escape(o.y_label));
  return s;
}

// One series' curve (a lone point as a dot).
std::string chart_curve(const LineSeries& ls, const ChartFrame& f) {
  std::string pts;
  double prev_y = NAN;
  for (const auto& [x, y] : ls.points) {
    if (!std::isfinite(x) || !std::isfinite(y)) continue;
    if (ls.step && std::isfinite(prev_y)) pts += fmt::format("{:.2f},{:.2f} ", f.x(x), f.y(prev_y));
    pts += fmt::format("{:.2f},{:.2f} ", f.x(x), f.y(y));
    prev_y = y;
  }
  if (pts.empty()) return "";
  std::string s =
      fmt::format("<polyline points=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"1.6\"{}/>\n",
                  pts, ls.colour, ls.dashed ? " stroke-dasharray=\"6,3\"" : "");
  if (ls.points.size() == 1) {  // a lone point draws no line
    s += fmt::format("<circle cx=\"{:.2f}\" cy=\"{:.2f}\" r=\"3\" fill=\"{}\"/>\n",
                     f.x(ls.points[0].first), f.y(ls.points[0].second), ls.colour);
  }
  return s;
}

}  // namespace

std::string line_chart_svg(const std::vector<LineSeries>& series, const LineChartOptions& o) {
  const std::vector<LegendEntry> legend = legend_layout(series, o.width);
  const ChartFrame f = chart_frame(series, o, legend);
  std::string s = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" viewBox=\"0 0 {0} "
      "{1}\" font-family=\"sans-serif\" font-size=\"11\">\n<rect width=\"100%\" height=\"100%\" "
      "fill=\"white\"/>\n",
      o.width, f.height);
  s += fmt::format("<text x=\"{}\" y=\"18\" font-size=\"13\" font-weight=\"bold\">{}</text>\n",
                   kChartLeft, svg_escape(o.title));
  s += fmt::format(
      "<rect x=\"{}\" y=\"{}\" width=\"{:.1f}\" height=\"{:.1f}\" fill=\"#fafafa\" "
      "stroke=\"#bbb\"/>\n",
      kChartLeft, f.top, f.pw, f.ph);
  s += chart_axes(f, o);
  if (f.empty) {
    s += fmt::format(
        "<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\" fill=\"#888\">no "
        "data</text>\n",
        kChartLeft + f.pw / 2, f.top + f.ph / 2);
  }
  for (size_t i = 0; i < series.size(); ++i) {
    const LineSeries& ls = series[i];
    s += chart_curve(ls, f);
    const double lx = legend[i].x, ly = kChartTitle + legend[i].row * kLegendRow + 8;
    s += fmt::format(
        "<g class=\"legend\"><line x1=\"{0:.1f}\" y1=\"{1:.1f}\" x2=\"{2:.1f}\" y2=\"{1:.1f}\" "
        "stroke=\"{3}\" stroke-width=\"2\"{4}/><text x=\"{5:.1f}\" y=\"{6:.1f}\">{7}</text></g>\n",
        lx, ly, lx + 16, ls.colour, ls.dashed ? " stroke-dasharray=\"6,3\"" : "", lx + 19, ly + 4,
        svg_escape(ls.label));
  }
  s += "</svg>\n";
  return s;
}

}  // namespace infinipipe::report
