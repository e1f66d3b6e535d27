// The optional "host_links" section of a calibration file: the hosts a job ran on and the links
// between them as `infinipipe profile` under mpirun measured them (cost/host_link_table.h;
// docs/cost-model.md, "Links between hosts").
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "cost/calibration.h"

namespace infinipipe::cost {

// Hosts a file may list: far more than any job we plan for, and few enough that the hosts ×
// hosts table stays small.
inline constexpr int64_t kCalibrationMaxHosts = 4096;

// {"hosts": [{"name", "slots"}, ...], "links": [{"between": [A, B], "bandwidth", "latency_s"},
// ...] (each pair of hosts once, a host with itself included), "host_of_rank": [...] (only when
// the table has it)}; null when the table is empty.
nlohmann::ordered_json calibration_host_links_to_json(const HostLinkTable& table);
// Reads `file`'s "host_links" section into cal.host_links (empty when the file has none). Error
// naming `where` and the field for more than kCalibrationMaxHosts hosts, a pair missing between
// two hosts or listed twice, a host the pair names that is not listed, a bandwidth or latency out
// of range, or a table HostLinkTable::validate refuses.
void calibration_host_links_read(const nlohmann::json& file, const std::string& where,
                                 Calibration& cal);

}  // namespace infinipipe::cost
