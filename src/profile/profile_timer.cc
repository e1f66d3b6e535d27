// The profiler's stopwatch: chunks run through a StageEngine, timed with the process's involuntary
// context switches and the thread's CPU time beside the wall time, so a descheduled run is known.
#include "profile/profile_timer.h"

#include <algorithm>

#include <omp.h>
#include <sys/resource.h>

#include "obs/cpu_time.h"

namespace infinipipe::profile {
namespace {

// Involuntary context switches of the whole process (its OpenMP threads included): a timing
// that saw one was descheduled for another process and measured that process's time slice too.
long involuntary_switches() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_nivcsw;
}

void fill_pattern(Tensor& t, uint32_t seed) {
  // Small, varied values: zeros would let norms and softmax take unrepresentative paths.
  uint32_t s = seed * 2654435761u + 1;
  float* p = t.data();
  for (int64_t i = 0; i < t.numel(); ++i) {
    s = s * 1664525u + 1013904223u;
    p[i] = static_cast<float>(static_cast<int32_t>(s >> 8) % 2001 - 1000) * 1e-4f;
  }
}

SliceInput make_slice(int64_t seq, int64_t offset, int64_t len, bool final_slice, int64_t vocab) {
  SliceInput s{seq, offset, len, {}};
  const int64_t n = final_slice ? len : len + 1;
  s.tokens.resize(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    s.tokens[static_cast<size_t>(i)] = static_cast<int32_t>((seq * 7919 + offset + i) % vocab);
  return s;
}

// The fastest of a timing's runs that were not descheduled. Where every run was, and the
// kernels ran on one thread, the fastest run's CPU time (what it computed, without the time
// slices other processes took); otherwise the fastest run, counted in `interrupted`.
struct Runs {
  std::vector<double> whole, cpu, all;
  void add(const ChunkTimer::Timing& t) {
    all.push_back(t.wall);
    if (t.whole) whole.push_back(t.wall);
    if (t.cpu > 0) cpu.push_back(t.cpu);
  }
  double fastest(int64_t& interrupted) const {
    if (!whole.empty()) return *std::min_element(whole.begin(), whole.end());
    if (omp_get_max_threads() == 1 && cpu.size() == all.size())
      return *std::min_element(cpu.begin(), cpu.end());
    ++interrupted;
    return *std::min_element(all.begin(), all.end());
  }
};

}  // namespace

template <typename F>
ChunkTimer::Timing ChunkTimer::timed(F&& work) {
  const long switches = involuntary_switches();
  const double cpu0 = obs::thread_cpu_seconds();
  const auto t0 = ProfileClock::now();
  work();
  Timing t;
  t.wall = seconds_since(t0);
  const double cpu1 = obs::thread_cpu_seconds();
  t.cpu = cpu0 >= 0 && cpu1 >= 0 ? cpu1 - cpu0 : -1.0;
  t.whole = involuntary_switches() == switches;
  return t;
}

void ChunkTimer::prepare(const std::vector<cost::SliceShape>& chunk) {
  target_ = ChunkInput{0, {}};
  int32_t id = 1;
  for (const cost::SliceShape& s : chunk) {
    const int64_t seq = next_seq_++;
    if (s.context > 0) {
      ChunkInput pre{id, {make_slice(seq, 0, s.context, false, m_.vocab_size)}};
      Tensor in = input(s.context, 3);
      engine_->forward(pre, in.empty() ? nullptr : &in, 0, 1e-3);
      prefixes_.push_back({id++, s.context});
    }
    target_.slices.push_back(make_slice(seq, s.context, s.len, true, m_.vocab_size));
  }
}

ChunkTimer::Times ChunkTimer::run(int64_t recompute) {
  const int64_t N = target_.num_tokens();
  Tensor in = input(N, 1);
  Times t;
  ForwardOutput out;
  t.forward =
      timed([&] { out = engine_->forward(target_, in.empty() ? nullptr : &in, recompute, 1e-3); });
  out.activation.reset();
  Tensor grad = output_grad(N, 2);
  t.backward = timed([&] { engine_->backward(target_.chunk_id, grad.empty() ? nullptr : &grad); });
  return t;
}

void ChunkTimer::finish() {
  for (auto it = prefixes_.rbegin(); it != prefixes_.rend(); ++it) {
    Tensor g = output_grad(it->second, 4);
    engine_->backward(it->first, g.empty() ? nullptr : &g);
  }
  prefixes_.clear();
}

Tensor ChunkTimer::input(int64_t n, uint32_t seed) {
  if (range_.has_embedding) return Tensor();
  Tensor t(tracker_, MemCategory::mem_activations, {n, m_.hidden_size}, false);
  fill_pattern(t, seed);
  return t;
}

Tensor ChunkTimer::output_grad(int64_t n, uint32_t seed) {
  if (range_.has_lm_head) return Tensor();
  Tensor t(tracker_, MemCategory::mem_activations, {n, m_.hidden_size}, false);
  fill_pattern(t, seed);
  return t;
}

ProfileSample time_chunk(ChunkTimer& timer, const std::vector<cost::SliceShape>& chunk,
                         int64_t layers, int64_t repeats) {
  timer.prepare(chunk);
  timer.run(0);
  Runs f, b, br;
  const auto enough = [repeats](const Runs& r) {
    return static_cast<int64_t>(r.whole.size()) >= repeats;
  };
  for (int64_t i = 0; i < 4 * repeats + 10; ++i) {
    if (enough(f) && enough(b) && enough(br)) break;
    const ChunkTimer::Times plain = timer.run(0);
    const ChunkTimer::Times rec = timer.run(layers);
    f.add(plain.forward);
    b.add(plain.backward);
    br.add(rec.backward);
  }
  timer.finish();
  ProfileSample s;
  s.chunk = chunk;
  s.num_layers = layers;
  s.forward_s = f.fastest(s.interrupted);
  s.backward_s = b.fastest(s.interrupted);
  s.recompute_s = br.fastest(s.interrupted) - s.backward_s;
  return s;
}

ProfileSample time_chunk_checked(ChunkTimer& timer, const std::vector<cost::SliceShape>& chunk,
                                 int64_t layers, int64_t repeats) {
  ProfileSample s;
  positive_difference(
      [&] {
        s = time_chunk(timer, chunk, layers, repeats);
        return s.recompute_s;
      },
      3);
  return s;
}

}  // namespace infinipipe::profile
