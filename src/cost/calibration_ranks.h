// The optional "ranks" section of a calibration file: the time terms every rank of a
// distributed `train --cost-model-update online` run fitted for itself, and the rule by which a
// later run takes them (docs/cost-model.md, "Calibration files").
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cost/calibration.h"

namespace infinipipe::cost {

// {"pipeline_parallel": P, "data_parallel": D, "entries": [{"stage", "replica", "time_terms":
// {name: value, ...}, "action_gap_s", "step_tail_s"}, ...]}; null when cal has no ranks.
nlohmann::ordered_json calibration_ranks_to_json(const Calibration& cal);
// Reads `file`'s "ranks" section into cal.ranks (each entry cal.coeffs with its own terms, so
// cal.coeffs must be read first); none when the file has no such section. Error naming `where`
// and the field for a layout below 1, a missing or repeated (stage, replica), an entry out of
// the layout, or a term outside the range a calibration allows.
void calibration_ranks_read(const nlohmann::json& file, const std::string& where,
                            Calibration& cal);

// Per pipeline rank, the time coefficients the ranks of `replica` in a run of pp × dp start
// from: `base` (the run's coefficients) with time terms and step costs taken from cal.ranks by
//   * the same pp and dp: each rank its own entry (stage, replica);
//   * the same pp, another dp: each stage the mean of its entries over the file's replicas;
//   * another pp, or no ranks in the file: none (empty), every rank times its stages with the
//     file's shared coefficients.
std::vector<Coefficients> calibration_rank_coefficients(const Calibration& cal,
                                                        const Coefficients& base, int64_t pp,
                                                        int64_t dp, int64_t replica);

// The mean of each time term and step cost over `ranks` into `out` (other fields untouched).
void rank_time_terms_mean(const std::vector<const Coefficients*>& ranks, Coefficients& out);

}  // namespace infinipipe::cost
