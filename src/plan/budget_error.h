// A memory budget too small for the batch or the plan: a ConfigError (exit 2; the user raises
// --memory-budget or changes the layout) that also carries the least budget that fits and the
// pipeline rank that needs it, so callers read numbers instead of parsing the message.
#pragma once

#include <cstdint>
#include <string>
#include <utility>

#include <fmt/format.h>

#include "core/error.h"

namespace infinipipe::plan {

class BudgetError : public ConfigError {
 public:
  BudgetError(const std::string& what, int64_t least_budget, int32_t rank)
      : ConfigError(what), least_budget_(least_budget), rank_(rank) {}
  int64_t least_budget() const { return least_budget_; }  // bytes per rank
  int32_t rank() const { return rank_; }                  // pipeline rank whose peak binds

 private:
  int64_t least_budget_;
  int32_t rank_;
};

template <typename... Args>
[[noreturn]] void fail_budget(int64_t least_budget, int32_t rank, fmt::format_string<Args...> f,
                              Args&&... args) {
  throw BudgetError(fmt::format(f, std::forward<Args>(args)...), least_budget, rank);
}

}  // namespace infinipipe::plan
