// The report page's Gantt charts: the planned and the measured step of every traced iteration of
// replica 0, each pair on one time scale; the last is shown, a small selector (a few lines of
// inline script, nothing external) shows another.
#pragma once

#include <string>

#include "report/run_compare.h"

namespace infinipipe::report {

// The shown (last) iteration's two charts are marked with `mark` ("gantt-planned",
// "gantt-measured") for the render check; the other iterations' charts are not counted.
std::string html_gantts(const RunCompare& c,
                        std::string (*mark)(const std::string& svg, const std::string& name));

}  // namespace infinipipe::report
