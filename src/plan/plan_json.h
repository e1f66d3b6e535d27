// The versioned JSON form of a Plan (documented in docs/plan-format.md).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "plan/plan.h"

namespace infinipipe::plan {

inline constexpr int32_t kPlanFormatVersion = 1;

nlohmann::json plan_to_json(const Plan& plan);
// Checks the format tag, version, types and index ranges; throws Error naming the bad field.
// Semantic checks (token coverage, order, deadlock, memory) are validate()'s job.
Plan plan_from_json(const nlohmann::json& j);

void plan_save(const Plan& plan, const std::string& path);  // written atomically (tmp + rename)
// The same with the planner's explanation (plan_explain.h) as the optional "explain" field.
void plan_save(const Plan& plan, const std::string& path, const nlohmann::json* explain);
Plan plan_load(const std::string& path);

}  // namespace infinipipe::plan
