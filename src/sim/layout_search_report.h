// The layout search's result for people and programs: a markdown table (feasible layouts best
// first, then those not evaluated with their bound, then the infeasible ones with their reason),
// one line naming the chosen layout, and JSON. Where the search ranked rank orders (host links
// spanning two hosts or more) each layout names its order: a "rank order" column, "rank_order"
// in JSON, and the line names the links' hosts.
#pragma once

#include <cstddef>
#include <string>

#include <nlohmann/json.hpp>

#include "sim/layout_search.h"

namespace infinipipe::sim {

std::string layout_search_markdown(const LayoutSearchResult& r, const LayoutSpace& space);
// "pp 2 x vpp 1 x ulysses 1 x dp 2, epp[, <order>]: predicted 1234 tokens/s, step 1.234 s (best of
// 7 feasible layouts of 12, 4 sampled batch(es); 3 not evaluated: their bound is below it)", the
// last part only when some were not; ConfigError listing every layout's reason when none is
// feasible.
std::string layout_search_choice(const LayoutSearchResult& r);
// Where the search ranked rank orders: why the best layout runs in its order, against the same
// layout in the other order — "pipelines on adjacent ranks (rank = replica x pp + stage) for pp 2
// x vpp 1 x ulysses 1 x dp 2, epp: predicted 41234 tokens/s, against 37012 tokens/s in
// Megatron's order", the other's bound when it was not evaluated, its reason when it cannot run.
// "" when no order was ranked or none is feasible.
std::string layout_search_order_reason(const LayoutSearchResult& r);
nlohmann::json layout_search_json(const LayoutSearchResult& r, const LayoutSpace& space);
// Layouts not evaluated: their bound on tokens/s is below the best.
size_t layout_search_skipped(const LayoutSearchResult& r);

}  // namespace infinipipe::sim
