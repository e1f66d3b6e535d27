#include "report/run_html.h"
#include "report/run_replicas.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>

#include <fmt/format.h>

#include "core/config.h"
#include "core/error.h"
#include "core/output_file.h"
#include "report/chart_svg.h"
#include "report/run_html_explain.h"
#include "report/run_html_gantt.h"
#include "report/run_html_training.h"
#include "report/svg_util.h"

namespace infinipipe::report {

namespace {

constexpr const char* kStyle = R"(
body { font-family: sans-serif; margin: 24px auto; max-width: 1440px; color: #222; }
h1 { font-size: 22px; } h2 { font-size: 18px; margin-top: 28px; border-bottom: 1px solid #ddd; }
h3 { font-size: 15px; }
.charts { display: flex; flex-wrap: wrap; gap: 12px; }
svg.chart { max-width: 100%; height: auto; } figure { max-width: 100%; }
summary { font-size: 13px; color: #444; cursor: pointer; }
figure { margin: 0 0 12px 0; } figcaption { font-size: 12px; color: #555; }
table { border-collapse: collapse; font-size: 13px; margin: 8px 0 16px 0; display: block;
        overflow-x: auto; max-width: 100%; }
pre { white-space: pre-wrap; overflow-wrap: anywhere; }
th, td { border: 1px solid #ccc; padding: 3px 8px; text-align: right; }
th { background: #f0f0f0; } td:first-child, th:first-child { text-align: left; }
p.note { font-size: 13px; color: #444; max-width: 1000px; }
h4 { font-size: 14px; margin-bottom: 4px; } tr.chosen td { font-weight: bold; background: #eef6ee; }
td.text { text-align: left; } ul.note { font-size: 13px; color: #444; }
#render-check { font-size: 11px; color: #888; }
)";

// Marks a chart so the render check finds it: <svg class="chart" data-chart="NAME" ...>.
std::string chart(const std::string& svg, const std::string& name) {
  std::string out = svg;
  const size_t at = out.find("<svg ");
  if (at != std::string::npos) {
    out.insert(at + 5, fmt::format("class=\"chart\" data-chart=\"{}\" ", svg_escape(name)));
  }
  return out;
}

std::vector<std::string> cells(const std::string& line) {
  std::vector<std::string> out;
  std::string cur;
  for (size_t i = 1; i < line.size(); ++i) {
    if (line[i] == '|') {
      const size_t b = cur.find_first_not_of(' '), e = cur.find_last_not_of(' ');
      out.push_back(b == std::string::npos ? "" : cur.substr(b, e - b + 1));
      cur.clear();
    } else {
      cur += line[i];
    }
  }
  return out;
}

// A table of more rows than this starts collapsed: the page stays short, one click opens it.
constexpr size_t kOpenTableRows = 20;

// The markdown of run_compare_tables as HTML: headings, paragraphs and pipe tables.
std::string markdown_html(const std::string& md) {
  std::istringstream in(md);
  std::string line, out, table;
  size_t rows = 0;  // the table's, its header row included
  const auto table_end = [&] {
    if (rows == 0) return;
    table = "<table>\n" + table + "</table>\n";
    if (rows - 1 > kOpenTableRows) {
      table = fmt::format("<details><summary>{} rows</summary>\n{}</details>\n", rows - 1, table);
    }
    out += table;
    table.clear();
    rows = 0;
  };
  while (std::getline(in, line)) {
    if (!line.empty() && line[0] == '|') {
      if (line.rfind("|---", 0) == 0) continue;
      table += "<tr>";
      for (const std::string& c : cells(line)) {
        table += fmt::format("<{0}>{1}</{0}>", rows == 0 ? "th" : "td", svg_escape(c));
      }
      table += "</tr>\n";
      ++rows;
      continue;
    }
    table_end();
    if (line.rfind("## ", 0) == 0) {
      out += "<h3>" + svg_escape(line.substr(3)) + "</h3>\n";
    } else if (line.rfind("# ", 0) == 0) {
      continue;  // the page has its own title
    } else if (!line.empty()) {
      out += "<p class=\"note\">" + svg_escape(line) + "</p>\n";
    }
  }
  table_end();
  return out;
}

std::vector<std::pair<double, double>> memory_points(const std::vector<sim::MemorySample>& m) {
  std::vector<std::pair<double, double>> out;
  for (const sim::MemorySample& s : m) out.push_back({s.time, static_cast<double>(s.bytes)});
  return out;
}

// The page's head, title and summary line.
std::string html_head(const RunCompare& c) {
  std::string h = "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n";
  h += fmt::format("<title>infinipipe report: {}</title>\n<style>{}</style></head>\n<body>\n",
                   svg_escape(c.dir), kStyle);
  h += fmt::format("<h1>infinipipe report: {}</h1>\n", svg_escape(c.dir));
  h += fmt::format(
      "<p class=\"note\">{} schedule, pp {} &times; dp {}, {} iteration(s) traced{}. Median "
      "absolute error of the predicted action times: <b>{:.1f}%</b>; of the iteration: "
      "<b>{:.1f}%</b>{}.</p>\n",
      svg_escape(c.schedule), c.pp, c.dp, c.iterations.size() / static_cast<size_t>(c.dp),
      c.one_process ? " in one process" : "", 100 * c.by_kind.back().median_abs_rel,
      100 * c.step.median_abs_rel,
      c.step_after_warmup.count > 0
          ? fmt::format(", over {}: <b>{:.1f}%</b>", c.step_after_warmup.label,
                        100 * c.step_after_warmup.median_abs_rel)
          : "");
  return h;
}

// The memory budget the plans kept to: the simulator's, else the metrics' (0 = unknown).
int64_t memory_budget(const RunCompare& c, const std::vector<runlog::IterationMetrics>& metrics) {
  if (c.shown_predicted.memory_budget > 0) return c.shown_predicted.memory_budget;
  return metrics.empty() ? 0 : metrics.back().memory_budget;
}

// A budget line far above the curves would flatten them to the axis.
constexpr double kBudgetLineWithin = 4;

// Predicted and measured memory over the shown iteration, one chart per rank, under the budget.
std::string html_memory(const RunCompare& c, double span, int64_t budget) {
  const sim::StepResult& pred = c.shown_predicted;
  const sim::StepResult& meas = c.shown_measured;
  std::string h = "<h2>Memory over time per stage</h2>\n";
  h += "<p class=\"note\">Measured is what the engine's allocator (its memory tracker: weights, "
       "gradients, optimizer state, activations, buffers) holds, the quantity the plan predicts; "
       "the process's resident memory (RSS) is larger (code, libraries, the MPI runtime).";
  if (budget > 0) {
    h += fmt::format(
        " The plans keep within the budget of {} (the grey dashed line, drawn where "
        "it is under {}&times; a chart's highest curve, so small curves stay "
        "readable).",
        format_bytes(budget), kBudgetLineWithin);
  }
  h += "</p>\n";
  if (c.one_process && c.pp > 1) {
    h += "<p class=\"note\">One process holds every stage: each measured curve is the whole "
         "process's tracker.</p>\n";
  }
  h += "<div class=\"charts\">\n";
  for (int32_t k = 0; k < c.pp; ++k) {
    const size_t kk = static_cast<size_t>(k);
    LineSeries p{"predicted", "#1f5fbf", {}, true, true};
    LineSeries m{"measured (peak in each action, then after it)", "#d62728", {}, false, true};
    if (kk < pred.memory.size()) p.points = memory_points(pred.memory[kk]);
    if (kk < meas.memory.size()) m.points = memory_points(meas.memory[kk]);
    std::vector<LineSeries> lines = {p, m};
    double highest = 0;
    for (const LineSeries* l : {&p, &m}) {
      for (const auto& pt : l->points) highest = std::max(highest, pt.second);
    }
    if (budget > 0 && double(budget) <= kBudgetLineWithin * highest) {
      lines.push_back(
          {"budget", "#7f7f7f", {{0.0, double(budget)}, {span, double(budget)}}, true, false});
    }
    LineChartOptions o;
    o.title = fmt::format("rank {} memory", k);
    o.x_label = "time in the step";
    o.y_label = "bytes";
    o.x_format = AxisFormat::seconds;
    o.y_format = AxisFormat::bytes;
    o.x_max = span;
    o.width = 700;
    h += "<figure>" + chart(line_chart_svg(lines, o), fmt::format("memory-rank{}", k)) +
         "</figure>\n";
  }
  return h + "</div>\n";
}

// The iteration's error over the run, per replica, and what each action kind put into it (its
// share of the predicted step, over the replicas): where the online fit learns, and which kind
// it learns last.
std::string html_prediction_error(const RunCompare& c) {
  const char* colours[] = {"#1f5fbf", "#d62728", "#2ca02c", "#9467bd", "#8c564b", "#17becf"};
  std::vector<LineSeries> lines;
  for (int32_t r = 0; r < c.dp; ++r) {
    LineSeries s{c.dp == 1 ? "iteration" : fmt::format("iteration, replica {}", r),
                 colours[static_cast<size_t>(r) % std::size(colours)],
                 {}};
    for (const IterationCompare& i : c.iterations) {
      if (i.replica == r && i.predicted_step_s > 0) {
        s.points.push_back({static_cast<double>(i.iteration),
                            100 * (i.measured_step_s - i.predicted_step_s) / i.predicted_step_s});
      }
    }
    lines.push_back(std::move(s));
  }
  std::map<int64_t, std::vector<const IterationCompare*>> by_iteration;  // its replicas
  for (const IterationCompare& i : c.iterations) by_iteration[i.iteration].push_back(&i);
  std::map<std::string, std::vector<std::pair<double, double>>> kind_points;
  for (const auto& [it, group] : by_iteration) {
    for (const KindShare& share : kind_shares(group))
      kind_points[share.kind].push_back({static_cast<double>(it), 100 * share.share});
  }
  const char* kind_colours[] = {"#ff7f0e", "#7f7f7f", "#bcbd22"};
  size_t k = 0;
  for (const char* kind : {"forward", "backward", "recompute"}) {
    const char* colour = kind_colours[k++];
    auto found = kind_points.find(kind);
    if (found == kind_points.end()) continue;
    lines.push_back(
        {fmt::format("{} actions (share of the step)", kind), colour, found->second, true});
  }
  LineChartOptions o;
  o.title = "prediction error over the run";
  o.x_label = "iteration";
  o.y_label = "% of the predicted step";
  o.x_integer = true;
  o.width = 700;
  return "<h2>Prediction error over the run</h2>\n<p class=\"note\">(measured - predicted) / "
         "predicted of each iteration, and for each action kind the sum of its actions' "
         "(measured - predicted) over the predicted step (dashed): pipelining hides part of an "
         "action's error, so the dashed lines say which kind strays, not how the iteration's "
         "error splits.</p>\n<div class=\"charts\"><figure>" +
         chart(line_chart_svg(lines, o), "prediction-error") + "</figure></div>\n";
}

// The render check: counts charts whose SVG drew something with a non-empty box.
std::string html_render_check(int expected_charts) {
  return fmt::format(
      "<div id=\"render-check\" data-expected=\"{}\">charts: not rendered</div>\n<script>\n"
      "(function() {{\n"
      "  var svgs = document.querySelectorAll('svg.chart'), ok = [];\n"
      "  for (var i = 0; i < svgs.length; ++i) {{\n"
      "    var s = svgs[i], b = s.getBBox();\n"
      "    if (s.querySelector('rect, polyline, line') && b.width > 0 && b.height > 0)\n"
      "      ok.push(s.getAttribute('data-chart'));\n"
      "  }}\n"
      "  document.body.setAttribute('data-charts', ok.length);\n"
      "  document.getElementById('render-check').textContent =\n"
      "      'charts rendered: ' + ok.length + ' of ' + svgs.length + ' [' + ok.join(' ') + ']';\n"
      "}})();\n</script>\n</body></html>\n",
      expected_charts);
}

}  // namespace

int run_html_chart_count(const RunCompare& c) {
  // Two Gantt charts, memory per rank, training, RSS, prediction error.
  return 2 + c.pp + kTrainingCharts + 1;
}

std::string run_html(const RunCompare& c, const RunTrace& trace) {
  const std::vector<runlog::IterationMetrics>& metrics = trace.metrics;
  const double span = std::max(c.shown_predicted.step_time, c.shown_measured.step_time);
  std::string h = html_head(c);
  h += html_gantts(c, chart);
  h += html_memory(c, span, memory_budget(c, metrics));
  h += html_explain(trace.explains, c.shown_iteration);
  h += html_training(metrics, chart);
  h += html_rss(trace.iterations, chart);
  h += html_prediction_error(c);
  h += "<h2>Predicted vs measured</h2>\n" +
       markdown_html(run_compare_tables(c) + run_replica_balance_table(run_replica_balance(c)));
  h += html_config(trace.config_yaml);
  h += html_render_check(run_html_chart_count(c));
  return h;
}

void run_html_save(const std::string& html, const std::string& path) {
  output_file_write(path, html, "the HTML report");
}

}  // namespace infinipipe::report
