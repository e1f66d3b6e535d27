// Schedule generators: given plan.chunks (in forward order), plan.pp/vpp, plan.stages and (for
// epp) plan.pipeline_of_chunk, fill plan.actions with one ordered action list per pipeline rank.
// They decide the order only; recompute_layers starts at 0 and predicted_time at 0 (the
// recompute optimiser and plan_predict in validate.h fill them in).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/config.h"
#include "plan/plan.h"

namespace infinipipe::plan {

// Runs the generator of the schedule's row (schedule_table.h); sets plan.schedule to its name.
// Throws ConfigError when the schedule cannot run this plan (e.g. interleaved with vpp = 1 or
// with fewer chunks than pp).
void schedule_build(Plan& plan, Schedule schedule);

void schedule_gpipe(Plan& plan);  // all forwards, then all backwards (reverse order)
void schedule_1f1b(Plan& plan);   // warm-up pp-r-1 forwards, steady 1F1B, cool-down
// Megatron-LM's interleaved 1F1B over vpp model chunks; needs pp >= 2, vpp >= 2, whole-sequence
// chunks and m >= pp (any such m: the micro-batch group size follows Megatron's remainder rule).
void schedule_interleaved(Plan& plan);
// seq1f1b / epp: 1F1B over the chunks in order, with the backwards of the split chunks of one
// sequence in reverse slice order; epp runs one 1F1B pipeline per pipeline_of_chunk group, each
// drained before the next starts. epp with vpp > 1 (pp >= 2) runs each group in the interleaved
// order over the virtual stages (schedule_interleaved_pipeline_append).
void schedule_seq1f1b(Plan& plan);
void schedule_epp(Plan& plan);

// Shared by the generators. The backward order of the chunks `fwd` (forward order): the forward
// order with each set of chunks linked by a cut sequence reversed among its own positions, so a
// sequence's later slices (which produce dK/dV for its earlier tokens) run their backward first.
std::vector<int32_t> schedule_backward_order(const Plan& plan, std::span<const int32_t> fwd);
// One interleaved 1F1B pipeline over the chunks `fwd` (any kinds, any count >= 1) appended to
// every rank's list, vpp >= 2, pp >= 2 (schedule_epp_interleaved.cc).
void schedule_interleaved_pipeline_append(Plan& plan, std::span<const int32_t> fwd);

}  // namespace infinipipe::plan
