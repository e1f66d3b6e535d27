#include "obs/metrics.h"

#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>

#include <fmt/format.h>

#include "core/config.h"
#include "core/error.h"
#include "core/strings.h"
#include "runlog/timings_record.h"

namespace infinipipe::obs {

namespace {

std::string format_rate(double tokens_per_s) {
  if (tokens_per_s >= 1e6) return fmt::format("{:.2f}M", tokens_per_s / 1e6);
  if (tokens_per_s >= 1e3) return fmt::format("{:.1f}K", tokens_per_s / 1e3);
  return fmt::format("{:.0f}", tokens_per_s);
}

}  // namespace

nlohmann::json action_timings_to_json(int64_t iteration, double predicted_step_seconds,
                                      const std::vector<StepStats>& ranks, int32_t first_rank) {
  runlog::ActionTimingsRecord record;
  record.iteration = iteration;
  record.predicted_step_seconds = predicted_step_seconds;
  for (size_t r = 0; r < ranks.size(); ++r) {
    for (const ActionTiming& t : ranks[r].timings) {
      record.actions.push_back({first_rank + static_cast<int32_t>(r), t.action.stage, t.action.kind,
                                t.action.chunk, t.action.recompute_layers, t.action.predicted_time,
                                t.start_s, t.end_s});
    }
  }
  return runlog::timings_record_to_json(record);
}

std::string metrics_format_line(const IterationMetrics& m) {
  std::string eval;
  if (m.valid_loss) eval += fmt::format(" | valid loss {:.4f}", *m.valid_loss);
  if (m.test_loss) eval += fmt::format(" | test loss {:.4f}", *m.test_loss);
  return fmt::format(
      " iter {}/{} | loss {:.4f}{} | {} tok/s | lr {:.3e} | grad norm {:.3f} | peak {} (predicted "
      "{}) | {} chunks, {} {}",
      m.iteration, m.train_iters, m.loss, eval, format_rate(m.tokens_per_s), m.lr, m.grad_norm,
      format_bytes(m.measured_peak_bytes), format_bytes(m.predicted_peak_bytes), m.chunks,
      m.schedule, m.plan_knobs);
}

MetricsWriter::MetricsWriter(const std::string& path) : path_(path) {
  if (path.empty()) return;
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  std::error_code ec;
  if (!parent.empty()) std::filesystem::create_directories(parent, ec);
  file_ = std::fopen(path.c_str(), "a");
  if (file_ == nullptr) {
    fail_config(
        "cannot open the metrics file {} for appending ({}); choose another --metrics "
        "path or create its directory",
        path, std::strerror(errno));
  }
}

MetricsWriter::~MetricsWriter() {
  if (file_ != nullptr) std::fclose(file_);
}

void MetricsWriter::write(const nlohmann::json& record) {
  if (file_ == nullptr) return;
  const std::string line = record.dump() + "\n";
  if (std::fwrite(line.data(), 1, line.size(), file_) != line.size() || std::fflush(file_) != 0) {
    fail("cannot write to the metrics file {} ({})", path_, std::strerror(errno));
  }
}

ProgressLine::ProgressLine(std::FILE* out, int64_t first_iteration, int64_t train_iters,
                           bool enabled)
    : out_(out),
      enabled_(enabled && out != nullptr),
      tty_(out != nullptr && isatty(fileno(out)) == 1),
      first_(first_iteration),
      total_(train_iters),
      start_(Clock::now()),
      last_print_(start_) {}

ProgressLine::~ProgressLine() {
  finish();
}

void ProgressLine::update(const IterationMetrics& m) {
  if (!enabled_) return;
  const auto now = Clock::now();
  const double elapsed = std::chrono::duration<double>(now - start_).count();
  const int64_t done = m.iteration - first_;
  const int64_t left = total_ - m.iteration;
  const double eta = done > 0 ? elapsed / static_cast<double>(done) * static_cast<double>(left) : 0;
  const int pct = total_ > 0 ? static_cast<int>(100 * m.iteration / total_) : 100;
  if (m.valid_loss) valid_loss_ = m.valid_loss;
  const std::string valid =
      valid_loss_ ? fmt::format(" | valid loss {:.4f}", *valid_loss_) : std::string();
  const std::string line = fmt::format(
      "[{}/{} {:3}%] loss {:.4f}{} | {} tok/s | elapsed {} | ETA {}", m.iteration, total_, pct,
      m.loss, valid, format_rate(m.tokens_per_s), format_duration(elapsed), format_duration(eta));
  if (tty_) {
    fmt::print(out_, "\r\033[K{}", line);
    std::fflush(out_);
    open_line_ = true;
    return;
  }
  // Not a terminal (a log file): a plain line every 10% of the run or every 30 s, and the last.
  const double since = std::chrono::duration<double>(now - last_print_).count();
  const int64_t step = std::max<int64_t>(1, total_ / 10);
  if (m.iteration - last_printed_iter_ >= step || since >= 30.0 || left == 0) {
    fmt::print(out_, "{}\n", line);
    std::fflush(out_);
    last_print_ = now;
    last_printed_iter_ = m.iteration;
  }
}

void ProgressLine::clear() {
  if (open_line_) {
    fmt::print(out_, "\r\033[K");
    std::fflush(out_);
    open_line_ = false;
  }
}

void ProgressLine::finish() {
  if (open_line_) {
    fmt::print(out_, "\n");
    std::fflush(out_);
    open_line_ = false;
  }
}

}  // namespace infinipipe::obs
