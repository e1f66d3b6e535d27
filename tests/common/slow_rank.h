// A rank made slower, for tests that check that plans follow each rank's own speed: the
// executor's test hook (runtime::ActionHook, TrainOptions::action_hook) that makes every action of
// pipeline rank `rank` last `factor` times as long. It computes factor − 1 times the action's CPU
// time more inside the measured interval, as a slower core would (the wall time and the CPU time
// both grow, so a rank sharing cores learns it too); where the thread's CPU clock cannot be read
// it sleeps for that wall time instead.
#pragma once

#include <chrono>
#include <cstdint>
#include <thread>

#include "obs/cpu_time.h"
#include "runtime/executor.h"

namespace infinipipe::testing {

inline runtime::ActionHook slow_rank(int32_t rank, double factor) {
  return [rank, factor](int32_t action_rank, const plan::Action&, runtime::ActionSpent spent) {
    if (action_rank != rank || factor <= 1.0) return;
    if (spent.cpu_s < 0) {
      std::this_thread::sleep_for(std::chrono::duration<double>((factor - 1.0) * spent.wall_s));
      return;
    }
    const double until = obs::thread_cpu_seconds() + (factor - 1.0) * spent.cpu_s;
    volatile uint64_t spins = 0;
    while (obs::thread_cpu_seconds() < until) spins = spins + 1;
  };
}

}  // namespace infinipipe::testing
