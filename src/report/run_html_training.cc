#include "report/run_html_training.h"

#include <cmath>
#include <map>
#include <optional>

#include <fmt/format.h>

#include "report/chart_svg.h"
#include "report/svg_util.h"

namespace infinipipe::report {

namespace {

// (iteration, value) of `field` over the records where it is a finite number; a later record of
// an iteration replaces an earlier one.
std::vector<std::pair<double, double>> field_points(
    const std::vector<runlog::IterationMetrics>& metrics,
    std::optional<double> (*field)(const runlog::IterationMetrics&)) {
  std::map<int64_t, double> by_iter;
  for (const runlog::IterationMetrics& r : metrics) {
    const std::optional<double> v = field(r);
    if (v && std::isfinite(*v)) {
      by_iter[r.iteration] = *v;
    } else {
      by_iter.erase(r.iteration);  // the last record of the iteration lacks it
    }
  }
  std::vector<std::pair<double, double>> out;
  for (const auto& [it, v] : by_iter) out.push_back({static_cast<double>(it), v});
  return out;
}

LineChartOptions per_iteration(const std::string& title, const std::string& y_label,
                               bool from_zero) {
  LineChartOptions o;
  o.title = title;
  o.x_label = "iteration";
  o.x_integer = true;
  o.y_label = y_label;
  o.y_from_zero = from_zero;
  return o;
}

}  // namespace

std::string html_training(const std::vector<runlog::IterationMetrics>& metrics,
                          std::string (*mark)(const std::string& svg, const std::string& name)) {
  using M = runlog::IterationMetrics;
  using Value = std::optional<double>;
  LineSeries loss{"training loss", "#2ca02c",
                  field_points(metrics, [](const M& m) -> Value { return m.loss; }), false, false};
  LineSeries valid{"validation loss", "#ff7f0e",
                   field_points(metrics, [](const M& m) { return m.valid_loss; }), false, false};
  LineSeries rate{"tokens/s", "#9467bd",
                  field_points(metrics, [](const M& m) -> Value { return m.tokens_per_s; }), false,
                  false};
  LineSeries lr{"learning rate", "#1f77b4",
                field_points(metrics, [](const M& m) -> Value { return m.lr; }), false, false};
  LineSeries norm{"gradient norm (before clipping)", "#8c564b",
                  field_points(metrics, [](const M& m) -> Value { return m.grad_norm; }), false,
                  false};
  std::vector<LineSeries> losses = {loss};
  if (!valid.points.empty()) losses.push_back(valid);  // only where an evaluation ran
  std::string h = "<h2>Training</h2>\n<div class=\"charts\">\n";
  const auto figure = [&](const std::vector<LineSeries>& s, const LineChartOptions& o,
                          const std::string& name) {
    h += "<figure>" + mark(line_chart_svg(s, o), name) + "</figure>\n";
  };
  figure(losses, per_iteration("loss per iteration", "loss", false), "loss");
  figure({rate}, per_iteration("tokens/s per iteration", "tokens/s", true), "tokens-per-s");
  figure({lr}, per_iteration("learning rate per iteration", "learning rate", true), "lr");
  figure({norm}, per_iteration("gradient norm per iteration", "norm", true), "grad-norm");
  return h + "</div>\n";
}

std::string html_rss(const std::vector<TracedIteration>& iterations,
                     std::string (*mark)(const std::string& svg, const std::string& name)) {
  static const char* kColours[] = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd",
                                   "#8c564b", "#e377c2", "#17becf", "#bcbd22"};
  std::map<int32_t, std::map<int64_t, std::pair<double, double>>> by_rank;  // rss, tracker
  for (const TracedIteration& it : iterations) {
    const runlog::IterationMetrics& m = it.metrics;
    if (m.rss_peak_bytes < 0) continue;  // unknown
    by_rank[it.world_rank][it.iteration] = {static_cast<double>(m.rss_peak_bytes),
                                            static_cast<double>(m.measured_peak_bytes)};
  }
  std::vector<LineSeries> series;
  for (const auto& [rank, points] : by_rank) {
    const char* colour = kColours[static_cast<size_t>(rank) % std::size(kColours)];
    LineSeries rss{fmt::format("rank {} RSS", rank), colour, {}, false, false};
    LineSeries tracker{fmt::format("rank {} tracker", rank), colour, {}, true, false};
    for (const auto& [it, v] : points) {
      rss.points.push_back({static_cast<double>(it), v.first});
      if (std::isfinite(v.second)) tracker.points.push_back({static_cast<double>(it), v.second});
    }
    series.push_back(std::move(rss));
    series.push_back(std::move(tracker));
  }
  LineChartOptions o = per_iteration("process memory", "bytes", true);
  o.y_format = AxisFormat::bytes;
  return "<h2>Process memory</h2>\n<p class=\"note\">RSS: the peak resident memory of each "
         "rank's process during the iteration, as the operating system counts it; tracker "
         "(dashed): the peak the engine's allocator held, which the plans predict.</p>\n"
         "<figure>" +
         mark(line_chart_svg(series, o), "rss") + "</figure>\n";
}

std::string html_config(const std::string& config_yaml) {
  if (config_yaml.empty()) return "";
  return "<h2>Configuration</h2>\n<details><summary>the resolved options of the run "
         "(config.yaml)</summary>\n<pre id=\"config\">" +
         svg_escape(config_yaml) + "</pre>\n</details>\n";
}

}  // namespace infinipipe::report
