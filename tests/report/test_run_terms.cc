// The per-rank time terms of a traced run: one row per iteration of replica 0 whose plan carries
// them, every plan in the JSON, nothing when no plan carries per-rank terms.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "report/run_terms.h"

namespace infinipipe::report {
namespace {

plan::Plan plan_with_terms(double alpha2_rank0, double alpha2_rank1) {
  plan::Plan p;
  p.pp = 2;
  std::vector<double> terms(9, 0.0);
  terms[2] = 2e-3;  // beta1
  terms[4] = 2.0;   // backward factor
  terms[5] = 1.0;   // recompute factor
  terms[1] = alpha2_rank0;
  p.rank_time_terms.push_back(terms);
  terms[1] = alpha2_rank1;
  p.rank_time_terms.push_back(terms);
  return p;
}

TEST(RunTerms, OneRowPerIterationOfReplicaZeroAndEveryPlanInJson) {
  RunTrace t;
  t.plans[{1, 0}] = plan::Plan{};  // planned before the first refit: no per-rank terms
  t.plans[{2, 0}] = plan_with_terms(1e-6, 3e-6);
  t.plans[{2, 1}] = plan_with_terms(5e-6, 7e-6);
  const std::string table = run_rank_terms_table(t);
  EXPECT_NE(table.find("| 2 | 1000.0 ns / 2.000 ms / 2.00 / 1.00 | 3000.0 ns / 2.000 ms"),
            std::string::npos)
      << table;
  EXPECT_EQ(table.find("| 1 |"), std::string::npos) << table;
  EXPECT_EQ(table.find("5000.0 ns"), std::string::npos) << "replica 1 is not in the table";
  const nlohmann::json j = run_rank_terms_json(t);
  ASSERT_EQ(j.size(), 2u);
  EXPECT_EQ(j[1]["replica"], 1);
  EXPECT_DOUBLE_EQ(j[1]["ranks"][1]["alpha2"].get<double>(), 7e-6);
}

TEST(RunTerms, NothingWithoutPerRankTerms) {
  RunTrace t;
  t.plans[{1, 0}] = plan::Plan{};
  EXPECT_EQ(run_rank_terms_table(t), "");
  EXPECT_TRUE(run_rank_terms_json(t).empty());
}

}  // namespace
}  // namespace infinipipe::report
