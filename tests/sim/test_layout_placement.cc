// The layout search ranks rank orders where the cost model has links between hosts: every layout
// in Megatron's order and with pipelines on adjacent ranks, each replica planned with its own
// pipeline's links and simulated in that order. Big activations and small gradients put the
// pipelines inside the hosts; big gradients and small activations keep Megatron's order. Without
// host links (or on one host) the candidates and the report are those of before.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "cost/cost_model.h"
#include "cost/host_link_table.h"
#include "plan/planner.h"
#include "sim/layout_hosts.h"
#include "sim/layout_search.h"
#include "sim/layout_search_report.h"
#include "sim/simulator.h"
#include "sim/step_bound.h"

namespace infinipipe::sim {
namespace {

// Two hosts of two devices: a fast link inside each, a slow one between them.
cost::HostLinkTable two_hosts(double between = 5e7) {
  cost::HostLinkTable t;
  t.hosts = {{"host-a", 2}, {"host-b", 2}};
  t.links = {{5e9, 2e-6}, {between, 50e-6}, {between, 50e-6}, {5e9, 2e-6}};
  return t;
}

// A small Llama on the cpu preset over 4 devices.
Config cpu_model(int64_t hidden, int64_t vocab, int64_t seq_length) {
  Config cfg;
  cfg.model.num_layers = 4;
  cfg.model.hidden_size = hidden;
  cfg.model.num_attention_heads = 4;
  cfg.model.num_query_groups = 2;
  cfg.model.vocab_size = vocab;
  cfg.model.seq_length = seq_length;
  cfg.cluster.device = "cpu";
  cfg.cluster.num_devices = 4;
  cfg.cluster.devices_per_node = 4;
  cfg.training.global_batch_size = 8;
  return cfg;
}

// Long sequences over a narrow model: the pipeline hops carry far more than the gradients.
Config activations_heavy() {
  return cpu_model(64, 256, 4096);
}
const std::vector<std::vector<int64_t>> kLong = {{4096, 4096, 3000, 4096, 2500, 4096, 4096, 3500},
                                                 {4096, 1000, 4096, 4096, 4096, 2000, 4096, 4096}};

// Short sequences over a wide model with a large vocabulary: the gradients outweigh the hops.
Config gradients_heavy() {
  return cpu_model(512, 32000, 256);
}
const std::vector<std::vector<int64_t>> kShort = {{64, 128, 96, 64, 80, 128, 64, 100},
                                                  {128, 64, 64, 96, 128, 64, 72, 64}};

LayoutSpace pp2_dp2() {
  LayoutSpace s;
  s.num_devices = 4;
  s.devices_per_node = 4;
  s.pp = 2;
  s.dp = 2;
  s.vpp = 1;
  s.ulysses = 1;
  s.schedules = {Schedule::epp};
  s.exhaustive = true;
  return s;
}

const LayoutResult* find(const LayoutSearchResult& r, RankOrder order) {
  for (const LayoutResult& x : r.ranked)
    if (x.layout.order == order) return &x;
  return nullptr;
}

TEST(LayoutPlacement, WithoutHostLinksTheCandidatesAreThoseOfBefore) {
  const Config cfg = activations_heavy();
  LayoutSpace space = pp2_dp2();
  space.pp = space.dp = space.ulysses = space.vpp = 0;
  const std::vector<Layout> plain = layout_candidates(cfg, space);
  ASSERT_FALSE(plain.empty());
  for (const Layout& l : plain) {
    EXPECT_EQ(l.order, RankOrder::megatron);
    EXPECT_FALSE(l.placed);
    EXPECT_EQ(l.describe().find("order"), std::string::npos) << l.describe();
  }
  // One host holding every device: nothing crosses, so nothing to rank.
  cost::HostLinkTable one;
  one.hosts = {{"host-a", 4}};
  one.links = {{5e9, 2e-6}};
  EXPECT_EQ(layout_candidates(cfg, space, one), plain);

  // Two hosts: every layout in both orders, Megatron's first, each naming its order.
  const std::vector<Layout> placed = layout_candidates(cfg, space, two_hosts());
  ASSERT_EQ(placed.size(), 2 * plain.size());
  for (size_t i = 0; i < plain.size(); ++i) {
    for (size_t k = 0; k < 2; ++k) {
      Layout l = placed[2 * i + k];
      EXPECT_TRUE(l.placed);
      EXPECT_EQ(l.order, k == 0 ? RankOrder::megatron : RankOrder::pipelines);
      EXPECT_NE(l.describe().find(k == 0 ? "Megatron's order" : "pipelines on adjacent ranks"),
                std::string::npos);
      l.order = RankOrder::megatron;
      l.placed = false;
      EXPECT_EQ(l, plain[i]);
    }
  }
  // A fixed order is the only one, named when not Megatron's.
  space.orders = {RankOrder::pipelines};
  for (const Layout& l : layout_candidates(cfg, space)) {
    EXPECT_EQ(l.order, RankOrder::pipelines);
    EXPECT_NE(l.describe().find("pipelines on adjacent ranks"), std::string::npos);
  }

  // The report says nothing new without host links.
  const cost::CostModel cm = cost::CostModel::from_config(cfg);
  const LayoutSearchResult r = layout_search(cfg, cm, pp2_dp2(), kLong);
  ASSERT_NE(r.best(), nullptr) << r.ranked.front().reason;
  EXPECT_EQ(r.ranked.size(), 1u);
  EXPECT_EQ(layout_search_markdown(r, pp2_dp2()).find("rank order"), std::string::npos);
  const nlohmann::json j = layout_search_json(r, pp2_dp2());
  EXPECT_FALSE(j.contains("link_hosts"));
  EXPECT_FALSE(j.at("layouts").at(0).contains("rank_order"));
  EXPECT_EQ(layout_search_order_reason(r), "");
}

TEST(LayoutPlacement, BigActivationsPutEachPipelineInsideAHost) {
  const Config cfg = activations_heavy();
  const cost::CostModel cm = cost::CostModel::from_config(cfg).with_host_links(two_hosts());
  const LayoutSearchResult r = layout_search(cfg, cm, pp2_dp2(), kLong);
  ASSERT_NE(r.best(), nullptr) << r.ranked.front().reason;
  ASSERT_EQ(r.ranked.size(), 2u);
  EXPECT_EQ(r.best()->layout.order, RankOrder::pipelines) << layout_search_markdown(r, pp2_dp2());
  const LayoutResult* megatron = find(r, RankOrder::megatron);
  ASSERT_NE(megatron, nullptr);
  ASSERT_TRUE(megatron->feasible) << megatron->reason;
  EXPECT_LT(megatron->tokens_per_s, r.best()->tokens_per_s);
  EXPECT_EQ(r.link_hosts, 2);

  const std::string text = layout_search_markdown(r, pp2_dp2());
  std::printf("%s\n%s\n", text.c_str(), layout_search_order_reason(r).c_str());
  EXPECT_NE(text.find("| rank order |"), std::string::npos) << text;
  EXPECT_NE(text.find("links between 2 hosts"), std::string::npos) << text;
  EXPECT_NE(layout_search_choice(r).find("pipelines on adjacent ranks"), std::string::npos);
  const nlohmann::json j = layout_search_json(r, pp2_dp2());
  EXPECT_EQ(j.at("link_hosts"), 2);
  EXPECT_EQ(j.at("layouts").at(0).at("rank_order"), "pipelines");
  EXPECT_EQ(j.at("layouts").at(1).at("rank_order"), "megatron");
  const std::string why = layout_search_order_reason(r);
  EXPECT_EQ(why.rfind("pipelines on adjacent ranks (rank = replica x pp + stage) for pp 2 x vpp "
                      "1 x ulysses 1 x dp 2, epp: predicted ",
                      0),
            0u)
      << why;
  EXPECT_NE(why.find("tokens/s in Megatron's order"), std::string::npos) << why;

  // On a link as fast as the inside of a host the order changes nothing the search can see but
  // the shared link: the two orders come closer.
  const cost::CostModel fast = cost::CostModel::from_config(cfg).with_host_links(two_hosts(5e9));
  const LayoutSearchResult f = layout_search(cfg, fast, pp2_dp2(), kLong);
  ASSERT_NE(f.best(), nullptr);
  const double gap = r.best()->tokens_per_s / megatron->tokens_per_s;
  const LayoutResult* fm = find(f, RankOrder::megatron);
  ASSERT_TRUE(fm && fm->feasible);
  EXPECT_LT(f.best()->tokens_per_s / fm->tokens_per_s, gap);
}

TEST(LayoutPlacement, BigGradientsKeepMegatronsOrder) {
  const Config cfg = gradients_heavy();
  const cost::CostModel cm = cost::CostModel::from_config(cfg).with_host_links(two_hosts());
  const LayoutSearchResult r = layout_search(cfg, cm, pp2_dp2(), kShort);
  ASSERT_NE(r.best(), nullptr) << r.ranked.front().reason;
  EXPECT_EQ(r.best()->layout.order, RankOrder::megatron) << layout_search_markdown(r, pp2_dp2());
  EXPECT_TRUE(r.best()->layout.placed);
  const LayoutResult* pipelines = find(r, RankOrder::pipelines);
  ASSERT_TRUE(pipelines && pipelines->feasible);
  EXPECT_LT(pipelines->tokens_per_s, r.best()->tokens_per_s);
  EXPECT_NE(layout_search_choice(r).find("Megatron's order"), std::string::npos);
  EXPECT_EQ(
      layout_search_order_reason(r).rfind("Megatron's order (rank = stage x dp + replica)", 0), 0u);
}

// The score of a placed layout is the plans of each replica made with its own pipeline's links
// and simulated in its order (the all-reduce priced by the host links), as planned here.
TEST(LayoutPlacement, EachReplicaIsPlannedWithItsOwnPipelinesLinks) {
  const Config base = activations_heavy();
  const cost::CostModel cm = cost::CostModel::from_config(base).with_host_links(two_hosts());
  // Host B's link inside it is slower: the two replicas' pipelines differ in pipelines' order.
  cost::HostLinkTable uneven = two_hosts();
  uneven.links[3] = {2e8, 5e-6};
  const cost::CostModel cmu = cost::CostModel::from_config(base).with_host_links(uneven);
  for (const cost::CostModel* model : {&cm, &cmu}) {
    const LayoutSearchResult r = layout_search(base, *model, pp2_dp2(), kLong);
    for (const LayoutResult& x : r.ranked) {
      ASSERT_TRUE(x.feasible) << x.reason;
      const Config cfg = layout_config(base, pp2_dp2(), x.layout);
      EXPECT_EQ(cfg.parallel.rank_placement, x.layout.order == RankOrder::pipelines
                                                 ? RankPlacement::pipelines
                                                 : RankPlacement::megatron);
      double time = 0;
      for (const auto& batch : kLong) {
        double step = 0;
        const auto shares = plan::balance_replicas(batch, 2, *model, cfg);
        for (size_t k = 0; k < shares.size(); ++k) {
          const cost::CostModel gk =
              model->with_replica_links(layout_rank_grid(x.layout), static_cast<int64_t>(k));
          ASSERT_FALSE(gk.pipeline_links().empty());
          const plan::PlanResult p = plan::make_plan_detailed(cfg, gk, shares[k], Schedule::epp);
          const StepResult st = simulate(p.plan, gk, cfg);
          step = std::max(step, st.step_time);
          // Communication only lengthens the step: the bound made without links holds.
          EXPECT_LE(step_lower_bound(*model, cfg, shares[k]), st.step_time);
        }
        time += step;
      }
      int64_t tokens = 0;
      for (const auto& batch : kLong)
        for (int64_t n : batch) tokens += n;
      EXPECT_DOUBLE_EQ(x.tokens_per_s, static_cast<double>(tokens) / time) << x.layout.describe();
      EXPECT_LE(x.tokens_per_s, x.bound_tokens_per_s);
    }
  }
}

// Over every layout of the cluster in both orders, the pruned search keeps the exhaustive best
// and no layout beats its bound.
TEST(LayoutPlacement, PrunedSearchKeepsTheBestOverBothOrders) {
  for (const bool heavy_activations : {true, false}) {
    const Config cfg = heavy_activations ? activations_heavy() : gradients_heavy();
    const auto& batches = heavy_activations ? kLong : kShort;
    const cost::CostModel cm = cost::CostModel::from_config(cfg).with_host_links(two_hosts());
    LayoutSpace all = pp2_dp2();
    all.pp = all.dp = all.ulysses = all.vpp = 0;
    all.schedules = {Schedule::epp, Schedule::one_f_one_b};
    const LayoutSearchResult full = layout_search(cfg, cm, all, batches);
    LayoutSpace pruned_space = all;
    pruned_space.exhaustive = false;
    const LayoutSearchResult pruned = layout_search(cfg, cm, pruned_space, batches);
    ASSERT_NE(full.best(), nullptr);
    ASSERT_NE(pruned.best(), nullptr);
    EXPECT_EQ(pruned.best()->layout, full.best()->layout);
    EXPECT_EQ(pruned.best()->tokens_per_s, full.best()->tokens_per_s);
    for (const LayoutResult& x : full.ranked) {
      EXPECT_TRUE(x.layout.placed);
      if (x.feasible) {
        EXPECT_LE(x.tokens_per_s, x.bound_tokens_per_s) << x.layout.describe();
      }
    }
  }
}

// Ulysses groups are consecutive devices; one that would span the two hosts cannot run (its
// all-to-alls are priced inside a node), one inside a host can, in either order.
TEST(LayoutPlacement, UlyssesGroupsStayInsideAHost) {
  Config cfg = activations_heavy();
  cfg.model.num_attention_heads = cfg.model.num_query_groups = 8;
  cfg.cluster.num_devices = 8;
  cfg.cluster.devices_per_node = 8;
  cost::HostLinkTable t;
  t.hosts = {{"host-a", 4}, {"host-b", 4}};
  t.links = {{5e9, 2e-6}, {5e7, 50e-6}, {5e7, 50e-6}, {5e9, 2e-6}};
  const cost::CostModel cm = cost::CostModel::from_config(cfg).with_host_links(t);
  LayoutSpace space = pp2_dp2();
  space.num_devices = space.devices_per_node = 8;
  space.pp = 1;
  space.dp = 0;
  space.ulysses = 0;
  const LayoutSearchResult r = layout_search(cfg, cm, space, kLong);
  int inside = 0;
  for (const LayoutResult& x : r.ranked) {
    const std::string what = x.layout.describe() + ": " + x.reason;
    if (x.layout.ulysses == 8) {
      EXPECT_FALSE(x.feasible) << what;
      EXPECT_NE(x.reason.find("on hosts host-a and host-b"), std::string::npos) << what;
    } else if (x.layout.ulysses > 1) {
      EXPECT_EQ(x.reason.find("on hosts"), std::string::npos) << what;
      inside += x.feasible;
    }
  }
  EXPECT_GT(inside, 0);
}

TEST(LayoutPlacement, ATableTooSmallForTheDevicesIsAClearError) {
  const Config cfg = activations_heavy();
  LayoutSpace space = pp2_dp2();
  space.num_devices = 8;
  space.pp = space.dp = 0;
  EXPECT_THROW(layout_candidates(cfg, space, two_hosts()), ConfigError);
}

}  // namespace
}  // namespace infinipipe::sim
