#include "report/chart_svg.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "core/config.h"
#include "report/svg_util.h"

namespace infinipipe::report {

namespace {

constexpr int kLeft = 78, kRight = 16, kTop = 30, kBottom = 44;

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

}  // namespace

std::string line_chart_svg(const std::vector<LineSeries>& series, const LineChartOptions& o) {
  double x0 = INFINITY, x1 = -INFINITY, y0 = INFINITY, y1 = -INFINITY;
  for (const LineSeries& s : series) {
    for (const auto& [x, y] : s.points) {
      if (!std::isfinite(x) || !std::isfinite(y)) continue;
      x0 = std::min(x0, x);
      x1 = std::max(x1, x);
      y0 = std::min(y0, y);
      y1 = std::max(y1, y);
    }
  }
  const bool empty = !(x1 >= x0);
  if (empty) x0 = 0, x1 = 1, y0 = 0, y1 = 1;
  if (o.x_max > 0) x1 = std::max(x1, o.x_max);
  if (o.y_from_zero) y0 = std::min(0.0, y0);
  if (x1 <= x0) x1 = x0 + 1;
  if (y1 <= y0) y1 = y0 + (y0 == 0 ? 1 : std::fabs(y0) * 0.1);
  y1 += (y1 - y0) * 0.05;
  const double pw = o.width - kLeft - kRight, ph = o.height - kTop - kBottom;
  auto X = [&](double x) { return kLeft + (x - x0) / (x1 - x0) * pw; };
  auto Y = [&](double y) { return kTop + ph - (y - y0) / (y1 - y0) * ph; };

  std::string s = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" viewBox=\"0 0 {0} "
      "{1}\" font-family=\"sans-serif\" font-size=\"11\">\n<rect width=\"100%\" height=\"100%\" "
      "fill=\"white\"/>\n",
      o.width, o.height);
  s += fmt::format("<text x=\"{}\" y=\"18\" font-size=\"13\" font-weight=\"bold\">{}</text>\n",
                   kLeft, svg_escape(o.title));
  s += fmt::format(
      "<rect x=\"{}\" y=\"{}\" width=\"{:.1f}\" height=\"{:.1f}\" fill=\"#fafafa\" "
      "stroke=\"#bbb\"/>\n",
      kLeft, kTop, pw, ph);
  // Ticks and grid.
  // Byte ticks fall on round KiB / MiB / GiB; iteration ticks on whole numbers.
  double unit = 1;
  if (o.y_format == AxisFormat::bytes) {
    while (unit * 1024 <= std::max(std::fabs(y0), std::fabs(y1))) unit *= 1024;
  }
  const double dy = svg_tick_step((y1 - y0) / unit, 5) * unit;
  const double dx = o.x_integer ? std::max(1.0, std::round(svg_tick_step(x1 - x0, 8)))
                                : svg_tick_step(x1 - x0, 8);
  for (double y = std::ceil(y0 / dy) * dy; y <= y1 + 1e-12; y += dy) {
    s += fmt::format(
        "<line x1=\"{}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"#e4e4e4\"/><text "
        "x=\"{}\" y=\"{:.1f}\" text-anchor=\"end\">{}</text>\n",
        kLeft, Y(y), kLeft + pw, Y(y), kLeft - 5, Y(y) + 4, svg_escape(axis_text(y, o.y_format)));
  }
  for (double x = std::ceil(x0 / dx) * dx; x <= x1 + 1e-12; x += dx) {
    s += fmt::format(
        "<line x1=\"{0:.1f}\" y1=\"{1:.1f}\" x2=\"{0:.1f}\" y2=\"{2:.1f}\" stroke=\"black\"/><text "
        "x=\"{0:.1f}\" y=\"{3:.1f}\" text-anchor=\"middle\">{4}</text>\n",
        X(x), kTop + ph, kTop + ph + 4, kTop + ph + 16, svg_escape(axis_text(x, o.x_format)));
  }
  s += fmt::format("<text x=\"{:.1f}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n", kLeft + pw / 2,
                   o.height - 8, svg_escape(o.x_label));
  s += fmt::format(
      "<text x=\"14\" y=\"{0:.1f}\" text-anchor=\"middle\" transform=\"rotate(-90 14 {0:.1f})\">"
      "{1}</text>\n",
      kTop + ph / 2, svg_escape(o.y_label));
  if (empty) {
    s += fmt::format(
        "<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\" fill=\"#888\">no "
        "data</text>\n",
        kLeft + pw / 2, kTop + ph / 2);
  }
  // Curves and legend.
  double lx = kLeft + pw;
  for (size_t i = series.size(); i-- > 0;) {
    const LineSeries& ls = series[i];
    std::string pts;
    double prev_y = NAN;
    for (const auto& [x, y] : ls.points) {
      if (!std::isfinite(x) || !std::isfinite(y)) continue;
      if (ls.step && std::isfinite(prev_y)) pts += fmt::format("{:.2f},{:.2f} ", X(x), Y(prev_y));
      pts += fmt::format("{:.2f},{:.2f} ", X(x), Y(y));
      prev_y = y;
    }
    if (!pts.empty()) {
      s += fmt::format(
          "<polyline points=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"1.6\"{}/>\n", pts,
          ls.colour, ls.dashed ? " stroke-dasharray=\"6,3\"" : "");
      if (ls.points.size() == 1) {  // a lone point draws no line
        s += fmt::format("<circle cx=\"{:.2f}\" cy=\"{:.2f}\" r=\"3\" fill=\"{}\"/>\n",
                         X(ls.points[0].first), Y(ls.points[0].second), ls.colour);
      }
    }
    lx -= 24 + 6.5 * static_cast<double>(ls.label.size());
    s += fmt::format(
        "<line x1=\"{0:.1f}\" y1=\"20\" x2=\"{1:.1f}\" y2=\"20\" stroke=\"{2}\" "
        "stroke-width=\"2\"{3}/><text x=\"{4:.1f}\" y=\"24\">{5}</text>\n",
        lx, lx + 16, ls.colour, ls.dashed ? " stroke-dasharray=\"6,3\"" : "", lx + 19,
        svg_escape(ls.label));
  }
  s += "</svg>\n";
  return s;
}

}  // namespace infinipipe::report
