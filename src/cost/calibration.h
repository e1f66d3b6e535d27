// Calibration files: the cost model's coefficients measured on a real machine (written by
// `infinipipe profile`, read by CostModel::from_config). Versioned JSON; see docs/cost-model.md.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/config.h"
#include "cost/cost_model.h"

namespace infinipipe::cost {

inline constexpr int kCalibrationVersion = 2;

// One training rank's own time coefficients, as `train --cost-model-update online` learned them.
struct CalibrationRank {
  int64_t stage = 0;    // pipeline rank
  int64_t replica = 0;  // data-parallel replica
  // The file's coefficients with this rank's time terms and step costs (action gap, tail).
  Coefficients coeffs;
};

struct Calibration {
  int version = kCalibrationVersion;
  // metadata
  std::string machine;  // e.g. hostname / CPU model
  std::string date;     // ISO 8601, UTC
  std::string notes;
  ModelConfig model;  // the model the fit was made for
  int64_t ulysses_degree = 1;
  bool bf16 = false;
  double fit_residual_forward = 0;   // relative RMS error of the time fit, forward
  double fit_residual_backward = 0;  // relative RMS error of the time fit, backward
  // the device the coefficients stand for (name, memory, links, sources)
  DeviceSpec device;
  Coefficients coeffs;
  // Optional (calibration_ranks.h): every rank's own terms and the pp × dp layout they trained
  // in, in world-rank order (stage × dp + replica); empty and 0 in `profile`'s files.
  int64_t pipeline_parallel = 0;
  int64_t data_parallel = 0;
  std::vector<CalibrationRank> ranks;
  // Optional (calibration_host_links.h): the hosts `profile` under mpirun measured and the links
  // between them (host_link_table.h); empty when one host or not measured.
  HostLinkTable host_links;
};

// Throws Error when the file is missing, not JSON, of another version, or lacks a field.
Calibration load_calibration(const std::string& path);
// Writes atomically (temporary file, then rename). Throws Error on I/O failure.
void save_calibration(const Calibration& cal, const std::string& path);

std::string calibration_to_json(const Calibration& cal);  // pretty-printed
Calibration calibration_from_json(const std::string& text, const std::string& where);

// The range calibration_from_json allows the coefficient `key` ("alpha1", "backward_factor",
// ...): at most calibration_coefficient_max, and > 0 where the formulas divide by it.
double calibration_coefficient_max(const std::string& key);
bool calibration_coefficient_positive(const std::string& key);

}  // namespace infinipipe::cost
