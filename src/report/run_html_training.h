// The training part of the report page: the curves of metrics.jsonl per iteration (loss with the
// validation loss where an evaluation ran, tokens/s, learning rate, gradient norm) and the run's
// resolved configuration.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace infinipipe::report {

// The number of charts html_training draws.
inline constexpr int kTrainingCharts = 4;

// The charts of the last record of each iteration (a metrics file may hold an earlier run's
// lines too), each marked for the render check with `mark(svg, name)`.
std::string html_training(const std::vector<nlohmann::json>& metrics,
                          std::string (*mark)(const std::string& svg, const std::string& name));

// The resolved configuration the run trained with (DIR/config.yaml), folded away by default;
// "" without one.
std::string html_config(const std::string& config_yaml);

}  // namespace infinipipe::report
