#include "ckpt/checkpoint_values.h"

#include <cmath>
#include <vector>

#include <fmt/format.h>

#include "core/error.h"

namespace infinipipe {

namespace {

// The first value that breaks the rule, as (index, value), or nullopt.
std::optional<std::pair<size_t, float>> first_bad(std::span<const float> v, bool non_negative) {
  for (size_t i = 0; i < v.size(); ++i) {
    if (!std::isfinite(v[i]) || (non_negative && v[i] < 0.0f)) return std::pair{i, v[i]};
  }
  return std::nullopt;
}

std::string bad_what(std::span<const float> v, size_t at, float value) {
  return fmt::format("{} at element {} of {}", value, at, v.size());
}

const std::vector<std::string>& entries_of(const std::string& kind) {
  static const std::vector<std::string> adamw = {".step", ".exp_avg", ".exp_avg_sq"};
  static const std::vector<std::string> sgd = {".step"};
  static const std::vector<std::string> none;
  return kind == "adamw" ? adamw : kind == "sgd" ? sgd : none;
}

}  // namespace

std::optional<size_t> first_non_finite(std::span<const float> v) {
  if (auto bad = first_bad(v, false)) return bad->first;
  return std::nullopt;
}

bool checkpoint_is_second_moment(const std::string& name) {
  return name.ends_with(".exp_avg_sq");
}

void checkpoint_check_for_save(int64_t iteration, const std::string& name, std::span<const float> v,
                               bool non_negative) {
  const auto bad = first_bad(v, non_negative);
  if (!bad) return;
  fail(
      "refusing to save the checkpoint of iteration {}: {} holds {}; the run has diverged, and "
      "saving it would poison every run resumed from it. The previous checkpoint is untouched: "
      "resume from it (--load) with a lower --lr (or stronger --clip-grad)",
      iteration, name, bad_what(v, bad->first, bad->second));
}

void checkpoint_check_loaded(const std::string& file, const std::string& name,
                             std::span<const float> v, bool non_negative) {
  const auto bad = first_bad(v, non_negative);
  if (!bad) return;
  fail(
      "{}: {} holds {}; this checkpoint is poisoned (it would train on into NaN): move its "
      "iter_ folder away and --load resumes from the previous complete checkpoint",
      file, name, bad_what(v, bad->first, bad->second));
}

void checkpoint_check_loaded_step(const std::string& file, const std::string& name, int64_t step) {
  if (step >= 1) return;
  fail(
      "{}: {} is {}, but a saved optimizer state has at least one update; the checkpoint is "
      "damaged: move its iter_ folder away and --load resumes from the previous one",
      file, name, step);
}

void checkpoint_check_optim_index(const std::string& where, const std::string& kind,
                                  int64_t iteration,
                                  const std::map<std::string, std::string>& model_map,
                                  const std::map<std::string, std::string>& optim_map) {
  if (kind != "adamw" && kind != "sgd" && kind != "none") {
    fail("{}: optimizer '{}' is not one of adamw, sgd, none; the checkpoint is damaged", where,
         kind);
  }
  const char* fix =
      "the checkpoint is damaged or was edited: move its iter_ folder away and "
      "--load resumes from the previous one";
  const std::vector<std::string>& want = entries_of(kind);
  // Every entry must be one its kind saves for a saved parameter.
  for (const auto& [entry, file] : optim_map) {
    bool known = false;
    for (const std::string& suffix : want) {
      known = known || (entry.ends_with(suffix) &&
                        model_map.count(entry.substr(0, entry.size() - suffix.size())) > 0);
    }
    if (!known) {
      fail("{}: optimizer entry {} does not belong to optimizer '{}' of the saved parameters; {}",
           where, entry, kind, fix);
    }
  }
  if (optim_map.empty() && (iteration == 0 || kind == "none")) return;  // nothing was updated
  for (const auto& [param, file] : model_map) {
    for (const std::string& suffix : want) {
      if (!optim_map.count(param + suffix)) {
        fail(
            "{}: optimizer entry {}{} is missing (state.json says optimizer '{}' at iteration {}, "
            "which saves {} for every parameter); {}",
            where, param, suffix, kind, iteration, fmt::join(want, ", "), fix);
      }
    }
  }
}

}  // namespace infinipipe
