#include "report/gantt_svg.h"

#include <algorithm>
#include <cmath>
#include <fstream>

#include <fmt/format.h>

#include "core/config.h"
#include "core/error.h"
#include "core/output_file.h"
#include "report/svg_util.h"

namespace infinipipe::report {
namespace {

constexpr int kGanttLeft = 110, kGanttRight = 20, kGanttTop = 56, kGanttGap = 30, kGanttAxis = 34;

// Chunks get well-spread hues (golden angle); backwards are the darker shade of the same hue.
std::string chunk_colour(int32_t chunk, bool backward) {
  double hue = std::fmod(chunk * 137.508, 360.0);
  return fmt::format("hsl({:.0f},65%,{}%)", hue, backward ? 36 : 72);
}

// Where things go: the plot's width and time scale, and the heights of its parts.
struct GanttFrame {
  double span = 0;    // seconds the time axis covers
  double plot_w = 0;  // pixels of the time axis
  double sx = 0;      // pixels per second
  int gantt_h = 0;    // the action rows
  int mem_top = 0;    // the memory panels' title
  int height = 0;     // the whole picture

  double x(double t) const { return kGanttLeft + t * sx; }
};

GanttFrame gantt_frame(const sim::StepResult& step, const GanttOptions& o) {
  GanttFrame f;
  const int ranks = static_cast<int>(step.actions.size());
  f.span = o.time_span > 0 ? o.time_span : step.step_time > 0 ? step.step_time : 1.0;
  f.plot_w = std::max(100, o.width - kGanttLeft - kGanttRight);
  f.sx = f.plot_w / f.span;
  f.gantt_h = ranks * o.row_height;
  f.mem_top = kGanttTop + f.gantt_h + kGanttAxis + kGanttGap;
  f.height = o.memory ? f.mem_top + ranks * (o.memory_height + 8) + 30 : f.mem_top;
  return f;
}

// The picture's opening: the hatch pattern, the background, the title and the legend.
std::string gantt_header(const sim::StepResult& step, const GanttOptions& o, const GanttFrame& f) {
  std::string s;
  s += fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" viewBox=\"0 0 {} {}\" "
      "font-family=\"sans-serif\" font-size=\"11\">\n",
      o.width, f.height, o.width, f.height);
  s += "<defs><pattern id=\"recompute\" width=\"6\" height=\"6\" patternUnits=\"userSpaceOnUse\" "
       "patternTransform=\"rotate(45)\"><rect width=\"6\" height=\"6\" fill=\"none\"/>"
       "<line x1=\"0\" y1=\"0\" x2=\"0\" y2=\"6\" stroke=\"white\" stroke-width=\"2.5\" "
       "stroke-opacity=\"0.8\"/></pattern></defs>\n";
  s += "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  std::string title =
      o.title.empty() ? fmt::format(
                            "{} ({}): step {}, bubble {:.1f}%, {:.0f} "
                            "tokens/s, MFU {:.1f}%",
                            step.schedule, step.source, svg_format_seconds(step.step_time),
                            100 * step.bubble_ratio_mean, step.tokens_per_second, 100 * step.mfu)
                      : o.title;
  s += fmt::format("<text x=\"{}\" y=\"20\" font-size=\"15\" font-weight=\"bold\">{}</text>\n",
                   kGanttLeft, svg_escape(title));
  int lx = kGanttLeft;
  auto swatch = [&](const std::string& fill, const std::string& label, bool hatch) {
    s += fmt::format("<rect x=\"{}\" y=\"32\" width=\"14\" height=\"12\" fill=\"{}\"/>", lx, fill);
    if (hatch)
      s += fmt::format(
          "<rect x=\"{}\" y=\"32\" width=\"14\" height=\"12\" "
          "fill=\"url(#recompute)\"/>",
          lx);
    s += fmt::format("<text x=\"{}\" y=\"42\">{}</text>\n", lx + 18, label);
    lx += 28 + 7 * static_cast<int>(label.size());
  };
  swatch(chunk_colour(0, false), "forward (colour = chunk)", false);
  swatch(chunk_colour(0, true), "backward", false);
  swatch(chunk_colour(0, true), "recompute inside backward", true);
  return s;
}

// One action's box in the row at y: coloured by chunk, its recompute part hatched, its chunk
// labelled when the box is wide enough.
std::string gantt_action_box(const sim::ActionRecord& a, int y, const GanttOptions& o,
                             const GanttFrame& f) {
  std::string s;
  const bool bwd = a.action.kind == plan::ActionKind::backward;
  const double x = f.x(a.start), w = std::max(0.5, (a.end - a.start) * f.sx);
  s += fmt::format(
      "<rect x=\"{:.2f}\" y=\"{}\" width=\"{:.2f}\" height=\"{}\" fill=\"{}\" stroke=\"white\" "
      "stroke-width=\"0.5\"><title>{} chunk {} stage {}: {} .. {}{}</title></rect>\n",
      x, y + 2, w, o.row_height - 4, chunk_colour(a.action.chunk, bwd),
      bwd ? "backward" : "forward", a.action.chunk, a.action.stage, svg_format_seconds(a.start),
      svg_format_seconds(a.end),
      a.recompute_time > 0 ? fmt::format(", recompute {} layers {}", a.action.recompute_layers,
                                         svg_format_seconds(a.recompute_time))
                           : "");
  if (a.recompute_time > 0)
    s += fmt::format(
        "<rect x=\"{:.2f}\" y=\"{}\" width=\"{:.2f}\" height=\"{}\" "
        "fill=\"url(#recompute)\"/>\n",
        x, y + 2, std::max(0.5, a.recompute_time * f.sx), o.row_height - 4);
  if (o.label_chunks && w >= 7.0 * (1 + std::to_string(a.action.chunk).size()))
    s += fmt::format(
        "<text x=\"{:.2f}\" y=\"{}\" text-anchor=\"middle\" fill=\"{}\" "
        "font-size=\"10\">{}</text>\n",
        x + w / 2, y + o.row_height / 2 + 4, bwd ? "white" : "black", a.action.chunk);
  return s;
}

// Rank k's row: its name (and the stages it runs when several), its lane, its actions.
std::string gantt_rank_row(const std::vector<sim::ActionRecord>& actions, int k,
                           const GanttOptions& o, const GanttFrame& f) {
  std::string s;
  const int y = kGanttTop + k * o.row_height;
  std::string stages;  // the (virtual) stages this rank runs, from its actions
  std::vector<int32_t> seen;
  for (const sim::ActionRecord& a : actions)
    if (std::find(seen.begin(), seen.end(), a.action.stage) == seen.end())
      seen.push_back(a.action.stage);
  std::sort(seen.begin(), seen.end());
  for (int32_t st : seen) {
    if (!stages.empty()) stages += ',';
    stages += std::to_string(st);
  }
  const bool several = seen.size() > 1;
  s += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"end\">rank {}</text>\n", kGanttLeft - 8,
                   y + o.row_height / 2 + (several ? 0 : 4), k);
  if (several)
    s += fmt::format(
        "<text x=\"{}\" y=\"{}\" text-anchor=\"end\" font-size=\"9\">stages {}</text>\n",
        kGanttLeft - 8, y + o.row_height / 2 + 10, stages);
  s += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{:.2f}\" height=\"{}\" fill=\"#f3f3f3\"/>\n",
                   kGanttLeft, y + 2, f.plot_w, o.row_height - 4);
  for (const sim::ActionRecord& a : actions) s += gantt_action_box(a, y, o, f);
  return s;
}

