// The schedule table: one row per Schedule, names that parse back, and the layout checks it
// drives (what Config::validate cannot know: which schedules run virtual stages).
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "common/error_text.h"
#include "core/error.h"
#include "plan/schedule_table.h"

namespace infinipipe::plan {
namespace {

// The schedule_check_layout message for `p`, or "".
std::string layout_error(const ParallelConfig& p) {
  return infinipipe::testing::error_text([&] { schedule_check_layout(p); });
}

TEST(ScheduleTable, EveryScheduleHasOneRowWhoseNameParsesBack) {
  std::set<Schedule> ids;
  std::set<std::string> names;
  for (const ScheduleRow& r : schedule_table()) {
    EXPECT_TRUE(ids.insert(r.id).second) << r.name;
    EXPECT_TRUE(names.insert(r.name).second) << r.name;
    EXPECT_EQ(schedule_row(r.name).id, r.id);
    EXPECT_EQ(&schedule_row(r.id), &r);
    EXPECT_NE(r.generate, nullptr) << r.name;
    EXPECT_NE(r.tune, nullptr) << r.name;
  }
  for (Schedule s : {Schedule::gpipe, Schedule::one_f_one_b, Schedule::interleaved,
                     Schedule::seq1f1b, Schedule::epp})
    EXPECT_EQ(ids.count(s), 1u) << static_cast<int>(s);
  EXPECT_EQ(schedule_table().front().id, Schedule::epp);  // `simulate --compare` lists it first
}

TEST(ScheduleTable, UnknownNameListsTheChoices) {
  const std::string e =
      infinipipe::testing::error_text([] { (void)schedule_row(std::string("zero-bubble")); });
  EXPECT_NE(e.find("unknown schedule 'zero-bubble': choose one of " + schedule_names()),
            std::string::npos)
      << e;
  EXPECT_THROW((void)schedule_row(std::string("")), ConfigError);
}

TEST(ScheduleTable, VirtualStagesNeedAScheduleThatRunsThem) {
  ParallelConfig p;
  p.virtual_stages = 2;
  p.schedule = Schedule::one_f_one_b;
  EXPECT_NE(layout_error(p).find("--schedule epp or interleaved"), std::string::npos)
      << layout_error(p);
  EXPECT_EQ(schedule_vpp(p), 1);
  p.pipeline_parallel = 2;
  p.schedule = Schedule::epp;  // EPP's chunks on virtual stages
  EXPECT_EQ(layout_error(p), "");
  EXPECT_EQ(schedule_vpp(p), 2);
  p.pipeline_parallel = 1;  // one rank: its virtual stages would run as one
  EXPECT_NE(layout_error(p).find("needs pipeline-model-parallel-size >= 2"), std::string::npos)
      << layout_error(p);
  p.pipeline_parallel = 2;
  p.schedule = Schedule::interleaved;
  p.virtual_stages = 1;
  EXPECT_NE(layout_error(p).find("--vpp 2"), std::string::npos) << layout_error(p);
  EXPECT_EQ(schedules_taking_virtual_stages(), "epp or interleaved");
}

}  // namespace
}  // namespace infinipipe::plan
