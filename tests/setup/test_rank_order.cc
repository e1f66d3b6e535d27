// decide_rank_order, the one decider of --rank-placement: a given order is kept; auto is decided
// by predicted time where host links were measured and by the bytes crossing the ranks' hosts
// otherwise, each with its one-line reason naming the rule.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/error.h"
#include "cost/host_link_table.h"
#include "setup/rank_order.h"
#include "setup/rank_order_bytes.h"

namespace infinipipe::setup {
namespace {

Config two_by_two(RankPlacement placement) {
  Config c;
  c.model.num_layers = 4;
  c.model.hidden_size = 256;
  c.model.num_attention_heads = 4;
  c.model.vocab_size = 257;
  c.model.seq_length = 4096;
  c.parallel.pipeline_parallel = 2;
  c.parallel.data_parallel = 2;
  c.parallel.rank_placement = placement;
  c.cluster.device = "cpu";
  c.validate();
  return c;
}

bool starts_with(const std::string& s, const std::string& head) {
  return s.rfind(head, 0) == 0;
}

TEST(RankOrderDecider, AGivenOrderIsKeptAndNotDecided) {
  const RankOrderDecision m = decide_rank_order(two_by_two(RankPlacement::megatron), {});
  EXPECT_EQ(m.order, RankOrder::megatron);
  EXPECT_FALSE(m.decided);
  const RankOrderDecision p = decide_rank_order(two_by_two(RankPlacement::pipelines),
                                                {{"a", "a", "b", "b"}, nullptr, true});
  EXPECT_EQ(p.order, RankOrder::pipelines);
  EXPECT_FALSE(p.decided);
}

TEST(RankOrderDecider, ByBytesOnHostNamesAsTheBytePricerRanksThem) {
  const Config cfg = two_by_two(RankPlacement::auto_);
  // Ranks 0-1 on host a, 2-3 on host b: in Megatron's order a stage's replicas share a host and
  // the pipeline hops cross; with pipelines on adjacent ranks the all-reduce crosses.
  RankOrderQuestion q;
  q.rank_hosts = {"a", "a", "b", "b"};
  const RankOrderDecision d = decide_rank_order(cfg, q);
  EXPECT_TRUE(d.decided);
  const double allreduce = 4.0 * static_cast<double>(cfg.model.params_total()) / 2;
  const double hop =
      2.0 * 16.0 * 4096 / 2 * cost::CostModel::from_config(cfg).coefficients().p2p_bytes_per_token;
  const PlacementChoice bytes = rank_placement_choose({0, 0, 1, 1}, 2, 2, allreduce, hop);
  EXPECT_EQ(d.order, bytes.order);
  EXPECT_TRUE(starts_with(d.reason, bytes.reason)) << d.reason;
  EXPECT_NE(d.reason.find("ranked by the bytes that cross hosts, as no link was measured "
                          "(--measure-links ranks the orders by predicted time)"),
            std::string::npos)
      << d.reason;
  // The same hosts under other names decide the same.
  q.rank_hosts = {"node7", "node7", "node3", "node3"};
  EXPECT_EQ(decide_rank_order(cfg, q).order, d.order);
}

TEST(RankOrderDecider, OneHostOrNoNamesIsMegatronsOrder) {
  const Config cfg = two_by_two(RankPlacement::auto_);
  for (const std::vector<std::string>& hosts :
       {std::vector<std::string>{}, std::vector<std::string>{"a", "a", "a", "a"}}) {
    RankOrderQuestion q;
    q.rank_hosts = hosts;
    const RankOrderDecision d = decide_rank_order(cfg, q);
    EXPECT_EQ(d.order, RankOrder::megatron);
    EXPECT_TRUE(starts_with(d.reason, "Megatron's order: all 4 ranks run on one host")) << d.reason;
  }
}

TEST(RankOrderDecider, ARuntimeThatMeasuresNoLinksSaysSo) {
  RankOrderQuestion q;
  q.rank_hosts = {"a", "b", "a", "b"};
  q.runtime_measures_links = false;
  const RankOrderDecision d = decide_rank_order(two_by_two(RankPlacement::auto_), q);
  EXPECT_NE(d.reason.find("the PyTorch trainer measures none"), std::string::npos) << d.reason;
  EXPECT_EQ(d.reason.find("(--measure-links ranks"), std::string::npos) << d.reason;
}

TEST(RankOrderDecider, MeasuredLinksDecideByPredictedTime) {
  const Config cfg = two_by_two(RankPlacement::auto_);
  cost::HostLinkTable t;
  t.hosts = {{"host-a", 2}, {"host-b", 2}};
  t.links = {{5e9, 2e-6}, {2e7, 100e-6}, {2e7, 100e-6}, {5e9, 2e-6}};
  const cost::CostModel cm = cost::CostModel::from_config(cfg).with_host_links(t);
  const std::vector<std::vector<int64_t>> shares = {{4096, 4096}, {4096, 4096}};
  MeasuredOrders m;
  m.cm = &cm;
  m.shares = &shares;
  RankOrderQuestion q;
  q.measured = &m;
  const RankOrderDecision d = decide_rank_order(cfg, q);
  EXPECT_TRUE(d.decided);
  EXPECT_NE(d.reason.find("predicted step"), std::string::npos) << d.reason;
  EXPECT_EQ(d.reason.find("bytes that cross"), std::string::npos) << d.reason;
}

TEST(RankOrderDecider, HostNamesMustCoverEveryRank) {
  RankOrderQuestion q;
  q.rank_hosts = {"a", "b"};
  EXPECT_THROW(decide_rank_order(two_by_two(RankPlacement::auto_), q), ConfigError);
}

}  // namespace
}  // namespace infinipipe::setup
