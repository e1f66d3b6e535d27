// Planning on measured host links: each replica plans on the links its own pipeline crosses, and
// the rank order is chosen by simulating the batch in both. Two hosts of two ranks, pp 2 x dp 2:
// in Megatron's order both stages' replicas share a host, so every pipeline hop crosses the slow
// link (shared by the two replicas' hops) and the all-reduces stay inside; with pipelines on
// adjacent ranks each pipeline stays inside a host and every stage's all-reduce crosses. Which
// is faster follows from what crosses: a model whose activations outweigh its gradients wants
// pipelines inside hosts, one whose gradients outweigh its activations Megatron's order.
#include "sim/rank_order_choice.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/error.h"
#include "cost/host_link_table.h"
#include "plan/planner.h"
#include "sim/simulator.h"

namespace infinipipe::sim {
namespace {

constexpr double kInside = 5e9, kBetween = 2e7;  // bytes/s: a fast host, a slow link between

cost::HostLinkTable two_hosts_slow_between() {
  cost::HostLinkTable t;
  t.hosts = {{"host-a", 2}, {"host-b", 2}};
  t.links = {{kInside, 2e-6}, {kBetween, 100e-6}, {kBetween, 100e-6}, {kInside, 2e-6}};
  return t;
}

Config two_by_two(int64_t hidden, int64_t heads, int64_t seq) {
  Config c;
  c.model.num_layers = 4;
  c.model.hidden_size = hidden;
  c.model.num_attention_heads = heads;
  c.model.vocab_size = 257;
  c.model.seq_length = seq;
  c.parallel.pipeline_parallel = 2;
  c.parallel.data_parallel = 2;
  c.cluster.device = "cpu";
  c.validate();
  return c;
}

cost::CostModel linked_model(const Config& cfg) {
  return cost::CostModel::from_config(cfg).with_host_links(two_hosts_slow_between());
}

// What crosses the slow link in each order, priced by the formulas of cost/host_link_table.h:
// Megatron's order sends a replica's activations forward and their gradients back over the link
// both replicas' hops share; pipelines on adjacent ranks all-reduce a stage's fp32 gradients
// (about a pp-th of the parameters) over it.
struct Crossing {
  double megatron_s = 0, pipelines_s = 0;
};

Crossing crossing(const Config& cfg, const cost::CostModel& cm, int64_t replica_tokens) {
  const double hop_bytes =
      2.0 * static_cast<double>(replica_tokens) * cm.coefficients().p2p_bytes_per_token;
  const double grad_bytes = 4.0 * static_cast<double>(cfg.model.params_total()) / 2;
  cost::RankGrid pipelines{2, 2, 1, RankOrder::pipelines};
  return {hop_bytes / (kBetween / 2),
          cost::host_allreduce_time(cm.host_links(), cm.coefficients(), pipelines, 0, grad_bytes)};
}

TEST(RankOrderChoice, ActivationsOutweighingGradientsKeepPipelinesInsideHosts) {
  // hidden 64: 0.6 MB of gradients per stage; 8 sequences of 4096 tokens per replica: 8 MB of
  // activations each way per hop.
  const Config cfg = two_by_two(64, 4, 4096);
  const cost::CostModel cm = linked_model(cfg);
  const std::vector<std::vector<int64_t>> shares(2, std::vector<int64_t>(8, 4096));
  const Crossing x = crossing(cfg, cm, 8 * 4096);
  ASSERT_GT(x.megatron_s, 10 * x.pipelines_s);
  const RankOrderChoice c = rank_order_choose(cfg, cm, shares, Schedule::epp);
  EXPECT_EQ(c.order, RankOrder::pipelines) << c.reason;
  // Not a near tie: the transfers overlap compute, yet the hops on the slow link cost a lot.
  EXPECT_LT(c.pipelines.step_s, 0.8 * c.megatron.step_s) << c.reason;
  EXPECT_NE(c.reason.find("pipelines on adjacent ranks (rank = replica x pp + stage): predicted "
                          "step"),
            std::string::npos)
      << c.reason;
  EXPECT_NE(c.reason.find("in Megatron's order"), std::string::npos) << c.reason;
  ASSERT_EQ(c.megatron.replica_steps.size(), 2u);
  EXPECT_DOUBLE_EQ(c.pipelines.tokens_per_s, 2 * 8 * 4096 / c.pipelines.step_s);
}

TEST(RankOrderChoice, GradientsOutweighingActivationsKeepMegatronsOrder) {
  // hidden 1024: about 60 MB of gradients per stage; 2 sequences of 128 tokens per replica:
  // 1 MB of activations each way per hop.
  const Config cfg = two_by_two(1024, 8, 256);
  const cost::CostModel cm = linked_model(cfg);
  const std::vector<std::vector<int64_t>> shares(2, std::vector<int64_t>(2, 128));
  const Crossing x = crossing(cfg, cm, 2 * 128);
  ASSERT_GT(x.pipelines_s, 10 * x.megatron_s);
  const RankOrderChoice c = rank_order_choose(cfg, cm, shares, Schedule::epp);
  EXPECT_EQ(c.order, RankOrder::megatron) << c.reason;
  EXPECT_LT(c.megatron.step_s, 0.8 * c.pipelines.step_s) << c.reason;
  EXPECT_NE(c.reason.find("Megatron's order (rank = stage x dp + replica): predicted step"),
            std::string::npos)
      << c.reason;
}

// Each replica plans on its own pipeline's links: in Megatron's order a hop crosses the slow
// link at half its rate (both replicas cross at once); with pipelines inside hosts, the host's.
TEST(RankOrderChoice, EachReplicaPlansOnTheLinksItsPipelineCrosses) {
  Config cfg = two_by_two(64, 4, 4096);
  const cost::CostModel cm = linked_model(cfg);
  for (int64_t r = 0; r < 2; ++r) {
    EXPECT_DOUBLE_EQ(replica_cost_model(cm, cfg, r).pipeline_links().at(0, 1).bandwidth,
                     kBetween / 2);
    EXPECT_DOUBLE_EQ(replica_cost_model(cm, config_with_rank_order(cfg, RankOrder::pipelines), r)
                         .pipeline_links()
                         .at(0, 1)
                         .bandwidth,
                     kInside);
  }
  // The plan simulated on those links: its first hop takes the transfer over the shared link.
  const std::vector<int64_t> share(8, 4096);
  const cost::CostModel mine = replica_cost_model(cm, cfg, 0);
  const plan::PlanResult p = plan::make_plan_detailed(cfg, mine, share, Schedule::epp);
  const StepResult s = simulate(p.plan, mine, cfg);
  const ActionRecord& first = s.actions[1][0];  // a forward, waiting for its activation
  const int32_t chunk = first.action.chunk;
  double sent = -1;
  for (const ActionRecord& a : s.actions[0])
    if (a.action.kind == plan::ActionKind::forward && a.action.chunk == chunk) sent = a.end;
  ASSERT_GE(sent, 0);
  const double hop =
      cost::link_time(cost::Link{kBetween / 2, 100e-6},
                      mine.p2p_bytes(p.plan.chunks[static_cast<size_t>(chunk)].shapes()));
  EXPECT_NEAR(first.start, sent + hop, 1e-9);
  // auto is for the chooser; without host links a replica plans on the model as it is.
  cfg.parallel.rank_placement = RankPlacement::auto_;
  EXPECT_THROW(replica_cost_model(cm, cfg, 0), ConfigError);
  EXPECT_TRUE(
      replica_cost_model(cost::CostModel::from_config(cfg), cfg, 0).pipeline_links().empty());
}

TEST(RankOrderChoice, OneOrderWhenPpOrDpIsOne) {
  Config cfg = two_by_two(64, 4, 4096);
  cfg.parallel.data_parallel = 1;
  cfg.cluster.num_devices = cfg.cluster.devices_per_node = 0;
  cfg.validate();
  const RankOrderChoice c =
      rank_order_choose(cfg, linked_model(cfg), {{4096, 4096}}, Schedule::epp);
  EXPECT_EQ(c.order, RankOrder::megatron);
  EXPECT_NE(c.reason.find("both orders place the ranks alike"), std::string::npos) << c.reason;
  EXPECT_THROW(rank_order_choose(cfg, cost::CostModel::from_config(cfg), {{4096}}, Schedule::epp),
               Error);
}

}  // namespace
}  // namespace infinipipe::sim
