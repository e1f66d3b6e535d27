// A small self-contained SVG line chart (axes, ticks, a legend): the report's memory-over-time,
// loss and tokens/s curves.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace infinipipe::report {

struct LineSeries {
  std::string label;
  std::string colour = "#1f5fbf";
  std::vector<std::pair<double, double>> points;  // (x, y), drawn in order
  bool dashed = false;
  bool step = false;  // hold each value until the next x (a counter), instead of a straight line
};

enum class AxisFormat { number, seconds, bytes };

struct LineChartOptions {
  std::string title;
  std::string x_label, y_label;
  AxisFormat x_format = AxisFormat::number, y_format = AxisFormat::number;
  int width = 680, height = 240;
  double x_max = 0;  // 0 = the data's largest x
  bool y_from_zero = true;
  bool x_integer = false;  // ticks on whole numbers only (iterations)
};

// Series without points are left out of the plot (the legend still names them). An empty chart
// (no point at all) says so in its middle.
std::string line_chart_svg(const std::vector<LineSeries>& series, const LineChartOptions& opts);

}  // namespace infinipipe::report
