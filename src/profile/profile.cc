// The profiler's run: the grid of chunks timed on a middle stage (1 or 2 layers), with and
// without recompute, plus embedding and LM-head stages; the fit of the time coefficients on
// alternate grid points, the error on the others, and the calibration they make.
#include "profile/profile.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include <omp.h>

#include <fmt/format.h>

#include "core/error.h"
#include "core/strings.h"
#include "model/engine.h"
#include "profile/profile_timer.h"

namespace infinipipe::profile {
namespace {

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace

ProfileGrid profile_grid_default(bool quick) {
  ProfileGrid g;
  if (quick) {
    g.lens = {64, 128, 256};
    g.contexts = {0, 256};
    g.packed = {{4, 64}, {2, 128}};
    g.two_layer_lens = {64, 256};
    g.edge_lens = {256};
    g.repeats = 1;
    g.sgemm_size = 512;
  } else {
    g.lens = {128, 256, 512, 1024, 2048, 4096};
    g.contexts = {0, 1024, 4096};
    g.packed = {{4, 128}, {8, 128}, {4, 256}, {2, 512}, {8, 256}};
    g.two_layer_lens = {128, 512, 2048};
    g.edge_lens = {256, 1024, 4096};
    g.repeats = 3;
  }
  return g;
}

ProfileError profile_relative_error(const std::vector<double>& predicted,
                                    const std::vector<double>& measured) {
  std::vector<double> err;
  for (size_t i = 0; i < predicted.size() && i < measured.size(); ++i)
    if (measured[i] > 0) err.push_back(std::abs(predicted[i] - measured[i]) / measured[i]);
  ProfileError e;
  e.count = static_cast<int64_t>(err.size());
  if (err.empty()) return e;
  e.median = median(err);
  e.max = *std::max_element(err.begin(), err.end());
  return e;
}

ProfileProgress::ProfileProgress(const ModelConfig& m, const ProfileGrid& grid,
                                 const cost::CostModel& prior)
    : prior_(prior), start_(ProfileClock::now()) {
  for (int64_t ctx : grid.contexts)
    for (int64_t len : grid.lens) total_weight_ += weight({{ctx, len, true}}, 1);
  for (auto [n, len] : grid.packed)
    total_weight_ +=
        weight(std::vector<cost::SliceShape>(static_cast<size_t>(n), {0, len, true}), 1);
  total_ = static_cast<int64_t>(grid.contexts.size() * grid.lens.size() + grid.packed.size());
  if (m.num_layers >= 2) {
    for (int64_t len : grid.two_layer_lens) total_weight_ += weight({{0, len, true}}, 2);
    total_ += static_cast<int64_t>(grid.two_layer_lens.size());
  }
  for (int64_t len : grid.edge_lens) total_weight_ += 3 * weight({{0, len, true}}, 1);
  total_ += static_cast<int64_t>(grid.edge_lens.size());
}

double ProfileProgress::weight(const std::vector<cost::SliceShape>& chunk, int64_t layers) const {
  return prior_.forward_time(chunk, cost::StageShape{layers, false, false});
}

std::string ProfileProgress::step(double weight) {
  ++done_;
  done_weight_ += weight;
  const double elapsed = seconds_since(start_);
  const double left = std::max(total_weight_ - done_weight_, 0.0);
  const double eta = done_weight_ > 0 ? elapsed / done_weight_ * left : 0;
  const int width = static_cast<int>(fmt::formatted_size("{}", total_));
  return fmt::format("[{:>{}}/{}, ETA {}]", done_, width, total_, format_duration(eta));
}

std::optional<double> positive_difference(const std::function<double()>& measure, int tries) {
  for (int i = 0; i < tries; ++i) {
    const double d = measure();
    if (d > 0) return d;
  }
  return std::nullopt;
}

namespace {

void check_grid(const ProfileGrid& g) {
  if (g.lens.empty() || g.contexts.empty())
    fail_config("profile: the grid needs at least one slice length and one context length");
  if (g.repeats < 1) fail_config("profile: --repeats must be >= 1, got {}", g.repeats);
  if (g.threads < 0) fail_config("profile: --threads must be >= 0, got {}", g.threads);
  for (int64_t v : g.lens)
    if (v <= 0) fail_config("profile: slice lengths must be > 0, got {}", v);
  for (int64_t v : g.contexts)
    if (v < 0) fail_config("profile: context lengths must be >= 0, got {}", v);
  for (auto [n, len] : g.packed)
    if (n <= 0 || len <= 0) fail_config("profile: packed chunks need count and length > 0");
  if (g.sgemm_size < 1) fail_config("profile: the sgemm size must be >= 1, got {}", g.sgemm_size);
}

// A sample's forward, backward and recompute timings into the report's count.
void timings_count(const ProfileSample& s, ProfileReport& rep) {
  rep.interrupted_timings += s.interrupted;
  rep.timings += 3;
}

std::string chunk_label(const std::vector<cost::SliceShape>& chunk) {
  if (chunk.size() == 1) return fmt::format("len {} ctx {}", chunk[0].len, chunk[0].context);
  return fmt::format("{} x {} packed", chunk.size(), chunk[0].len);
}

// The model to time: the configured one, with RoPE's table long enough for every grid point
// (positions only bound its check, not weights).
ModelConfig profile_model(const ModelConfig& model, const ProfileGrid& grid) {
  ModelConfig m = model;
  int64_t reach = m.max_positions();
  for (int64_t len : grid.lens)
    for (int64_t ctx : grid.contexts) reach = std::max(reach, len + ctx);
  m.max_position_embeddings = reach;
  return m;
}

// Middle-stage chunks: every (len, context) on one layer; interior points of each context row
// alternate between the fit and the held-out set, so held-out points are interpolations. Then
// packed chunks on one layer, and single slices on two layers. Each line says how far the grid is.
void middle_samples_time(const ModelConfig& m, const ProfileGrid& grid, ChunkTimer& one,
                         ProfileProgress& progress, const ProfileLog& log,
                         std::vector<ProfileSample>& out) {
  const auto recompute = [](const ProfileSample& s) {
    return s.recompute_s > 0 ? fmt::format("{:8.3f} ms", s.recompute_s * 1e3)
                             : std::string("   (noise)");
  };
  for (int64_t ctx : grid.contexts) {
    for (size_t i = 0; i < grid.lens.size(); ++i) {
      ProfileSample s = time_chunk_checked(one, {{ctx, grid.lens[i], true}}, 1, grid.repeats);
      s.held_out = i % 2 == 1 && i + 1 < grid.lens.size();
      out.push_back(s);
      log(fmt::format("{} 1 layer  {:<20} fwd {:8.3f} ms  bwd {:8.3f} ms  recompute {}{}",
                      progress.step(progress.weight(s.chunk, 1)), chunk_label(s.chunk),
                      s.forward_s * 1e3, s.backward_s * 1e3, recompute(s),
                      s.held_out ? "  (held out)" : ""));
    }
  }
  for (size_t i = 0; i < grid.packed.size(); ++i) {
    auto [n, len] = grid.packed[i];
    std::vector<cost::SliceShape> chunk(static_cast<size_t>(n), cost::SliceShape{0, len, true});
    ProfileSample s = time_chunk_checked(one, chunk, 1, grid.repeats);
    s.held_out = i % 2 == 1;
    out.push_back(s);
    log(fmt::format("{} 1 layer  {:<20} fwd {:8.3f} ms  bwd {:8.3f} ms{}",
                    progress.step(progress.weight(chunk, 1)), chunk_label(chunk), s.forward_s * 1e3,
                    s.backward_s * 1e3, s.held_out ? "  (held out)" : ""));
  }
  if (m.num_layers >= 2) {
    ChunkTimer two(m, StageRange{0, 2, false, false});
    for (int64_t len : grid.two_layer_lens) {
      ProfileSample s = time_chunk_checked(two, {{0, len, true}}, 2, grid.repeats);
      out.push_back(s);
      log(fmt::format("{} 2 layers {:<20} fwd {:8.3f} ms  bwd {:8.3f} ms",
                      progress.step(progress.weight(s.chunk, 2)), chunk_label(s.chunk),
                      s.forward_s * 1e3, s.backward_s * 1e3));
    }
  }
}

// Backward = β1 + κ_b·(forward − β1); recompute = κ_r × the layers' forward compute; both fitted
// on the fit set.
void backward_recompute_fit(const ProfileReport& rep, cost::Coefficients& c) {
  std::vector<double> fwd_compute, bwd_compute, rec_base, rec;
  for (const ProfileSample& s : rep.samples) {
    if (s.held_out) continue;
    const double layer = predict_layer_time(rep.fit, {s.chunk, s.num_layers, 0}) - rep.fit.beta1;
    const double fc = s.forward_s - c.beta1, bc = s.backward_s - c.beta1;
    if (fc > 0 && bc > 0) {
      fwd_compute.push_back(fc);
      bwd_compute.push_back(bc);
    }
    if (layer > 0 && s.recompute_s > 0) {
      rec_base.push_back(layer);
      rec.push_back(s.recompute_s);
    }
  }
  if (!fwd_compute.empty()) c.backward_factor = cost::fit_ratio(fwd_compute, bwd_compute);
  if (!rec.empty()) c.recompute_factor = cost::fit_ratio(rec_base, rec);
}

// Embedding and LM head: a first / last stage of one layer against the middle stage, forward
// and backward. Their extra forward time is a difference of timings, re-measured (at most twice
// more) while not positive; one that never is stays out of the fit, and with no point left the
// coefficient keeps the preset's value (a note says so). The engine's loss computes the head's
// gradient in forward, so the head's extra backward is noise around 0: clamped at 0.
void edges_fit(const ModelConfig& m, const ProfileGrid& grid, ChunkTimer& one,
               ProfileProgress& progress, const ProfileLog& log, cost::Coefficients& c,
               ProfileReport& rep) {
  ChunkTimer first(m, StageRange{0, 1, true, false}), last(m, StageRange{0, 1, false, true});
  std::vector<double> tok, emb, head_base, head, head_bwd;
  const double half = c.half_efficiency_tokens;
  const auto shown = [](double seconds) {
    return seconds > 0 ? fmt::format("{:8.3f} ms", seconds * 1e3) : std::string("   (noise)");
  };
  for (int64_t len : grid.edge_lens) {
    const std::vector<cost::SliceShape> chunk = {{0, len, true}};
    ProfileSample mid, tail, with_embedding;
    const auto time_edges = [&] {
      mid = time_chunk(one, chunk, 1, grid.repeats);
      tail = time_chunk(last, chunk, 1, grid.repeats);
      with_embedding = time_chunk(first, chunk, 1, grid.repeats);
      return std::min(with_embedding.forward_s - mid.forward_s, tail.forward_s - mid.forward_s);
    };
    positive_difference(time_edges, 3);
    for (const ProfileSample* s : {&mid, &tail, &with_embedding}) timings_count(*s, rep);
    const double e = with_embedding.forward_s - mid.forward_s;
    const double h = tail.forward_s - mid.forward_s;
    const double hb = std::max(tail.backward_s - mid.backward_s, 0.0);
    const double t = static_cast<double>(len);
    log(fmt::format("{} edges    len {:<16} embedding {}  LM head + loss {} fwd, {:8.3f} ms bwd",
                    progress.step(3 * progress.weight(chunk, 1)), len, shown(e), shown(h),
                    hb * 1e3));
    if (e > 0) {
      tok.push_back(t);
      emb.push_back(e);
    }
    if (h > 0) {
      head_base.push_back(t + half);  // T / eff(T)
      head.push_back(h);
      head_bwd.push_back(hb);
    }
  }
  if (!tok.empty()) {
    c.embedding_per_token = cost::fit_ratio(tok, emb);
  } else {
    rep.notes.push_back(fmt::format(
        "the embedding's time stayed within the timer's noise at every edge length; its "
        "coefficient keeps the preset's {:.4g} s/token (the full grid, without --quick, times "
        "longer "
        "chunks)",
        c.embedding_per_token));
  }
  if (!head.empty()) {
    c.lm_head_per_token = cost::fit_ratio(head_base, head);
    // Least squares through the origin; fit_ratio wants positive times, these may be 0.
    double num = 0, den = 0;
    for (size_t i = 0; i < head.size(); ++i) {
      num += head[i] * head_bwd[i];
      den += head[i] * head[i];
    }
    c.lm_head_backward_factor = num / den;
  } else {
    rep.notes.push_back(
        fmt::format("the LM head's time stayed within the timer's noise at every edge length; its "
                    "coefficients keep the preset's {:.4g} s/token, backward x{:.3f}",
                    c.lm_head_per_token, c.lm_head_backward_factor));
  }
}

// Errors of the fitted model: median / max over the held-out set into rep; returns the RMS
// relative backward error over the fit set.
double fit_errors(const cost::CostModel& cm, ProfileReport& rep) {
  std::vector<double> pf, mf, pb, mb, pr, mr;
  double bwd_sq = 0;
  int64_t bwd_n = 0;
  for (const ProfileSample& s : rep.samples) {
    const cost::StageShape st{s.num_layers, false, false};
    const double bwd = cm.backward_time(s.chunk, st);
    if (!s.held_out) {
      bwd_sq += std::pow((bwd - s.backward_s) / s.backward_s, 2);
      ++bwd_n;
      continue;
    }
    pf.push_back(cm.forward_time(s.chunk, st));
    mf.push_back(s.forward_s);
    pb.push_back(bwd);
    mb.push_back(s.backward_s);
    pr.push_back(cm.recompute_time(s.chunk, s.num_layers));
    mr.push_back(s.recompute_s);
  }
  rep.heldout_forward = profile_relative_error(pf, mf);
  rep.heldout_backward = profile_relative_error(pb, mb);
  rep.heldout_recompute = profile_relative_error(pr, mr);
  return bwd_n > 0 ? std::sqrt(bwd_sq / static_cast<double>(bwd_n)) : 0;
}

// The calibration file's contents: where and when, the fitted device and coefficients, and how
// well they fit.
void calibration_fill(const Config& cfg, const ProfileGrid& grid, cost::DeviceSpec dev,
                      const cost::Coefficients& c, double backward_residual, double sgemm,
                      ProfileReport& rep) {
  cost::Calibration& cal = rep.calibration;
  cal.machine = machine_name();
  cal.date = utc_now();
  cal.model = cfg.model;
  cal.ulysses_degree = 1;
  cal.bf16 = false;
  cal.fit_residual_forward = rep.fit.rms_relative_residual;
  cal.fit_residual_backward = backward_residual;
  dev.chunk_overhead_s = c.beta1;
  dev.half_efficiency_tokens = c.half_efficiency_tokens;
  dev.backward_factor = c.backward_factor;
  dev.sgemm_flops = sgemm;
  cal.device = dev;
  cal.coeffs = c;
  cal.notes = fmt::format(
      "infinipipe profile: {} chunk timings ({} held out), {} threads, {} repeats; sgemm {} "
      "measured {:.1f} GFLOP/s; held-out forward error "
      "median {:.1f}% max {:.1f}%, backward median {:.1f}% max {:.1f}%; {} of {} timings "
      "descheduled in every run",
      rep.samples.size(), rep.heldout_forward.count, rep.threads, grid.repeats, grid.sgemm_size,
      sgemm / 1e9, rep.heldout_forward.median * 100, rep.heldout_forward.max * 100,
      rep.heldout_backward.median * 100, rep.heldout_backward.max * 100, rep.interrupted_timings,
      rep.timings);
  for (const std::string& note : rep.notes) cal.notes += "; " + note;
}

}  // namespace

ProfileReport profile_run(const Config& cfg, const ProfileGrid& grid, const ProfileLog& log) {
  check_grid(grid);
  const auto t_start = ProfileClock::now();
  const ModelConfig m = profile_model(cfg.model, grid);

  // Threads only for the timing: the memory coefficients below use the process's own setting.
  struct ThreadsGuard {
    int saved = omp_get_max_threads();
    ~ThreadsGuard() { omp_set_num_threads(saved); }
  } threads_guard;
  if (grid.threads > 0) omp_set_num_threads(static_cast<int>(grid.threads));

  ProfileReport rep;
  rep.threads = omp_get_max_threads();
  const double sgemm = profile_sgemm_flops(grid.sgemm_size, std::max<int64_t>(3, grid.repeats));
  log(fmt::format("  sgemm {0} x {0} x {0}: {1:.1f} GFLOP/s on {2} thread(s)", grid.sgemm_size,
                  sgemm / 1e9, rep.threads));
  cost::DeviceSpec dev = cost::device_preset(cfg.cluster.device, false);
  if (cfg.cluster.device_memory > 0) dev.memory_bytes = cfg.cluster.device_memory;
  cost::Coefficients c = cost::CostModel::derive_coefficients(m, dev, 1, false);
  ProfileProgress progress(m, grid, cost::CostModel(m, dev, c, 1, false));
  ChunkTimer one(m, StageRange{0, 1, false, false});
  middle_samples_time(m, grid, one, progress, log, rep.samples);
  for (const ProfileSample& s : rep.samples) timings_count(s, rep);

  // Forward fit on the fit set.
  std::vector<cost::TimingSample> train;
  for (const ProfileSample& s : rep.samples)
    if (!s.held_out) train.push_back({s.chunk, s.num_layers, s.forward_s});
  rep.fit = cost::fit_layer_time(train);

  cost::apply_layer_fit(rep.fit, 1, c);
  backward_recompute_fit(rep, c);
  edges_fit(m, grid, one, progress, log, c, rep);

  omp_set_num_threads(threads_guard.saved);
  c = profile_memory_coefficients(m, cfg.training.optimizer, c);
  const double backward_residual = fit_errors(cost::CostModel(m, dev, c, 1, false), rep);
  calibration_fill(cfg, grid, dev, c, backward_residual, sgemm, rep);
  rep.seconds = seconds_since(t_start);
  return rep;
}

}  // namespace infinipipe::profile