// The training part of the report page: the curves of metrics.jsonl per iteration (loss with the
// validation loss where an evaluation ran, tokens/s, learning rate, gradient norm) and the run's
// resolved configuration.
#pragma once

#include <string>
#include <vector>

#include "report/run_trace.h"
#include "runlog/metrics_record.h"

namespace infinipipe::report {

// The number of charts html_training and html_rss draw.
inline constexpr int kTrainingCharts = 5;

// The charts of the last record of each iteration (a metrics file may hold an earlier run's
// lines too), each marked for the render check with `mark(svg, name)`.
std::string html_training(const std::vector<runlog::IterationMetrics>& metrics,
                          std::string (*mark)(const std::string& svg, const std::string& name));

// Each rank's process RSS peak per traced iteration (the `rss_peak_bytes` its trace's iteration
// slices carry), next to the tracker's peak, one chart, marked "rss".
std::string html_rss(const std::vector<TracedIteration>& iterations,
                     std::string (*mark)(const std::string& svg, const std::string& name));

// The resolved configuration the run trained with (DIR/config.yaml), folded away by default;
// "" without one.
std::string html_config(const std::string& config_yaml);

}  // namespace infinipipe::report
