// A self-contained SVG Gantt chart of one executed (simulated or measured) step: one row per
// pipeline rank, forwards and backwards coloured by chunk (backward darker), the recompute part
// of a backward hatched; below, a memory-over-time curve per rank with the budget line.
#pragma once

#include <string>

#include "sim/executor.h"

namespace infinipipe::report {

struct GanttOptions {
  std::string title;         // "" = "<schedule> — <source>, step <time>"
  int width = 1400;          // pixels of the whole picture
  int row_height = 26;       // one rank's action row
  int memory_height = 70;    // one rank's memory panel
  bool label_chunks = true;  // chunk ids inside boxes wide enough
  // Seconds the time axis covers (0 = the step's own time): give two charts the same span to
  // draw them on one scale (planned next to measured).
  double time_span = 0;
  bool memory = true;  // the memory panels below the rows
};

std::string gantt_svg(const sim::StepResult& step, const GanttOptions& opts = {});
// Writes the SVG; throws Error when the file cannot be written.
void gantt_svg_save(const sim::StepResult& step, const std::string& path,
                    const GanttOptions& opts = {});

}  // namespace infinipipe::report
