#include "cost/calibration_collectives.h"

#include <cmath>
#include <optional>

#include "core/error.h"
#include "core/json_read.h"
#include "cost/calibration.h"

namespace infinipipe::cost {
namespace {

constexpr const char* kSpans[] = {"intra", "inter"};
constexpr double kMostOverlapSlowdown = 4.0;  // Galvatron's profiles: 1.13-1.3

// Bounds as for the other coefficients: seconds at most a minute, bandwidth > 0 and at most a PB/s.
double number(const nlohmann::json& row, const char* key, const std::string& at, bool positive) {
  const std::string field = at + "." + key;
  const double v = json_number(json_field(row, key, at), field);
  const double most = calibration_coefficient_max(key);
  if (v < 0 || (positive && v == 0) || v > most)
    fail("{} = {} must be {} and at most {:g}", field, v, positive ? "> 0" : ">= 0", most);
  return v;
}

CollectiveCost row_read(const nlohmann::json& row, const std::string& at) {
  CollectiveCost r;
  r.call_latency_s = number(row, "call_latency_s", at, false);
  r.step_latency_s = number(row, "step_latency_s", at, false);
  r.bus_bandwidth = number(row, "bus_bandwidth", at, true);
  r.source = row.contains("source") ? json_string(row.at("source"), at + ".source")
                                    : std::string("the calibration file");
  for (const auto& field : row.items())
    if (field.key() != "call_latency_s" && field.key() != "step_latency_s" &&
        field.key() != "bus_bandwidth" && field.key() != "source")
      fail("{} has an unknown field {}", at, json_brief(field.key()));
  return r;
}

// The link fields of files written before the table, checked as they always were.
std::optional<double> link_field(const nlohmann::json& co, const char* key,
                                 const std::string& where) {
  if (!co.contains(key)) return std::nullopt;
  const nlohmann::json& v = co.at(key);
  if (!v.is_number())
    fail("calibration {}: field 'coefficients.{}' has the wrong type ({}: {})", where, key,
         v.type_name(), json_brief(v));
  const double x = v.get<double>(), most = calibration_coefficient_max(key);
  const bool positive = calibration_coefficient_positive(key);
  if (!std::isfinite(x) || x < 0 || (x == 0 && positive) || x > most)
    fail("calibration {}: coefficients.{} = {} must be {} and at most {:g}", where, key, x,
         positive ? "> 0" : ">= 0", most);
  return x;
}

// The rows the old link fields imply: an unset inter-node or all-to-all latency is the link's.
std::optional<CollectiveTable> old_links(const nlohmann::json& co, const std::string& where) {
  const auto intra = link_field(co, "p2p_bandwidth_intra", where);
  const auto inter = link_field(co, "p2p_bandwidth_inter", where);
  const auto lat = link_field(co, "p2p_latency_s", where);
  const auto a2a = link_field(co, "alltoall_bandwidth", where);
  const auto lat_inter = link_field(co, "p2p_latency_inter_s", where);
  const auto a2a_lat = link_field(co, "alltoall_latency_s", where);
  if (!intra || !inter || !lat || !a2a) return std::nullopt;
  const auto or_link = [&](const std::optional<double>& v) { return v && *v > 0 ? *v : *lat; };
  return link_table({*intra, *inter, *lat, or_link(lat_inter), *a2a, or_link(a2a_lat)},
                    "the calibration file's link fields");
}

}  // namespace

nlohmann::ordered_json calibration_collectives_to_json(const CollectiveTable& table) {
  nlohmann::ordered_json out = nlohmann::ordered_json::object();
  for (const bool inter : {false, true}) {
    nlohmann::ordered_json span = nlohmann::ordered_json::object();
    for (int k = 0; k < kCollectives; ++k) {
      const auto op = static_cast<Collective>(k);
      const CollectiveCost& r = table.row(op, inter);
      span[collective_name(op)] = {{"call_latency_s", r.call_latency_s},
                                   {"step_latency_s", r.step_latency_s},
                                   {"bus_bandwidth", r.bus_bandwidth},
                                   {"source", r.source}};
    }
    out[kSpans[inter ? 1 : 0]] = std::move(span);
  }
  out["overlap_slowdown"] = table.overlap_slowdown;
  return out;
}

void calibration_collectives_read(const nlohmann::json& co, const std::string& where,
                                  CollectiveTable& table) {
  const std::optional<CollectiveTable> links = old_links(co, where);
  const std::string at = "calibration " + where + ": coefficients.collectives";
  const nlohmann::json none = nlohmann::json::object();
  const nlohmann::json& given = co.contains("collectives") ? co.at("collectives") : none;
  if (!given.is_object()) fail("{} must be an object, got {}", at, json_brief(given));
  for (const auto& span : given.items())
    if (span.key() != kSpans[0] && span.key() != kSpans[1] && span.key() != "overlap_slowdown")
      fail("{} has an unknown span {}: use intra or inter (and overlap_slowdown)", at,
           json_brief(span.key()));
  // Optional (files before it have none: no slowdown, as the CPU engine has).
  table.overlap_slowdown = 1.0;
  table.overlap_source = "the calibration file gives none: 1";
  if (given.contains("overlap_slowdown")) {
    table.overlap_source = "the calibration file";
    const std::string field = at + ".overlap_slowdown";
    const double v = json_number(given.at("overlap_slowdown"), field);
    if (!(v >= 1.0 && v <= kMostOverlapSlowdown))
      fail("{} = {} must be at least 1 (no slowdown) and at most {:g}", field, v,
           kMostOverlapSlowdown);
    table.overlap_slowdown = v;
  }
  for (const bool inter : {false, true}) {
    const char* span = kSpans[inter ? 1 : 0];
    const nlohmann::json& rows = given.contains(span) ? given.at(span) : none;
    const std::string span_at = at + "." + span;
    if (!rows.is_object()) fail("{} must be an object, got {}", span_at, json_brief(rows));
    for (const auto& row : rows.items()) {
      bool known = false;
      for (int k = 0; k < kCollectives; ++k) known |= row.key() == collective_name(Collective(k));
      if (!known)
        fail(
            "{} has an unknown collective {}: use all_gather, reduce_scatter, all_reduce, "
            "all_to_all or send_recv",
            span_at, json_brief(row.key()));
    }
    for (int k = 0; k < kCollectives; ++k) {
      const auto op = static_cast<Collective>(k);
      const std::string row_at = span_at + "." + collective_name(op);
      if (rows.contains(collective_name(op)))
        table.row(op, inter) = row_read(rows.at(collective_name(op)), row_at);
      else if (links)
        table.row(op, inter) = links->row(op, inter);
      else
        fail(
            "{} is missing, and so are the link fields that would fill it (p2p_bandwidth_intra, "
            "p2p_bandwidth_inter, p2p_latency_s, alltoall_bandwidth); write it again with "
            "`infinipipe profile`",
            row_at);
    }
  }
}

}  // namespace infinipipe::cost
