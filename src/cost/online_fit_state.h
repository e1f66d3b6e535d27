// An online fit's state as JSON, for checkpoints: written with every double's exact value
// (nlohmann prints the shortest text that reads back to the same bits), read back with every
// field checked, so a resumed fit continues the very recursion the saving run was in.
#pragma once

#include <array>
#include <span>
#include <string>

#include <nlohmann/json.hpp>

#include "cost/online_fit.h"

namespace infinipipe::cost {

nlohmann::json online_fit_state_to_json(const OnlineFitState& s);
// Error naming `where` and the field for anything but what online_fit_state_to_json writes with
// values a fit reaches (the ranges OnlineFit::restore checks are checked there).
OnlineFitState online_fit_state_from_json(const nlohmann::json& j, const std::string& where);

// The kNumOnlineTerms time terms in OnlineTerm order, each finite and within the range a
// calibration file allows it (what a run plans with and writes as one): Error naming `where`.
void json_terms_read(const nlohmann::json& j, const std::string& where, std::span<double> out);
// An array of exactly out.size() numbers within [0, hi] (the step costs and their fit's sums).
void json_numbers_read(const nlohmann::json& j, const std::string& where, std::span<double> out,
                       double hi);

}  // namespace infinipipe::cost
