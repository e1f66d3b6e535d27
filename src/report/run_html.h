// The report of a traced run as one self-contained HTML page (inline SVG and CSS, no network, a
// few lines of inline script): the planned and the measured Gantt chart on one time scale, memory
// over time per stage (predicted vs measured, the budget), the training curves, the configuration
// and the
// tables of run_compare_tables. A `<div id="render-check">` and `body[data-charts]` say, once
// the page has rendered, how many charts drew non-empty content (a headless browser checks it).
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "report/run_compare.h"
#include "report/run_trace.h"

namespace infinipipe::report {

// `trace`: the run `c` compared (its metrics, per-rank iterations and configuration).
std::string run_html(const RunCompare& c, const RunTrace& trace);
// The number of charts run_html draws for `c` (what the render check should count).
int run_html_chart_count(const RunCompare& c);
// Writes the page (tmp file + rename); Error when the file cannot be written.
void run_html_save(const std::string& html, const std::string& path);

}  // namespace infinipipe::report
