// The collective table: NCCL's call + steps·step + factor·bytes/busbw per collective, the NIC
// share of a group across nodes, the all-to-all's two links at once, a cluster's link overrides,
// and the table's round trip through calibration files (old files priced as before).
#include <gtest/gtest.h>

#include <string>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "cost/calibration.h"
#include "cost/collective_table.h"
#include "cost/cost_model.h"

namespace infinipipe::cost {
namespace {

constexpr Collective kAll[] = {Collective::all_gather, Collective::reduce_scatter,
                               Collective::all_reduce, Collective::all_to_all,
                               Collective::send_recv};

// Every intra row: 10 us a call, 2 us a step, 100 GB/s; every inter row: 20 us, 5 us, 5 GB/s.
CollectiveTable plain() {
  CollectiveTable t;
  for (Collective op : kAll) {
    t.row(op, false) = {10e-6, 2e-6, 100e9, "intra"};
    t.row(op, true) = {20e-6, 5e-6, 5e9, "inter"};
  }
  return t;
}

TEST(CollectiveTable, FactorsAndStepsFollowNccl) {
  const CollectiveTable t = plain();
  const DeviceGroup four{0, 4, 8};
  const double v = 4e6;
  EXPECT_DOUBLE_EQ(t.time(Collective::all_gather, four, v), 10e-6 + 3 * 2e-6 + 0.75 * v / 100e9);
  EXPECT_DOUBLE_EQ(t.time(Collective::reduce_scatter, four, v),
                   10e-6 + 3 * 2e-6 + 0.75 * v / 100e9);
  EXPECT_DOUBLE_EQ(t.time(Collective::all_reduce, four, v), 10e-6 + 6 * 2e-6 + 1.5 * v / 100e9);
  EXPECT_DOUBLE_EQ(t.time(Collective::all_to_all, four, v), 10e-6 + 0.75 * v / 100e9);
  EXPECT_DOUBLE_EQ(t.time(Collective::send_recv, {0, 2, 8}, v), 10e-6 + v / 100e9);
  for (Collective op : kAll) {
    EXPECT_EQ(t.time(op, four, 0), 0.0) << collective_name(op);
    if (op != Collective::send_recv) {
      EXPECT_EQ(t.time(op, {3, 1, 8}, v), 0.0) << collective_name(op);
    }
  }
}

TEST(CollectiveTable, RingsAcrossNodesGetTheirDevicesNicShares) {
  const CollectiveTable t = plain();
  EXPECT_FALSE(group_spans_nodes({8, 8, 8}));
  EXPECT_TRUE(group_spans_nodes({0, 32, 8}));
  EXPECT_EQ(group_fewest_on_a_node({0, 32, 8}), 8);
  EXPECT_EQ(group_fewest_on_a_node({4, 12, 8}), 4);  // 4 on the first node, 8 on the next
  EXPECT_TRUE(group_spans_nodes({0, 4, 0}));          // no node size: one device a node
  EXPECT_DOUBLE_EQ(t.ring_bandwidth(Collective::all_gather, {0, 8, 8}), 100e9);
  EXPECT_DOUBLE_EQ(t.ring_bandwidth(Collective::all_gather, {0, 32, 8}), 8 * 5e9);
  EXPECT_DOUBLE_EQ(t.ring_bandwidth(Collective::all_gather, {4, 12, 8}), 4 * 5e9);
  EXPECT_DOUBLE_EQ(t.ring_bandwidth(Collective::all_gather, {0, 4, 1}), 5e9);
  EXPECT_DOUBLE_EQ(t.ring_bandwidth(Collective::all_gather, {0, 4, 0}), 5e9);
  // Never above the NVLink the rings also cross.
  CollectiveTable fast = t;
  fast.row(Collective::all_reduce, true).bus_bandwidth = 50e9;
  EXPECT_DOUBLE_EQ(fast.ring_bandwidth(Collective::all_reduce, {0, 32, 8}), 100e9);
  // Across nodes the inter row's latencies.
  EXPECT_DOUBLE_EQ(t.time(Collective::all_reduce, {0, 32, 8}, 8e9),
                   20e-6 + 62 * 5e-6 + 62.0 / 32 * 8e9 / 40e9);
  // A send/recv between nodes: one device's NIC share.
  EXPECT_DOUBLE_EQ(t.time(Collective::send_recv, {7, 2, 8}, 1e6), 20e-6 + 1e6 / 5e9);
}

TEST(CollectiveTable, AllToAllAcrossNodesMovesOverBothLinksAtOnce) {
  const CollectiveTable t = plain();
  const double v = 16e6;
  // 16 over two nodes: 7 peers on NVLink, 8 behind the NIC; the NIC binds.
  EXPECT_DOUBLE_EQ(t.time(Collective::all_to_all, {0, 16, 8}, v),
                   20e-6 + v / 16 * std::max(7 / 100e9, 8 / 5e9));
  // With a NIC as fast as NVLink the NVLink share binds.
  CollectiveTable fat = t;
  fat.row(Collective::all_to_all, true).bus_bandwidth = 1e12;
  EXPECT_DOUBLE_EQ(fat.time(Collective::all_to_all, {0, 16, 8}, v), 20e-6 + v / 16 * 7 / 100e9);
  // Not aligned to nodes (4 + 8): the device with 4 on its node sends 8 peers' shares out, the
  // one with 8 sends 7 over NVLink; the slowest device sets the time.
  EXPECT_DOUBLE_EQ(fat.time(Collective::all_to_all, {4, 12, 8}, v),
                   20e-6 + v / 12 * std::max(7 / 100e9, 8 / 1e12));
  EXPECT_DOUBLE_EQ(t.time(Collective::all_to_all, {4, 12, 8}, v), 20e-6 + v / 12 * 8 / 5e9);
}

TEST(CollectiveTable, OneLinkPricesAsBeforeTheTable) {
  const CollectiveTable t = link_table({100e9, 5e9, 2e-6, 30e-6, 60e9, 80e-6}, "links");
  EXPECT_DOUBLE_EQ(t.time(Collective::send_recv, {0, 2, 2}, 1e6), 1e6 / 100e9 + 2e-6);
  EXPECT_DOUBLE_EQ(t.time(Collective::send_recv, {0, 2, 1}, 1e6), 1e6 / 5e9 + 30e-6);
  EXPECT_DOUBLE_EQ(t.time(Collective::all_gather, {0, 4, 8}, 4e6), 0.75 * 4e6 / 100e9 + 3 * 2e-6);
  EXPECT_DOUBLE_EQ(t.time(Collective::all_reduce, {0, 32, 8}, 8e9),
                   2 * (31.0 / 32 * 8e9 / 40e9 + 31 * 30e-6));
  EXPECT_DOUBLE_EQ(t.time(Collective::all_to_all, {0, 8, 8}, 8e6), 80e-6 + 7.0 / 8 * 8e6 / 60e9);
  EXPECT_DOUBLE_EQ(t.time(Collective::all_to_all, {0, 16, 1}, 16e6), 80e-6 + 16e6 / 16 * 15 / 5e9);
  EXPECT_EQ(t.row(Collective::all_reduce, true).source, "links");
}

TEST(CollectiveTable, AGivenLinkReplacesItsSpanInEveryRow) {
  CollectiveTable t = plain();
  override_span(t, true, 12e9, 40e-6);
  for (Collective op : kAll) {
    const bool ring = op != Collective::all_to_all && op != Collective::send_recv;
    const CollectiveCost& r = t.row(op, true);
    EXPECT_EQ(r.bus_bandwidth, 12e9) << collective_name(op);
    EXPECT_EQ(r.call_latency_s, ring ? 0.0 : 40e-6) << collective_name(op);
    EXPECT_EQ(r.step_latency_s, ring ? 40e-6 : 0.0) << collective_name(op);
    EXPECT_EQ(t.row(op, false).bus_bandwidth, 100e9) << "the other span stays";
  }
  // Through the configuration: a preset's rows, then the cluster's links.
  Config cfg;
  cfg.cluster.device = "h100-80gb";
  cfg.cluster.num_devices = 16;
  cfg.cluster.devices_per_node = 8;
  cfg.training.bf16 = true;
  cfg.cluster.intra_node_bandwidth = 77e9;
  cfg.cluster.inter_node_latency = 9e-6;
  const CostModel cm = CostModel::from_config(cfg);
  const CollectiveTable& got = cm.coefficients().collectives;
  const CollectiveTable preset = device_preset("h100-80gb", true).collectives;
  for (Collective op : kAll) {
    EXPECT_EQ(got.row(op, false).bus_bandwidth, 77e9) << collective_name(op);
    EXPECT_EQ(got.row(op, true).bus_bandwidth, preset.row(op, true).bus_bandwidth);
    EXPECT_EQ(got.row(op, false).call_latency_s, preset.row(op, false).call_latency_s);
  }
  EXPECT_EQ(got.row(Collective::all_gather, true).step_latency_s, 9e-6);
  EXPECT_EQ(got.row(Collective::send_recv, true).call_latency_s, 9e-6);
}

Calibration calibration() {
  Calibration c;
  c.model.num_layers = 4;
  c.model.hidden_size = 256;
  c.model.num_attention_heads = 4;
  c.model.seq_length = 4096;
  c.device = device_preset("cpu", false);
  c.coeffs = CostModel::derive_coefficients(c.model, c.device, 1, false);
  c.coeffs.collectives = plain();
  return c;
}

void expect_same(const CollectiveTable& a, const CollectiveTable& b) {
  for (const bool inter : {false, true})
    for (Collective op : kAll) {
      const CollectiveCost &x = a.row(op, inter), &y = b.row(op, inter);
      EXPECT_EQ(x.call_latency_s, y.call_latency_s) << collective_name(op) << inter;
      EXPECT_EQ(x.step_latency_s, y.step_latency_s) << collective_name(op) << inter;
      EXPECT_EQ(x.bus_bandwidth, y.bus_bandwidth) << collective_name(op) << inter;
      EXPECT_EQ(x.source, y.source) << collective_name(op) << inter;
    }
}

TEST(CollectiveTable, CalibrationFilesCarryTheTable) {
  const Calibration c = calibration();
  const Calibration back = calibration_from_json(calibration_to_json(c), "cal.json");
  expect_same(back.coeffs.collectives, c.coeffs.collectives);
}

// A file from before the table: its link fields price exactly as they did, and a "collectives"
// object given beside them replaces only the rows it names.
TEST(CollectiveTable, OldFilesLinkFieldsFillTheTable) {
  nlohmann::json j = nlohmann::json::parse(calibration_to_json(calibration()));
  nlohmann::json& co = j["coefficients"];
  co.erase("collectives");
  co["p2p_bandwidth_intra"] = 8e9;
  co["p2p_bandwidth_inter"] = 1e9;
  co["p2p_latency_s"] = 5e-6;
  co["alltoall_bandwidth"] = 8e9;
  const CollectiveTable want =
      link_table({8e9, 1e9, 5e-6, 5e-6, 8e9, 5e-6}, "the calibration file's link fields");
  expect_same(calibration_from_json(j.dump(), "old.json").coeffs.collectives, want);
  co["p2p_latency_inter_s"] = 50e-6;
  co["alltoall_latency_s"] = 80e-6;
  const CollectiveTable later = calibration_from_json(j.dump(), "old.json").coeffs.collectives;
  EXPECT_EQ(later.row(Collective::send_recv, true).call_latency_s, 50e-6);
  EXPECT_EQ(later.row(Collective::all_to_all, false).call_latency_s, 80e-6);
  co["collectives"] = {
      {"inter",
       {{"all_reduce",
         {{"call_latency_s", 1e-5}, {"step_latency_s", 0}, {"bus_bandwidth", 3e9}}}}}};
  const CollectiveTable mixed = calibration_from_json(j.dump(), "old.json").coeffs.collectives;
  EXPECT_EQ(mixed.row(Collective::all_reduce, true).bus_bandwidth, 3e9);
  EXPECT_EQ(mixed.row(Collective::all_reduce, true).source, "the calibration file");
  EXPECT_EQ(mixed.row(Collective::all_gather, true).bus_bandwidth, 1e9);
}

std::string error_of(const nlohmann::json& j) {
  try {
    calibration_from_json(j.dump(), "cal.json");
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

TEST(CollectiveTable, BadRowsAreRefusedByName) {
  const nlohmann::json good = nlohmann::json::parse(calibration_to_json(calibration()));
  ASSERT_EQ(error_of(good), "no error");
  const auto with = [&](const char* span, const char* op, const char* key,
                        const nlohmann::json& v) {
    nlohmann::json j = good;
    j["coefficients"]["collectives"][span][op][key] = v;
    return error_of(j);
  };
  const auto has = [](const std::string& text, const std::string& part) {
    return text.find(part) != std::string::npos;
  };
  EXPECT_TRUE(has(with("intra", "all_reduce", "call_latency_s", -1),
                  "coefficients.collectives.intra.all_reduce.call_latency_s = -1 must be >= 0 and "
                  "at most 60"));
  EXPECT_TRUE(has(with("inter", "all_gather", "step_latency_s", 61), "step_latency_s"));
  EXPECT_TRUE(has(with("inter", "all_gather", "step_latency_s", "1"), "must be a number"));
  EXPECT_TRUE(has(with("intra", "send_recv", "bus_bandwidth", 0),
                  "intra.send_recv.bus_bandwidth = 0 must be > 0"));
  EXPECT_TRUE(has(with("inter", "all_to_all", "bus_bandwidth", 1e16), "at most 1e+15"));
  EXPECT_TRUE(has(with("inter", "all_to_all", "bus_width", 1), "unknown field"));
  EXPECT_TRUE(has(with("inter", "source", "x", 1), "unknown collective"));
  EXPECT_TRUE(has(with("inter", "all_to_all", "source", 7), "source"));
  nlohmann::json j = good;
  j["coefficients"]["collectives"]["across"] = nlohmann::json::object();
  EXPECT_TRUE(has(error_of(j), "unknown span"));
  j = good;
  j["coefficients"]["collectives"]["inter"]["all_reduce"] = 5;
  EXPECT_TRUE(has(error_of(j), "inter.all_reduce must be an object"));
  j = good;
  j["coefficients"]["collectives"] = {1, 2};
  EXPECT_TRUE(has(error_of(j), "coefficients.collectives must be an object"));
  // A row left out with no link fields to fill it.
  j = good;
  j["coefficients"]["collectives"]["intra"].erase("all_gather");
  EXPECT_TRUE(has(error_of(j), "coefficients.collectives.intra.all_gather is missing"));
}

// The overlap slowdown travels with the table; a file without it (written before it) has none,
// and a value below 1 (a speed-up) or past 4 is refused by name.
TEST(CollectiveTable, OverlapSlowdownIsReadWrittenAndBounded) {
  Calibration cal = calibration();
  cal.coeffs.collectives.overlap_slowdown = 1.25;
  const nlohmann::json good = nlohmann::json::parse(calibration_to_json(cal));
  EXPECT_EQ(good["coefficients"]["collectives"]["overlap_slowdown"], 1.25);
  EXPECT_EQ(calibration_from_json(good.dump(), "cal.json").coeffs.collectives.overlap_slowdown,
            1.25);
  nlohmann::json j = good;
  j["coefficients"]["collectives"].erase("overlap_slowdown");
  EXPECT_EQ(calibration_from_json(j.dump(), "cal.json").coeffs.collectives.overlap_slowdown, 1.0);
  for (const nlohmann::json& bad :
       {nlohmann::json(0.5), nlohmann::json(4.5), nlohmann::json("x")}) {
    j = good;
    j["coefficients"]["collectives"]["overlap_slowdown"] = bad;
    EXPECT_NE(error_of(j).find("coefficients.collectives.overlap_slowdown"), std::string::npos)
        << bad.dump() << ": " << error_of(j);
  }
}

}  // namespace
}  // namespace infinipipe::cost
