// Checks that the JSON of `infinipipe report --json` holds the numbers its printed tables show:
// reads every row of the tables back (seconds, percentages, bytes as printed) and compares it
// with the JSON field docs/tracing.md names for it, within the tables' rounding. Returns one
// line per disagreement (empty: they agree).
#pragma once

#include <cmath>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/config.h"

namespace infinipipe::test_report {

// "| a | b |" -> {"a", "b"}.
inline std::vector<std::string> table_cells(const std::string& line) {
  std::vector<std::string> cells;
  std::string cell;
  for (size_t i = 1; i < line.size(); ++i) {
    if (line[i] != '|') {
      cell += line[i];
      continue;
    }
    const size_t a = cell.find_first_not_of(' '), b = cell.find_last_not_of(' ');
    cells.push_back(a == std::string::npos ? "" : cell.substr(a, b - a + 1));
    cell.clear();
  }
  return cells;
}

class ReportTablesCheck {
 public:
  std::vector<std::string> problems;

  // "12.34 ms" or "1.234 s" against seconds.
  void seconds(const std::string& where, const std::string& cell, const nlohmann::json& v) {
    const bool ms = cell.ends_with(" ms");
    const double printed = std::strtod(cell.c_str(), nullptr) * (ms ? 1e-3 : 1.0);
    const double half_unit = ms ? 0.005e-3 : 0.0005;
    if (!v.is_number() || std::abs(v.get<double>() - printed) > half_unit * 1.001)
      problems.push_back(fmt::format("{}: printed {}, JSON {}", where, cell, v.dump()));
  }
  // "25.0%", "+25.0%", or "n/a" / "" against null.
  void fraction(const std::string& where, const std::string& cell, const nlohmann::json& v) {
    if (cell == "n/a" || cell.empty()) {
      if (!v.is_null())
        problems.push_back(fmt::format("{}: printed '{}', JSON {}", where, cell, v.dump()));
      return;
    }
    const double printed = std::strtod(cell.c_str(), nullptr) / 100.0;
    if (!v.is_number() || std::abs(v.get<double>() - printed) > 0.0005 * 1.001)
      problems.push_back(fmt::format("{}: printed {}, JSON {}", where, cell, v.dump()));
  }
  void bytes(const std::string& where, const std::string& cell, const nlohmann::json& v) {
    if (!v.is_number_integer() || format_bytes(v.get<int64_t>()) != cell)
      problems.push_back(fmt::format("{}: printed {}, JSON {}", where, cell, v.dump()));
  }
  void text(const std::string& where, const std::string& cell, const std::string& want) {
    if (cell != want) problems.push_back(fmt::format("{}: printed {}, JSON {}", where, cell, want));
  }
  // One row of an error table (label, n, predicted, measured, median, mean, bias).
  void error_row(const std::string& where, const std::vector<std::string>& c,
                 const nlohmann::json& e) {
    if (c.size() != 7) {
      problems.push_back(fmt::format("{}: {} cells", where, c.size()));
      return;
    }
    text(where + " label", c[0], e.at("label").get<std::string>());
    text(where + " count", c[1], std::to_string(e.at("count").get<int64_t>()));
    seconds(where + " predicted_s", c[2], e.at("predicted_s"));
    seconds(where + " measured_s", c[3], e.at("measured_s"));
    fraction(where + " median_abs_rel_error", c[4], e.at("median_abs_rel_error"));
    fraction(where + " mean_abs_rel_error", c[5], e.at("mean_abs_rel_error"));
    fraction(where + " mean_rel_error", c[6], e.at("mean_rel_error"));
  }
};

inline std::vector<std::string> report_tables_mismatches(const std::string& tables,
                                                         const nlohmann::json& j) {
  ReportTablesCheck k;
  std::string section;
  int header = 0;  // tables started so far in this section
  size_t kind = 0, stage = 0, iteration = 0, memory = 0, steps = 0, window = 0, rows_seen = 0;
  std::istringstream in(tables);
  for (std::string line; std::getline(in, line);) {
    if (line.starts_with("## ")) {
      section = line.substr(3);
      header = 0;
      continue;
    }
    if (!line.starts_with("| ") || line.starts_with("|---")) continue;
    const std::vector<std::string> c = table_cells(line);
    if (c.size() > 1 && (c[1] == "n" || c[1] == "replica" || c[1] == "bubble pred")) {
      ++header;  // a table starts
      continue;
    }
    ++rows_seen;
    if (section.starts_with("Time per action kind")) {
      const nlohmann::json& e = j.at("by_kind").at(kind++);
      k.error_row("by_kind " + c[0], c, e);
    } else if (section.starts_with("Time per stage")) {
      k.error_row("stages[" + std::to_string(stage) + "].time", c,
                  j.at("stages").at(stage).at("time"));
      ++stage;
    } else if (section.starts_with("Whole iteration") && header == 1) {
      k.error_row(steps == 0 ? "step" : "step_after_warmup", c,
                  j.at(steps == 0 ? "step" : "step_after_warmup"));
      ++steps;
    } else if (section.starts_with("Iteration error over the run")) {
      const std::string w = "step_windows[" + std::to_string(window) + "]";
      const nlohmann::json& e = j.at("step_windows").at(window++);
      if (c.size() != 8) {
        k.problems.push_back(fmt::format("{}: {} cells", w, c.size()));
        continue;
      }
      k.error_row(w, std::vector<std::string>(c.begin(), c.begin() + 7), e);
      // "backward +2.1%, forward -0.3%": the kinds of the JSON, in its order.
      std::vector<std::string> printed;
      std::stringstream cells(c[7]);
      for (std::string part; std::getline(cells, part, ',');)
        printed.push_back(part.substr(part.find_first_not_of(' ')));
      const nlohmann::json& kinds = e.at("kinds");
      if (printed.size() != kinds.size()) {
        k.problems.push_back(fmt::format("{} kinds: printed {}, JSON {}", w, c[7], kinds.dump()));
        continue;
      }
      for (size_t i = 0; i < printed.size(); ++i) {
        const std::string name = kinds[i].at("kind").get<std::string>();
        k.text(w + " kinds[" + std::to_string(i) + "].kind",
               printed[i].substr(0, printed[i].find(' ')), name);
        k.fraction(w + " kinds[" + std::to_string(i) + "].share_of_step",
                   printed[i].substr(printed[i].find(' ') + 1), kinds[i].at("share_of_step"));
      }
    } else if (section.starts_with("Whole iteration")) {
      const nlohmann::json& i = j.at("iterations").at(iteration);
      const std::string w = "iterations[" + std::to_string(iteration++) + "]";
      k.text(w + " iteration", c[0], std::to_string(i.at("iteration").get<int64_t>()));
      k.text(w + " replica", c[1], std::to_string(i.at("replica").get<int64_t>()));
      k.seconds(w + " predicted_step_s", c[2], i.at("predicted_step_s"));
      k.seconds(w + " measured_step_s", c[3], i.at("measured_step_s"));
      k.fraction(w + " step_rel_error", c[4], i.at("step_rel_error"));
      k.fraction(w + " bubble_predicted", c[5], i.at("bubble_predicted"));
      k.fraction(w + " bubble_measured", c[6], i.at("bubble_measured"));
      if (!i.at("loss").is_null())
        k.text(w + " loss", c[7], fmt::format("{:.4f}", i.at("loss").get<double>()));
    } else if (section.starts_with("Bubbles and memory") && c[0] == "all") {
      k.fraction("bubble_predicted", c[1], j.at("bubble_predicted"));
      k.fraction("bubble_measured", c[2], j.at("bubble_measured"));
      k.fraction("idle_in_span_predicted", c[3], j.at("idle_in_span_predicted"));
      k.fraction("idle_in_span_measured", c[4], j.at("idle_in_span_measured"));
    } else if (section.starts_with("Bubbles and memory")) {
      const nlohmann::json& s = j.at("stages").at(memory);
      const std::string w = "stages[" + std::to_string(memory++) + "]";
      k.text(w + " rank", c[0], std::to_string(s.at("rank").get<int64_t>()));
      k.fraction(w + " bubble_predicted", c[1], s.at("bubble_predicted"));
      k.fraction(w + " bubble_measured", c[2], s.at("bubble_measured"));
      k.fraction(w + " idle_in_span_predicted", c[3], s.at("idle_in_span_predicted"));
      k.fraction(w + " idle_in_span_measured", c[4], s.at("idle_in_span_measured"));
      k.bytes(w + " peak_predicted_bytes", c[5], s.at("peak_predicted_bytes"));
      if (c[6] != "(process)")
        k.bytes(w + " peak_measured_bytes", c[6], s.at("peak_measured_bytes"));
      k.fraction(w + " peak_rel_error", c[7], s.at("peak_rel_error"));
    }
  }
  // Every entry of the JSON was printed once (one window is the whole run: not printed).
  const size_t step_rows = j.at("step_after_warmup").is_null() ? 1 : 2;
  const size_t windows = j.at("step_windows").size() > 1 ? j.at("step_windows").size() : 0;
  if (kind != j.at("by_kind").size() || stage != j.at("stages").size() ||
      memory != j.at("stages").size() || iteration != j.at("iterations").size() ||
      steps != step_rows || window != windows)
    k.problems.push_back(fmt::format(
        "rows printed: {} kinds, {} stages, {} memory rows, {} iterations, {} step rows, {} "
        "windows; JSON has {}, {}, {}, {}, {}",
        kind, stage, memory, iteration, steps, window, j.at("by_kind").size(),
        j.at("stages").size(), j.at("iterations").size(), step_rows, windows));
  if (rows_seen == 0) k.problems.push_back("no table rows found");
  return k.problems;
}

}  // namespace infinipipe::test_report
