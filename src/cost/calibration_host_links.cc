// Links are written per unordered pair of hosts, so a file cannot say two things about one link;
// the reader bounds every count before it allocates the hosts × hosts table.
#include "cost/calibration_host_links.h"

#include <map>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "core/error.h"
#include "core/json_read.h"

namespace infinipipe::cost {
namespace {

constexpr const char* kHostLinksHint =
    "write it again with `infinipipe profile` under mpirun across the hosts, or delete the "
    "\"host_links\" section";
// As the "ranks" section: a world of more ranks than a run could hold is damage.
constexpr int64_t kHostLinksMaxRanks = 1 << 20;
constexpr double kHostLinkMaxLatency = 60.0;

std::vector<ClusterHost> hosts_read(const nlohmann::json& sec, const std::string& at,
                                    std::map<std::string, int64_t>& index) {
  const nlohmann::json& hosts = json_field(sec, "hosts", at);
  if (!hosts.is_array() || hosts.empty() ||
      static_cast<int64_t>(hosts.size()) > kCalibrationMaxHosts)
    fail("{}.hosts must list 1 to {} hosts, got {}; {}", at, kCalibrationMaxHosts,
         json_brief(hosts), kHostLinksHint);
  std::vector<ClusterHost> out;
  for (size_t i = 0; i < hosts.size(); ++i) {
    const std::string h_at = fmt::format("{}.hosts[{}]", at, i);
    ClusterHost h;
    h.name = json_string(json_field(hosts[i], "name", h_at), h_at + ".name");
    h.slots = json_int(json_field(hosts[i], "slots", h_at), h_at + ".slots", 1, kHostLinksMaxRanks);
    if (h.name.empty()) fail("{}.name is empty; {}", h_at, kHostLinksHint);
    if (!index.emplace(h.name, static_cast<int64_t>(i)).second)
      fail("{}: host '{}' is listed twice; {}", h_at, h.name, kHostLinksHint);
    out.push_back(std::move(h));
  }
  return out;
}

const std::string& host_name(const HostLinkTable& t, int64_t h) {
  return t.hosts[static_cast<size_t>(h)].name;
}

int64_t host_named(const nlohmann::json& v, const std::string& at,
                   const std::map<std::string, int64_t>& index) {
  const std::string& name = json_string(v, at);
  const auto it = index.find(name);
  if (it == index.end())
    fail("{} names host '{}', which host_links.hosts does not list; {}", at, name, kHostLinksHint);
  return it->second;
}

void links_read(const nlohmann::json& sec, const std::string& at,
                const std::map<std::string, int64_t>& index, HostLinkTable& t) {
  const int64_t n = static_cast<int64_t>(t.hosts.size());
  const int64_t between = n * (n - 1) / 2, pairs = n * (n + 1) / 2;
  const nlohmann::json& links = json_field(sec, "links", at);
  if (!links.is_array())
    fail("{}.links must be an array of links, got {}; {}", at, json_brief(links), kHostLinksHint);
  const int64_t given = static_cast<int64_t>(links.size());
  if (given < between || given > pairs)
    fail(
        "{}.links lists {} links; {} hosts need one per pair of hosts ({}) and may add one "
        "inside each host (at most {} in all); {}",
        at, given, n, between, pairs, kHostLinksHint);
  t.links.assign(static_cast<size_t>(n * n), Link{});
  std::vector<bool> seen(static_cast<size_t>(n * n), false);
  for (size_t i = 0; i < links.size(); ++i) {
    const std::string l_at = fmt::format("{}.links[{}]", at, i);
    const nlohmann::json& pair = json_field(links[i], "between", l_at);
    if (!pair.is_array() || pair.size() != 2)
      fail("{}.between must name two hosts, got {}; {}", l_at, json_brief(pair), kHostLinksHint);
    const int64_t a = host_named(pair[0], l_at + ".between[0]", index);
    const int64_t b = host_named(pair[1], l_at + ".between[1]", index);
    const size_t ab = static_cast<size_t>(a * n + b), ba = static_cast<size_t>(b * n + a);
    if (seen[ab])
      fail("{}: the link {} <-> {} is listed twice; {}", l_at, host_name(t, a), host_name(t, b),
           kHostLinksHint);
    Link l;
    l.bandwidth = json_number(json_field(links[i], "bandwidth", l_at), l_at + ".bandwidth", 0,
                              calibration_coefficient_max("bus_bandwidth"));
    l.latency_s = json_number(json_field(links[i], "latency_s", l_at), l_at + ".latency_s", 0,
                              kHostLinkMaxLatency);
    if (a != b && l.bandwidth == 0)
      fail("{}.bandwidth must be > 0: the link between two hosts is measured; {}", l_at,
           kHostLinksHint);
    t.links[ab] = t.links[ba] = l;
    seen[ab] = seen[ba] = true;
  }
  for (int64_t a = 0; a < n; ++a)
    for (int64_t b = a + 1; b < n; ++b)
      if (!seen[static_cast<size_t>(a * n + b)])
        fail("{}.links lacks the link {} <-> {}; {}", at, host_name(t, a), host_name(t, b),
             kHostLinksHint);
}

}  // namespace

nlohmann::ordered_json calibration_host_links_to_json(const HostLinkTable& t) {
  if (t.empty()) return nullptr;
  nlohmann::ordered_json hosts = nlohmann::ordered_json::array();
  for (const ClusterHost& h : t.hosts) hosts.push_back({{"name", h.name}, {"slots", h.slots}});
  nlohmann::ordered_json links = nlohmann::ordered_json::array();
  const int64_t n = static_cast<int64_t>(t.hosts.size());
  for (int64_t a = 0; a < n; ++a)
    for (int64_t b = a; b < n; ++b) {
      const Link& l = t.between(a, b);
      links.push_back({{"between", {host_name(t, a), host_name(t, b)}},
                       {"bandwidth", l.bandwidth},
                       {"latency_s", l.latency_s}});
    }
  nlohmann::ordered_json out = {{"hosts", hosts}, {"links", links}};
  if (!t.host_of_rank.empty()) out["host_of_rank"] = t.host_of_rank;
  return out;
}

void calibration_host_links_read(const nlohmann::json& file, const std::string& where,
                                 Calibration& cal) {
  cal.host_links = HostLinkTable{};
  if (!file.contains("host_links")) return;  // one host, or written before the section
  const nlohmann::json& sec = file.at("host_links");
  const std::string at = fmt::format("calibration {}: host_links", where);
  if (!sec.is_object())
    fail("{} must be an object, got {}; {}", at, json_brief(sec), kHostLinksHint);
  HostLinkTable t;
  std::map<std::string, int64_t> index;
  t.hosts = hosts_read(sec, at, index);
  links_read(sec, at, index, t);
  if (sec.contains("host_of_rank")) {
    const nlohmann::json& ranks = sec.at("host_of_rank");
    if (!ranks.is_array() || static_cast<int64_t>(ranks.size()) > kHostLinksMaxRanks)
      fail("{}.host_of_rank must list at most {} host indices, got {}; {}", at, kHostLinksMaxRanks,
           json_brief(ranks), kHostLinksHint);
    const int64_t n = static_cast<int64_t>(t.hosts.size());
    for (size_t r = 0; r < ranks.size(); ++r)
      t.host_of_rank.push_back(
          json_int(ranks[r], fmt::format("{}.host_of_rank[{}]", at, r), 0, n - 1));
  }
  try {
    t.validate();
  } catch (const Error& e) {
    fail("calibration {}: {}; {}", where, e.what(), kHostLinksHint);
  }
  cal.host_links = std::move(t);
}

}  // namespace infinipipe::cost
