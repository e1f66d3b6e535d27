#include "plan/schedule_table.h"

#include <array>

#include <fmt/format.h>

#include "core/error.h"
#include "plan/planner.h"
#include "plan/schedule.h"

namespace infinipipe::plan {
namespace {

template <Schedule S>
PlanResult tune_whole_sequences(const Config& cfg, const cost::CostModel& cm,
                                std::span<const int64_t> lengths, int32_t /*threads*/) {
  return tune_batch_level(cfg, cm, lengths, S);
}

PlanResult tune_seq1f1b_row(const Config& cfg, const cost::CostModel& cm,
                            std::span<const int64_t> lengths, int32_t /*threads*/) {
  return tune_seq1f1b(cfg, cm, lengths);
}

PlanResult tune_epp_row(const Config& cfg, const cost::CostModel& cm,
                        std::span<const int64_t> lengths, int32_t threads) {
  return plan_epp(cfg, cm, lengths, threads);
}

constexpr std::array<ScheduleRow, 5> kRows{{
    // Elastic pipeline: long sequences sliced, short ones packed, pipelines grouped per batch.
    {.id = Schedule::epp,
     .name = "epp",
     .generate = schedule_epp,
     .tune = tune_epp_row,
     .virtual_stages = VirtualStages::optional,
     .keeps_sequences_whole = false,
     .takes_micro_batch_size = false,
     .takes_slice_count = false},
    // One forward, one backward, over micro-batches of whole sequences.
    {.id = Schedule::one_f_one_b,
     .name = "1f1b",
     .generate = schedule_1f1b,
     .tune = tune_whole_sequences<Schedule::one_f_one_b>,
     .virtual_stages = VirtualStages::none,
     .keeps_sequences_whole = true,
     .takes_micro_batch_size = true,
     .takes_slice_count = false},
    // Megatron-LM's interleaved 1F1B over virtual stages.
    {.id = Schedule::interleaved,
     .name = "interleaved",
     .generate = schedule_interleaved,
     .tune = tune_whole_sequences<Schedule::interleaved>,
     .virtual_stages = VirtualStages::required,
     .keeps_sequences_whole = true,
     .takes_micro_batch_size = true,
     .takes_slice_count = false},
    // Every forward, then every backward.
    {.id = Schedule::gpipe,
     .name = "gpipe",
     .generate = schedule_gpipe,
     .tune = tune_whole_sequences<Schedule::gpipe>,
     .virtual_stages = VirtualStages::none,
     .keeps_sequences_whole = true,
     .takes_micro_batch_size = true,
     .takes_slice_count = false},
    // 1F1B over micro-batches whose sequences are each cut into a fixed number of slices.
    {.id = Schedule::seq1f1b,
     .name = "seq1f1b",
     .generate = schedule_seq1f1b,
     .tune = tune_seq1f1b_row,
     .virtual_stages = VirtualStages::none,
     .keeps_sequences_whole = false,
     .takes_micro_batch_size = true,
     .takes_slice_count = true},
}};

}  // namespace

std::span<const ScheduleRow> schedule_table() {
  return kRows;
}

const ScheduleRow& schedule_row(Schedule s) {
  for (const ScheduleRow& r : kRows)
    if (r.id == s) return r;
  fail("schedule {} has no row in the schedule table", static_cast<int>(s));
}

const ScheduleRow& schedule_row(std::string_view name) {
  for (const ScheduleRow& r : kRows)
    if (name == r.name) return r;
  fail_config("unknown schedule '{}': choose one of {}", name, schedule_names());
}

const char* schedule_name(Schedule s) {
  return schedule_row(s).name;
}

std::string schedules_taking_virtual_stages() {
  std::string out;
  for (const ScheduleRow& r : kRows) {
    if (r.virtual_stages == VirtualStages::none) continue;
    if (!out.empty()) out += " or ";
    out += r.name;
  }
  return out;
}

std::string schedule_names(std::string_view separator) {
  std::string out;
  for (const ScheduleRow& r : kRows) {
    if (!out.empty()) out += separator;
    out += r.name;
  }
  return out;
}

int32_t schedule_vpp(const ParallelConfig& p) {
  return schedule_row(p.schedule).virtual_stages == VirtualStages::none
             ? 1
             : static_cast<int32_t>(p.virtual_stages);
}

void schedule_check_layout(const ParallelConfig& p) {
  const ScheduleRow& row = schedule_row(p.schedule);
  switch (row.virtual_stages) {
    case VirtualStages::none:
      if (p.virtual_stages > 1)
        fail_config(
            "virtual stages ({} per rank) need --schedule {}; schedule {} runs one stage per "
            "rank: drop --vpp or use --schedule {}",
            p.virtual_stages, schedules_taking_virtual_stages(), row.name,
            schedules_taking_virtual_stages());
      return;
    case VirtualStages::optional:
      if (p.virtual_stages > 1 && p.pipeline_parallel == 1)
        fail_config(
            "{} on virtual stages ({} per rank) needs pipeline-model-parallel-size >= 2: one "
            "rank would run its stages back to back, as one stage; drop --vpp or raise --pp",
            row.name, p.virtual_stages);
      return;
    case VirtualStages::required:
      if (p.virtual_stages < 2)
        fail_config(
            "schedule {} needs at least 2 virtual stages per rank: add --vpp 2 (or "
            "--num-layers-per-virtual-pipeline-stage)",
            row.name);
      return;
  }
}

}  // namespace infinipipe::plan