std::string gantt_time_axis(const GanttFrame& f) {
  std::string s;
  const int axis_y = kGanttTop + f.gantt_h + 4;
  const double dt = svg_tick_step(f.span, 10);
  s += fmt::format("<line x1=\"{}\" y1=\"{}\" x2=\"{:.2f}\" y2=\"{}\" stroke=\"black\"/>\n",
                   kGanttLeft, axis_y, kGanttLeft + f.plot_w, axis_y);
  for (double t = 0; t <= f.span * (1 + 1e-9); t += dt)
    s += fmt::format(
        "<line x1=\"{0:.2f}\" y1=\"{1}\" x2=\"{0:.2f}\" y2=\"{2}\" stroke=\"black\"/>"
        "<text x=\"{0:.2f}\" y=\"{3}\" text-anchor=\"middle\">{4}</text>\n",
        f.x(t), axis_y, axis_y + 5, axis_y + 17, svg_format_seconds(t));
  return s;
}

// Memory panels: one scale for all ranks so they compare at a glance.
std::string gantt_memory_panels(const sim::StepResult& step, const GanttOptions& o,
                                const GanttFrame& f) {
  std::string s;
  int64_t top = std::max<int64_t>(step.memory_budget, 1);
  for (const auto& curve : step.memory)
    for (const auto& m : curve) top = std::max(top, m.bytes);
  top = static_cast<int64_t>(top * 1.05);
  s += fmt::format(
      "<text x=\"{}\" y=\"{}\" font-size=\"13\" font-weight=\"bold\">memory per rank "
      "(scale 0 .. {}{})</text>\n",
      kGanttLeft, f.mem_top - 10, format_bytes(top),
      step.memory_budget > 0 ? fmt::format(", budget {} dashed", format_bytes(step.memory_budget))
                             : "");
  for (int k = 0; k < static_cast<int>(step.memory.size()); ++k) {
    const int y0 = f.mem_top + k * (o.memory_height + 8), h = o.memory_height;
    auto Y = [&](int64_t b) { return y0 + h - static_cast<double>(b) / top * h; };
    s += fmt::format(
        "<rect x=\"{}\" y=\"{}\" width=\"{:.2f}\" height=\"{}\" fill=\"#fafafa\" "
        "stroke=\"#ccc\"/>\n",
        kGanttLeft, y0, f.plot_w, h);
    const int64_t peak = k < static_cast<int>(step.peak_bytes.size()) ? step.peak_bytes[k] : 0;
    s += fmt::format(
        "<text x=\"{}\" y=\"{}\" text-anchor=\"end\">rank {}</text>"
        "<text x=\"{}\" y=\"{}\" text-anchor=\"end\" font-size=\"9\">peak {}</text>\n",
        kGanttLeft - 8, y0 + h / 2, k, kGanttLeft - 8, y0 + h / 2 + 12, format_bytes(peak));
    std::string pts;
    for (const auto& m : step.memory[k])
      pts += fmt::format("{:.2f},{:.2f} ", f.x(m.time), Y(m.bytes));
    s += fmt::format(
        "<polyline points=\"{}\" fill=\"none\" stroke=\"#1f5fbf\" "
        "stroke-width=\"1.2\"/>\n",
        pts);
    if (step.memory_budget > 0)
      s += fmt::format(
          "<line x1=\"{}\" y1=\"{:.2f}\" x2=\"{:.2f}\" y2=\"{:.2f}\" stroke=\"#d62728\" "
          "stroke-dasharray=\"5,3\"/>\n",
          kGanttLeft, Y(step.memory_budget), kGanttLeft + f.plot_w, Y(step.memory_budget));
  }
  return s;
}

}  // namespace

std::string gantt_svg(const sim::StepResult& step, const GanttOptions& o) {
  const GanttFrame f = gantt_frame(step, o);
  std::string s = gantt_header(step, o, f);
  for (int k = 0; k < static_cast<int>(step.actions.size()); ++k)
    s += gantt_rank_row(step.actions[k], k, o, f);
  s += gantt_time_axis(f);
  if (o.memory) s += gantt_memory_panels(step, o, f);
  return s + "</svg>\n";
}

void gantt_svg_save(const sim::StepResult& step, const std::string& path, const GanttOptions& o) {
  output_file_write(path, gantt_svg(step, o), "the Gantt chart");
}

}  // namespace infinipipe::report
