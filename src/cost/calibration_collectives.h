// The collective table in a calibration file: "coefficients.collectives" = {"intra": {op: row},
// "inter": {op: row}}, op one of all_gather, reduce_scatter, all_reduce, all_to_all, send_recv,
// row {"call_latency_s", "step_latency_s", "bus_bandwidth", "source"} (cost/collective_table.h;
// docs/cost-model.md, "Collective costs"). Files from before the table carry link fields instead
// (p2p_bandwidth_intra, ...); they fill every row the table leaves out, as those files priced.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "cost/collective_table.h"

namespace infinipipe::cost {

nlohmann::ordered_json calibration_collectives_to_json(const CollectiveTable& table);
// Reads `coefficients` (the file's "coefficients" object) into `table`. Error naming `where` and
// the field for a span or collective this build does not know, a row lacking a field, a value out
// of its range, or a row missing from the table with no link fields to fill it.
void calibration_collectives_read(const nlohmann::json& coefficients, const std::string& where,
                                  CollectiveTable& table);

}  // namespace infinipipe::cost
