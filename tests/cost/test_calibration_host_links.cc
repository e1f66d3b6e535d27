// The "host_links" section of calibration files: the measured hosts and links survive a save and
// load, the cost model built from the file carries them, files without the section load as
// before, and a damaged or oversized section is an error naming the file and the field.
#include "cost/calibration_host_links.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "cost/small_calibration.h"

namespace infinipipe::cost {
namespace {

Calibration base_calibration() {
  return testing::small_calibration();
}

// Three hosts: a and b run two ranks each (measured inside), c one (not measured inside).
HostLinkTable three_hosts() {
  HostLinkTable t;
  t.hosts = {{"host-a", 2}, {"host-b", 2}, {"host-c", 1}};
  const Link inside{1.52e9, 4.97e-4}, ab{1.11e8, 1.3e-5}, ac{5.5e7, 2.1e-4}, bc{9.9e7, 3.3e-5};
  t.links = {inside, ab, ac, ab, {9.85e8, 5.11e-4}, bc, ac, bc, {0, 0}};
  return t;
}

void expect_same(const HostLinkTable& a, const HostLinkTable& b) {
  ASSERT_EQ(a.hosts.size(), b.hosts.size());
  for (size_t h = 0; h < a.hosts.size(); ++h) {
    EXPECT_EQ(a.hosts[h].name, b.hosts[h].name);
    EXPECT_EQ(a.hosts[h].slots, b.hosts[h].slots);
  }
  ASSERT_EQ(a.links.size(), b.links.size());
  for (size_t k = 0; k < a.links.size(); ++k) {
    EXPECT_EQ(a.links[k].bandwidth, b.links[k].bandwidth) << "link " << k;
    EXPECT_EQ(a.links[k].latency_s, b.links[k].latency_s) << "link " << k;
  }
  EXPECT_EQ(a.host_of_rank, b.host_of_rank);
}

TEST(CalibrationHostLinks, RoundTripKeepsHostsLinksAndPlacement) {
  Calibration a = base_calibration();
  a.host_links = three_hosts();
  const std::string text = calibration_to_json(a);
  expect_same(calibration_from_json(text, "test").host_links, a.host_links);
  // Each pair once, a host with itself included: 3 + 3.
  EXPECT_EQ(nlohmann::json::parse(text)["host_links"]["links"].size(), 6u);
  EXPECT_FALSE(nlohmann::json::parse(text)["host_links"].contains("host_of_rank"));
  // A job's own placement (mpirun --map-by node) is kept when there is one.
  a.host_links.host_of_rank = {0, 1, 2, 0, 1};
  expect_same(calibration_from_json(calibration_to_json(a), "test").host_links, a.host_links);
}

TEST(CalibrationHostLinks, FilesWithoutTheSectionLoadAsBefore) {
  const Calibration a = base_calibration();
  const std::string text = calibration_to_json(a);
  EXPECT_FALSE(nlohmann::json::parse(text).contains("host_links"));
  const Calibration b = calibration_from_json(text, "test");
  EXPECT_TRUE(b.host_links.empty());
  EXPECT_EQ(calibration_to_json(b), text);
}

TEST(CalibrationHostLinks, TheCostModelFromTheFileCarriesTheTable) {
  Calibration cal = base_calibration();
  cal.host_links = three_hosts();
  const std::filesystem::path path =
      std::filesystem::path(::testing::TempDir()) /
      fmt::format("host_links_{}.json", ::testing::UnitTest::GetInstance()->random_seed());
  save_calibration(cal, path.string());
  Config cfg;
  cfg.model = cal.model;
  cfg.cluster.device = "cpu";
  cfg.cluster.calibration = path.string();
  const CostModel cm = CostModel::from_config(cfg);
  std::filesystem::remove(path);
  expect_same(cm.host_links(), cal.host_links);
  // A replica of pp 2 x dp 2 in Megatron's order: stage 0 on host-a, stage 1 on host-b, and
  // both replicas' hops share the link between them.
  const RankGrid grid{2, 2, 1, RankOrder::megatron};
  EXPECT_DOUBLE_EQ(cm.with_replica_links(grid, 0).pipeline_links().at(0, 1).bandwidth, 1.11e8 / 2);
}

// The section of a good file, changed by `edit`, and the error reading it (empty: none).
template <typename Edit>
std::string error_after(Edit edit) {
  Calibration c = base_calibration();
  c.host_links = three_hosts();
  nlohmann::json j = nlohmann::json::parse(calibration_to_json(c));
  edit(j["host_links"]);
  try {
    calibration_from_json(j.dump(), "'cal.json'");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

void expect_error(const std::string& error, const std::string& part) {
  EXPECT_NE(error.find("calibration 'cal.json': "), std::string::npos) << error;
  EXPECT_NE(error.find(part), std::string::npos) << "want '" << part << "' in: " << error;
}

using J = nlohmann::json;

TEST(CalibrationHostLinks, DamagedSectionsAreErrorsNamingTheField) {
  EXPECT_EQ(error_after([](J&) {}), "");
  expect_error(error_after([](J& s) { s = 3; }), "host_links must be an object");
  expect_error(error_after([](J& s) { s.erase("hosts"); }), "lacks the field \"hosts\"");
  expect_error(error_after([](J& s) { s["hosts"] = J::array(); }), "host_links.hosts must list");
  expect_error(error_after([](J& s) { s["hosts"][1]["name"] = ""; }), "hosts[1].name is empty");
  expect_error(error_after([](J& s) { s["hosts"][1]["name"] = 7; }), "hosts[1].name");
  expect_error(error_after([](J& s) { s["hosts"][2]["name"] = "host-a"; }),
               "host 'host-a' is listed twice");
  expect_error(error_after([](J& s) { s["hosts"][0]["slots"] = 0; }), "hosts[0].slots");
  expect_error(error_after([](J& s) { s["hosts"][0]["slots"] = 1e300; }), "hosts[0].slots");
  expect_error(error_after([](J& s) { s["hosts"][0]["slots"] = 2.5; }), "hosts[0].slots");
  expect_error(error_after([](J& s) {
                 s["links"] = J::array({s["links"][1], s["links"][2]});
               }),
               "3 hosts need one per pair of hosts (3)");
  // Six entries, but host-a <-> host-b twice and host-b <-> host-c missing.
  expect_error(error_after([](J& s) { s["links"][4] = s["links"][1]; }),
               "host-a <-> host-b is listed twice");
  expect_error(error_after([](J& s) { s["links"].erase(4); }), "lacks the link host-b <-> host-c");
  expect_error(error_after([](J& s) { s["links"].push_back(s["links"][0]); }), "at most 6 in all");
  expect_error(error_after([](J& s) {
                 s["links"][1]["between"] = {"host-a", "host-x"};
               }),
               "between[1] names host 'host-x'");
  expect_error(error_after([](J& s) { s["links"][1]["between"] = {"host-a"}; }),
               "between must name two hosts");
  expect_error(error_after([](J& s) { s["links"][1]["bandwidth"] = -1; }), "links[1].bandwidth");
  expect_error(error_after([](J& s) { s["links"][1]["bandwidth"] = 1e30; }), "links[1].bandwidth");
  expect_error(error_after([](J& s) { s["links"][1]["bandwidth"] = 0; }),
               "links[1].bandwidth must be > 0");
  expect_error(error_after([](J& s) { s["links"][1]["bandwidth"] = "fast"; }),
               "links[1].bandwidth");
  expect_error(error_after([](J& s) { s["links"][1]["latency_s"] = 3600; }), "links[1].latency_s");
  expect_error(error_after([](J& s) { s["links"][1].erase("latency_s"); }),
               "lacks the field \"latency_s\"");
  expect_error(error_after([](J& s) { s["host_of_rank"] = {0, 1, 3, 0, 1}; }), "host_of_rank[2]");
  expect_error(error_after([](J& s) { s["host_of_rank"] = "0,1"; }), "host_of_rank must list");
  // The table's own rule (HostLinkTable::validate): a job's ranks fill the listed slots.
  expect_error(error_after([](J& s) {
                 s["host_of_rank"] = {0, 0, 0, 1, 2};
               }),
               "host-a runs 3 ranks of the job, but 2 slots are listed");
}

TEST(CalibrationHostLinks, SizesAreBoundedBeforeTheTableIsMade) {
  // More hosts than any file may list: refused by count, before a hosts x hosts table exists.
  const std::string many = error_after([](J& s) {
    J hosts = J::array();
    for (int64_t h = 0; h <= kCalibrationMaxHosts; ++h)
      hosts.push_back({{"name", fmt::format("h{}", h)}, {"slots", 1}});
    s["hosts"] = hosts;
  });
  expect_error(many, fmt::format("must list 1 to {} hosts", kCalibrationMaxHosts));
  // As many hosts as allowed but too few links for them: refused by count too.
  const std::string few = error_after([](J& s) {
    J hosts = J::array();
    for (int64_t h = 0; h < kCalibrationMaxHosts; ++h)
      hosts.push_back({{"name", fmt::format("h{}", h)}, {"slots", 1}});
    s["hosts"] = hosts;
  });
  expect_error(few, "need one per pair of hosts (8386560)");
  expect_error(error_after([](J& s) { s["host_of_rank"] = std::vector<int>((1 << 20) + 1, 0); }),
               "host_of_rank must list at most 1048576");
}

}  // namespace
}  // namespace infinipipe::cost
