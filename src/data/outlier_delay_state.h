// The outlier delay's documents drawn but not trained yet, as a checkpoint keeps them (entries
// [dataset, document, epoch]; lengths come back from the dataset). The trainer saves and restores
// them; `train --pp auto` restores them too, so its layout search samples the batches a resumed
// run trains (data/training_batches.h).
#pragma once

#include <cstdint>
#include <functional>

#include <nlohmann/json.hpp>

#include "data/outlier_delay.h"

namespace infinipipe::data {

nlohmann::json outlier_delay_state(const OutlierDelay& delay);

// Restores `delay` from a saved `state` (null or empty: nothing held). `delay` null means the run
// has no --outlier-delay: ConfigError when the state holds documents (they would be lost); Error
// when the state is damaged. `length` gives a document's trained length.
void outlier_delay_restore(OutlierDelay* delay, const nlohmann::json& state,
                           const std::function<int64_t(const DocumentRef&)>& length);

}  // namespace infinipipe::data
