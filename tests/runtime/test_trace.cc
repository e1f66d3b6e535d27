// `train --trace DIR`: each process's Chrome trace is valid JSON after every iteration, every
// planned action appears exactly once per iteration with dur >= 0, each lane is in time order,
// memory counters follow the actions, and the plans and config the report needs are written.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/synth_corpus.h"
#include "common/tiny_train.h"
#include "common/trainer_dir_test.h"
#include "core/error.h"
#include "obs/trace.h"
#include "plan/plan_json.h"
#include "runtime/train.h"

namespace infinipipe::runtime {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

json json_read(const fs::path& p) {
  std::ifstream in(p);
  std::ostringstream s;
  s << in.rdbuf();
  return json::parse(s.str());  // throws on invalid JSON: the test fails
}

class TraceTest : public testing::TrainerDirTest {
 protected:
  TraceTest() : TrainerDirTest("trace") {}
  TrainOptions options(int64_t iters, Schedule schedule) {
    const std::string corpus = (dir_ / "corpus").string();
    testing::synth_corpus_write_small(corpus, 64);
    TrainOptions o = testing::tiny_train_options(2, iters, corpus);
    Config& c = o.config;
    c.model.num_query_groups = 0;  // plain multi-head attention
    c.parallel.schedule = schedule;
    c.validate();
    o.config_yaml = "num-layers: 2\n";
    o.trace_dir = (dir_ / "trace").string();
    return o;
  }
};

// Checks one process's trace against the plans it ran; returns the iterations it holds.
std::set<int64_t> trace_check(const json& t, const fs::path& trace_dir) {
  EXPECT_EQ(t.at("displayTimeUnit"), "ms");
  EXPECT_EQ(t.at("metadata").at("format"), "infinipipe-trace");
  std::map<int64_t, std::multiset<std::tuple<int32_t, std::string, int32_t, int32_t>>> seen;
  std::map<std::pair<int32_t, int32_t>, double> lane_last;  // (pid, tid) -> last ts
  std::set<int64_t> iterations;
  int memory = 0, plan_events = 0, optimizer_events = 0;
  std::map<uint64_t, int> flow_starts, flow_finishes;
  std::set<std::pair<int32_t, int32_t>> named_lanes, used_lanes;
  for (const json& e : t.at("traceEvents")) {
    const std::string ph = e.at("ph");
    EXPECT_TRUE(ph == "X" || ph == "C" || ph == "M" || ph == "s" || ph == "f") << e.dump();
    if (ph == "M") {
      if (e.at("name") == "thread_name")
        named_lanes.insert({e.at("pid").get<int32_t>(), e.at("tid").get<int32_t>()});
      continue;
    }
    if (ph == "s" || ph == "f") {
      EXPECT_EQ(e.at("cat"), "p2p");
      EXPECT_EQ(e.at("tid"), obs::trace_lane_compute);
      if (ph == "f") {
        EXPECT_EQ(e.at("bp"), "e") << "a finish binds to the receiving action";
      }
      ++(ph == "s" ? flow_starts : flow_finishes)[e.at("id").get<uint64_t>()];
      continue;
    }
    used_lanes.insert({e.at("pid").get<int32_t>(), e.at("tid").get<int32_t>()});
    const double ts = e.at("ts");
    EXPECT_GE(ts, 0.0) << e.dump();
    const auto lane = std::make_pair(e.at("pid").get<int32_t>(), e.at("tid").get<int32_t>());
    if (ph == "C") {
      EXPECT_GE(e.at("args").at("bytes").get<int64_t>(), 0);
      EXPECT_GE(ts, lane_last[lane]) << "memory samples out of order";
      ++memory;
      continue;
    }
    EXPECT_GE(e.at("dur").get<double>(), 0.0) << e.dump();
    if (lane_last.count(lane) != 0) {
      EXPECT_GE(ts, lane_last[lane]) << "lane out of order";
    }
    lane_last[lane] = ts;
    const std::string cat = e.at("cat");
    const json& a = e.at("args");
    if (cat == "forward" || cat == "backward") {
      EXPECT_EQ(a.at("kind"), cat);
      EXPECT_TRUE(a.contains("predicted_s") && a.contains("recompute_layers"));
      EXPECT_GE(a.at("peak_bytes").get<int64_t>(), a.at("memory_bytes").get<int64_t>());
      seen[a.at("iteration")].insert({e.at("pid").get<int32_t>(), cat, a.at("chunk").get<int32_t>(),
                                      a.at("stage").get<int32_t>()});
    } else if (cat == "iteration") {
      iterations.insert(a.at("iteration").get<int64_t>());
      EXPECT_TRUE(a.contains("loss") && a.contains("tokens_per_s"));
    } else if (cat == "plan") {
      ++plan_events;
    } else if (cat == "optimizer") {
      ++optimizer_events;
    }
  }
  EXPECT_EQ(plan_events, static_cast<int>(iterations.size()));
  EXPECT_EQ(optimizer_events, static_cast<int>(iterations.size()));
  for (const auto& lane : used_lanes) {
    EXPECT_EQ(named_lanes.count(lane), 1u) << "lane " << lane.second << " of " << lane.first;
  }
  // Every send is a flow whose start and finish appear exactly once each.
  for (const auto& [id, n] : flow_starts) {
    EXPECT_EQ(n, 1) << "flow " << id;
    EXPECT_EQ(flow_finishes[id], 1) << "flow " << id;
  }
  EXPECT_EQ(flow_finishes.size(), flow_starts.size());
  // Every planned action exactly once per iteration, nothing else.
  int actions = 0, sends = 0;
  for (int64_t it : iterations) {
    const plan::Plan p = plan::plan_load(obs::trace_plan_path(trace_dir.string(), it, 0));
    std::multiset<std::tuple<int32_t, std::string, int32_t, int32_t>> planned;
    for (size_t r = 0; r < p.actions.size(); ++r) {
      for (const plan::Action& a : p.actions[r]) {
        planned.insert({static_cast<int32_t>(r), plan::action_kind_name(a.kind), a.chunk, a.stage});
        ++actions;
        const bool forward = a.kind == plan::ActionKind::forward;
        sends += forward ? a.stage + 1 < p.num_stages() : a.stage > 0;
      }
    }
    EXPECT_EQ(seen[it], planned) << "iteration " << it;
  }
  EXPECT_EQ(seen.size(), iterations.size());
  EXPECT_EQ(memory, 2 * actions);  // per action: its peak at its start, its bytes after it
  EXPECT_EQ(static_cast<int>(flow_starts.size()), sends);
  return iterations;
}

TEST_F(TraceTest, EveryPlannedActionOnceWithPlansConfigAndMetrics) {
  TrainOptions o = options(2, Schedule::seq1f1b);
  train_run(o);
  const fs::path trace = dir_ / "trace";
  const json t = json_read(trace / "trace-rank00000.json");
  EXPECT_EQ(trace_check(t, trace), (std::set<int64_t>{1, 2}));
  EXPECT_TRUE(fs::exists(trace / "config.yaml"));
  EXPECT_TRUE(fs::exists(trace / "plans" / "iter-00000002-replica0.json"));
  EXPECT_EQ(t.at("metadata").at("one_process"), true);
}

TEST_F(TraceTest, TraceIterationsTracesExactlyThoseIterations) {
  TrainOptions o = options(4, Schedule::epp);
  o.trace_iterations = obs::trace_iterations_parse("2-3");
  train_run(o);
  const fs::path trace = dir_ / "trace";
  EXPECT_EQ(trace_check(json_read(trace / "trace-rank00000.json"), trace),
            (std::set<int64_t>{2, 3}));
  std::set<std::string> plans;
  for (const auto& f : fs::directory_iterator(trace / "plans")) {
    plans.insert(f.path().filename().string());
  }
  EXPECT_EQ(plans,
            (std::set<std::string>{"iter-00000002-replica0.json", "iter-00000003-replica0.json"}));
}

TEST_F(TraceTest, TraceIterationsParsesRangesAndRefusesTheRest) {
  const obs::TraceIterations r = obs::trace_iterations_parse("10-20");
  EXPECT_EQ(r.first, 10);
  EXPECT_EQ(r.last, 20);
  EXPECT_TRUE(r.contains(10) && r.contains(20) && !r.contains(9) && !r.contains(21));
  EXPECT_EQ(obs::trace_iterations_parse("7").first, 7);
  EXPECT_EQ(obs::trace_iterations_parse("7").last, 7);
  for (const char* bad : {"", "0-3", "5-2", "a-b", "3-", "-3", "1-2-3", "1.5", "99999999999"}) {
    EXPECT_THROW(obs::trace_iterations_parse(bad), ConfigError) << bad;
  }
}

TEST_F(TraceTest, FlowIdsDifferForEveryTransfer) {
  std::set<uint64_t> ids;
  for (int64_t it : {1, 2, (1 << 20) - 1}) {
    for (int32_t rep : {0, 63}) {
      for (int32_t st : {0, 1, 255}) {
        for (int32_t c : {0, 1, (1 << 18) - 1}) {
          for (plan::ActionKind k : {plan::ActionKind::forward, plan::ActionKind::backward}) {
            const uint64_t id = obs::trace_flow_id(it, rep, st, c, k);
            EXPECT_LT(id, uint64_t{1} << 53);
            ids.insert(id);
          }
        }
      }
    }
  }
  EXPECT_EQ(ids.size(), 3u * 2 * 3 * 3 * 2);
  EXPECT_THROW(obs::trace_flow_id(1 << 20, 0, 0, 0, plan::ActionKind::forward), Error);
}

TEST_F(TraceTest, FileIsValidJsonAfterEveryIteration) {
  // The writer closes the JSON after each iteration, so a run killed between iterations leaves
  // a file that loads; a second writer on the same directory replaces it.
  TrainOptions o = options(1, Schedule::epp);
  Trainer trainer(o);
  obs::TraceProcess who;
  obs::TraceWriter w(o.trace_dir, who, o.config_yaml, "epp", obs::TraceClock::now());
  const fs::path file = w.path();
  EXPECT_EQ(json_read(file).at("traceEvents").size(), 9u);  // names of the process and its lanes
  const auto start = obs::TraceClock::now();
  const obs::IterationMetrics m = trainer.step();
  ASSERT_TRUE(
      w.iteration_add(m, trainer.last_plan(), trainer.last_stats(), start, obs::TraceClock::now()));
  const json once = json_read(file);
  EXPECT_EQ(trace_check(once, fs::path(o.trace_dir)), (std::set<int64_t>{1}));
  // The same iteration again (as if the next one): still valid, twice the slices.
  obs::IterationMetrics m2 = m;
  m2.iteration = 2;
  plan::plan_save(trainer.last_plan(), obs::trace_plan_path(o.trace_dir, 2, 0));
  ASSERT_TRUE(w.iteration_add(m2, trainer.last_plan(), trainer.last_stats(), obs::TraceClock::now(),
                              obs::TraceClock::now()));
  EXPECT_GT(json_read(file).at("traceEvents").size(), once.at("traceEvents").size());
}

TEST_F(TraceTest, OverlappingAllReduceBucketsTakeSeparateLanes) {
  obs::StepStats s;
  s.t0 = obs::TraceClock::now();
  plan::Action a;
  s.timings.push_back({a, 0.001, 0.002, 100});
  s.events.push_back({"allreduce", "bucket 0", 0.0015, 0.004});
  s.events.push_back({"allreduce", "bucket 1", 0.002, 0.003});  // overlaps bucket 0
  s.events.push_back({"allreduce", "bucket 2", 0.005, 0.006});  // after both
  s.events.push_back({"p2p_wait", "activation", 0.0, 0.001});
  obs::IterationMetrics m;
  m.iteration = 7;
  obs::TraceProcess who;
  who.one_process = false;
  who.world_rank = 3;
  const json ev =
      obs::trace_iteration_events(who, m, 1, {s}, s.t0, s.t0, s.t0 + std::chrono::seconds(1));
  std::map<int32_t, std::vector<std::pair<double, double>>> lanes;
  for (const json& e : ev) {
    EXPECT_EQ(e.at("pid"), 3);
    if (e.at("ph") != "X") continue;
    lanes[e.at("tid")].push_back(
        {e.at("ts"), e.at("ts").get<double>() + e.at("dur").get<double>()});
  }
  EXPECT_EQ(lanes[obs::trace_lane_allreduce].size(), 2u);  // buckets 0 and 2
  EXPECT_EQ(lanes[obs::trace_lane_allreduce + 1].size(), 1u);
  EXPECT_EQ(lanes[obs::trace_lane_p2p].size(), 1u);
  for (const auto& [tid, slices] : lanes) {
    if (tid == obs::trace_lane_host) continue;  // the iteration encloses host events
    for (size_t i = 1; i < slices.size(); ++i) EXPECT_LE(slices[i - 1].second, slices[i].first);
  }
}

TEST_F(TraceTest, UnwritableDirectoryIsAConfigError) {
  obs::TraceProcess who;
  EXPECT_THROW(
      obs::TraceWriter w("/proc/no-such-dir/trace", who, "", "epp", obs::TraceClock::now()),
      ConfigError);
}

}  // namespace
}  // namespace infinipipe::runtime
