// The text and JSON forms of a RunCompare (declared in run_compare.h).
#include <cmath>
#include <set>

#include <fmt/format.h>

#include "core/config.h"
#include "report/run_compare.h"

namespace infinipipe::report {

namespace {

std::string pct(double x) {
  return std::isfinite(x) ? fmt::format("{:.1f}%", 100 * x) : "n/a";
}

std::string signed_pct(double x) {
  return std::isfinite(x) ? fmt::format("{:+.1f}%", 100 * x) : "n/a";
}

std::string secs(double s) {
  if (s >= 1.0) return fmt::format("{:.3f} s", s);
  return fmt::format("{:.2f} ms", s * 1e3);
}

std::string error_row(const ErrorStats& e) {
  return fmt::format("| {} | {} | {} | {} | {} | {} | {} |\n", e.label, e.count,
                     secs(e.predicted_s), secs(e.measured_s), pct(e.median_abs_rel),
                     pct(e.mean_abs_rel), signed_pct(e.mean_rel));
}

// "backward +2.1%, forward -0.3%": each kind's share, in the order given.
std::string kind_shares_cell(const std::vector<KindShare>& kinds) {
  std::string out;
  for (const KindShare& k : kinds)
    out += fmt::format("{}{} {}", out.empty() ? "" : ", ", k.kind, signed_pct(k.share));
  return out;
}

constexpr const char* kErrorHeader =
    "| {} | n | predicted | measured | median abs err | mean abs err | bias |\n"
    "|---|---|---|---|---|---|---|\n";

// JSON has no NaN: an undefined ratio is null, as the tables print "n/a" or nothing.
nlohmann::json number_or_null(double x) {
  return std::isfinite(x) ? nlohmann::json(x) : nlohmann::json();
}

double step_rel_error(const IterationCompare& i) {
  return i.predicted_step_s > 0 ? (i.measured_step_s - i.predicted_step_s) / i.predicted_step_s
                                : NAN;
}

// The measured peak's error against the prediction; NaN without a per-stage measurement.
double peak_rel_error(const StageCompare& st) {
  return st.peak_measured >= 0 && st.peak_predicted > 0
             ? static_cast<double>(st.peak_measured - st.peak_predicted) /
                   static_cast<double>(st.peak_predicted)
             : NAN;
}

size_t traced_iterations(const RunCompare& c) {
  std::set<int64_t> distinct;
  for (const IterationCompare& i : c.iterations) distinct.insert(i.iteration);
  return distinct.size();
}

nlohmann::json error_json(const ErrorStats& e) {
  return {{"label", e.label},
          {"count", e.count},
          {"predicted_s", e.predicted_s},
          {"measured_s", e.measured_s},
          {"median_abs_rel_error", number_or_null(e.median_abs_rel)},
          {"mean_abs_rel_error", number_or_null(e.mean_abs_rel)},
          {"mean_rel_error", number_or_null(e.mean_rel)}};
}

}  // namespace

std::string run_compare_tables(const RunCompare& c) {
  std::string s =
      fmt::format("# {}: {} schedule, pp {} x dp {}, {} iteration(s) traced{}\n\n", c.dir,
                  c.schedule, c.pp, c.dp, traced_iterations(c),
                  c.one_process ? " in one process" : fmt::format(" on {} ranks", c.pp * c.dp));
  s += "Relative error = (measured - predicted) / predicted; bias > 0: the cost model predicts too "
       "little.\n";
  if (c.serial_steps) {
    s += "One process runs the pipeline's ranks one after another: the predicted iteration is the "
         "sum of the predicted action times, and measured bubbles are mostly that serialisation.\n";
  }
  s += "\n## Time per action kind\n\n" + fmt::format(kErrorHeader, "kind");
  for (const ErrorStats& e : c.by_kind) s += error_row(e);
  s += "\n## Time per stage (pipeline rank)\n\n" + fmt::format(kErrorHeader, "rank");
  for (const StageCompare& st : c.stages) s += error_row(st.time);
  s += "\n## Whole iteration (execution of the plan)\n\n" + fmt::format(kErrorHeader, "step");
  s += error_row(c.step);
  if (c.step_after_warmup.count > 0) s += error_row(c.step_after_warmup);
  s += "\n| iteration | replica | predicted | measured | error | bubble pred | bubble meas | "
       "loss | tokens/s |\n|---|---|---|---|---|---|---|---|---|\n";
  for (const IterationCompare& i : c.iterations) {
    s += fmt::format("| {} | {} | {} | {} | {} | {} | {} | {} | {} |\n", i.iteration, i.replica,
                     secs(i.predicted_step_s), secs(i.measured_step_s),
                     signed_pct(step_rel_error(i)), pct(i.bubble_predicted), pct(i.bubble_measured),
                     i.has_metrics ? fmt::format("{:.4f}", i.loss) : "",
                     i.has_metrics ? fmt::format("{:.0f}", i.tokens_per_s) : "");
  }
  if (c.step_windows.size() > 1) {
    s += fmt::format(
        "\n## Iteration error over the run\n\nWith `--cost-model-update online` the fit starts "
        "from its calibration: the first {} iterations are its warm-up.\n\n",
        kRunCompareWarmup);
    s += "The action kinds' column: what each kind's measured time put above (+) or below (-) "
         "its prediction, summed over the window's actions, as a share of its predicted steps; "
         "largest first. Pipelining hides part of it, so it says which kind to look at, not how "
         "the iteration's error splits.\n\n";
    s += "| iterations | n | predicted | measured | median abs err | mean abs err | bias | action "
         "kinds |\n|---|---|---|---|---|---|---|---|\n";
    for (size_t w = 0; w < c.step_windows.size(); ++w) {
      std::string row = error_row(c.step_windows[w]);
      row.resize(row.size() - 1);  // the newline: the kinds' cell follows
      s += fmt::format("{} {} |\n", row, kind_shares_cell(c.step_window_kinds[w]));
    }
  }
  s += "\n## Bubbles and memory per stage\n\n"
       "bubble = idle share of the step (1 - busy / step time); idle in span = idle share between "
       "the rank's first and last action.\n\n"
       "| rank | bubble pred | bubble meas | idle in span pred | idle in span meas | peak pred | "
       "peak meas | peak error |\n|---|---|---|---|---|---|---|---|\n";
  for (const StageCompare& st : c.stages) {
    const bool has = st.peak_measured >= 0;
    s += fmt::format("| {} | {} | {} | {} | {} | {} | {} | {} |\n", st.rank,
                     pct(st.bubble_predicted), pct(st.bubble_measured), pct(st.idle_predicted),
                     pct(st.idle_measured), format_bytes(st.peak_predicted),
                     has ? format_bytes(st.peak_measured) : "(process)",
                     std::isfinite(peak_rel_error(st)) ? signed_pct(peak_rel_error(st)) : "");
  }
  s += fmt::format("| all | {} | {} | {} | {} | | | |\n", pct(c.bubble_predicted),
                   pct(c.bubble_measured), pct(c.idle_predicted), pct(c.idle_measured));
  if (c.one_process) {
    s += fmt::format(
        "\nOne process holds every stage: its measured peak is {} (all stages together){}.\n",
        format_bytes(c.process_peak_measured),
        c.pp == 1 ? "" : "; per-stage peaks are measured under mpirun");
  }
  return s;
}

nlohmann::json run_compare_to_json(const RunCompare& c) {
  nlohmann::json kinds = nlohmann::json::array(), stages = nlohmann::json::array(),
                 iterations = nlohmann::json::array();
  for (const ErrorStats& e : c.by_kind) kinds.push_back(error_json(e));
  nlohmann::json windows = nlohmann::json::array();
  for (size_t w = 0; w < c.step_windows.size(); ++w) {
    nlohmann::json e = error_json(c.step_windows[w]), kinds_j = nlohmann::json::array();
    for (const KindShare& k : c.step_window_kinds[w])
      kinds_j.push_back({{"kind", k.kind}, {"share_of_step", k.share}});
    e["kinds"] = kinds_j;
    windows.push_back(e);
  }
  for (const StageCompare& st : c.stages) {
    stages.push_back({{"rank", st.rank},
                      {"time", error_json(st.time)},
                      {"bubble_predicted", st.bubble_predicted},
                      {"bubble_measured", st.bubble_measured},
                      {"idle_in_span_predicted", st.idle_predicted},
                      {"idle_in_span_measured", st.idle_measured},
                      {"peak_predicted_bytes", st.peak_predicted},
                      {"peak_measured_bytes", st.peak_measured},
                      {"peak_rel_error", number_or_null(peak_rel_error(st))}});
  }
  for (const IterationCompare& i : c.iterations) {
    iterations.push_back(
        {{"iteration", i.iteration},
         {"replica", i.replica},
         {"predicted_step_s", i.predicted_step_s},
         {"measured_step_s", i.measured_step_s},
         {"step_rel_error", number_or_null(step_rel_error(i))},
         {"bubble_predicted", i.bubble_predicted},
         {"bubble_measured", i.bubble_measured},
         {"idle_in_span_predicted", i.idle_predicted},
         {"idle_in_span_measured", i.idle_measured},
         {"loss", i.has_metrics ? nlohmann::json(i.loss) : nlohmann::json()},
         {"tokens_per_s", i.has_metrics ? nlohmann::json(i.tokens_per_s) : nlohmann::json()}});
  }
  return {{"format", "infinipipe-report"},
          {"version", 1},
          {"dir", c.dir},
          {"schedule", c.schedule},
          {"pp", c.pp},
          {"dp", c.dp},
          {"one_process", c.one_process},
          {"serial_steps", c.serial_steps},
          {"traced_iterations", traced_iterations(c)},
          {"by_kind", kinds},
          {"stages", stages},
          {"step", error_json(c.step)},
          {"step_after_warmup",
           c.step_after_warmup.count > 0 ? error_json(c.step_after_warmup) : nlohmann::json()},
          {"step_windows", windows},
          {"iterations", iterations},
          {"bubble_predicted", c.bubble_predicted},
          {"bubble_measured", c.bubble_measured},
          {"idle_in_span_predicted", c.idle_predicted},
          {"idle_in_span_measured", c.idle_measured},
          {"process_peak_measured_bytes", c.process_peak_measured}};
}

}  // namespace infinipipe::report
