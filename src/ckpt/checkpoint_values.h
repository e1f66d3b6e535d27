// What a checkpoint's numbers must satisfy, checked before each save and on every load: weights
// and moments finite, second moments non-negative, step counts positive, and an optimizer state
// that matches its kind and the saved parameters exactly. A NaN that reaches a checkpoint would
// otherwise train on silently and poison every later one.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>

namespace infinipipe {

// Index of the first NaN or infinity in `v`, nullopt when every value is finite.
std::optional<size_t> first_non_finite(std::span<const float> v);

// Before a save: Error naming the tensor, the bad value and what to do when `v` holds a NaN or
// infinity (or, for a second moment, a negative value).
void checkpoint_check_for_save(int64_t iteration, const std::string& name, std::span<const float> v,
                               bool non_negative = false);

// On load: Error naming `file` (where the values came from) when `v` is not finite (or, for a
// second moment, negative); the message says how to fall back to an earlier checkpoint.
void checkpoint_check_loaded(const std::string& file, const std::string& name,
                             std::span<const float> v, bool non_negative = false);
// The same for a loaded step count, which must be at least 1 (AdamW's bias correction divides
// by 1 - beta^step).
void checkpoint_check_loaded_step(const std::string& file, const std::string& name, int64_t step);

// True when `name` ends in ".exp_avg_sq" (a second moment, which must be >= 0).
bool checkpoint_is_second_moment(const std::string& name);

// The optimizer index must hold, for every saved parameter, exactly the entries its kind saves
// (adamw: .step, .exp_avg, .exp_avg_sq; sgd: .step; none: nothing) and nothing else; only a
// checkpoint taken before the first update (iteration 0) or without an optimizer ("none") may
// hold no state at all. Error naming `where` and the first entry that is missing or extra.
void checkpoint_check_optim_index(const std::string& where, const std::string& kind,
                                  int64_t iteration,
                                  const std::map<std::string, std::string>& model_map,
                                  const std::map<std::string, std::string>& optim_map);

}  // namespace infinipipe
