// Every schedule the planner makes plans for, one row each: its name, the generator of its action
// order, the tuner that searches its knobs for a batch, and what it asks of the layout and of the
// options. Everything that lists, parses, checks, plans, simulates or searches schedules reads
// this table; adding a schedule is one generator and one row (docs/architecture.md, "Where to
// add").
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "core/config.h"
#include "cost/cost_model.h"
#include "plan/plan.h"

namespace infinipipe::plan {

struct PlanResult;

// Whether a schedule runs several virtual stages per pipeline rank (`--vpp`).
enum class VirtualStages {
  none,      // one stage per rank; --vpp > 1 is refused
  optional,  // --vpp V >= 1; V > 1 needs pp >= 2 (one rank would run its stages back to back)
  required,  // --vpp >= 2 (Megatron's interleaved 1F1B)
};

struct ScheduleRow {
  Schedule id;
  const char* name;  // `--schedule NAME`, plan JSON's "schedule", every table
  // Fills plan.actions from plan.chunks, plan.stages, plan.pp/vpp (and pipeline_of_chunk).
  void (*generate)(Plan& plan);
  // The schedule's own search over its knobs for one batch (knobs fixed in cfg are honoured);
  // returns its best plan that fits, predictions not yet checked (make_plan_detailed does).
  PlanResult (*tune)(const Config& cfg, const cost::CostModel& cm, std::span<const int64_t> lengths,
                     int32_t threads);
  VirtualStages virtual_stages;
  bool keeps_sequences_whole;   // never cuts a sequence: --min-tail-slice does not apply
  bool takes_micro_batch_size;  // --micro-batch-size fixes its micro-batches
  bool takes_slice_count;       // --seq1f1b-slices fixes its slices per sequence
};

// In the order `simulate --compare` and the layout search list them.
std::span<const ScheduleRow> schedule_table();
const ScheduleRow& schedule_row(Schedule s);
// The row named `name`; ConfigError listing the names otherwise.
const ScheduleRow& schedule_row(std::string_view name);
const char* schedule_name(Schedule s);
// "epp, 1f1b, ..." (every name, joined by `separator`).
std::string schedule_names(std::string_view separator = ", ");
// "epp or interleaved": the schedules that run virtual stages.
std::string schedules_taking_virtual_stages();

// The virtual stages per rank a run of this layout builds: --vpp where the schedule takes it,
// else 1.
int32_t schedule_vpp(const ParallelConfig& p);
// ConfigError, saying how to fix it, when p's virtual stages do not suit its schedule. Every
// configuration is checked with it after Config::validate: where flags and files are resolved,
// and by the planner.
void schedule_check_layout(const ParallelConfig& p);

}  // namespace infinipipe::plan
