// A traced two-rank pipeline run as a person reads it: every send's flow finished by exactly one
// receive in the merged trace, every lane named, the report rendered in headless Chromium from
// another working directory after the run directory moved, and TensorBoard scalars equal to
// metrics.jsonl's, each rank's timings its own, the page never wider than the window; plus clear
// errors for a bad --trace-iterations.
#include <gtest/gtest.h>

#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/corpus_cli_test.h"
#include "common/build_paths.h"
#include "common/tfevents_read.h"

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

class TraceCli : public CorpusCliTest {};

// The checks of a merged trace: (pid, tid) of its X slices all named, flows paired one to one.
// Returns the number of flows that cross from one rank (pid) to another.
int merged_trace_check(const json& t) {
  std::set<std::pair<int, int>> named, used;
  std::map<uint64_t, std::vector<int>> starts, finishes;  // id -> pids
  for (const json& e : t.at("traceEvents")) {
    const std::string ph = e.at("ph");
    const std::pair<int, int> lane{e.at("pid").get<int>(), e.value("tid", 0)};
    if (ph == "M" && e.at("name") == "thread_name") named.insert(lane);
    if (ph == "X") used.insert(lane);
    if (ph == "s") starts[e.at("id").get<uint64_t>()].push_back(lane.first);
    if (ph == "f") finishes[e.at("id").get<uint64_t>()].push_back(lane.first);
  }
  for (const auto& lane : used) {
    EXPECT_EQ(named.count(lane), 1u) << "lane " << lane.second << " of rank " << lane.first;
  }
  EXPECT_FALSE(starts.empty());
  EXPECT_EQ(starts.size(), finishes.size());
  int crossing = 0;
  for (const auto& [id, pids] : starts) {
    EXPECT_EQ(pids.size(), 1u) << "flow " << id << " starts more than once";
    EXPECT_EQ(finishes[id].size(), 1u) << "flow " << id << " is not finished exactly once";
    if (finishes[id].size() != 1u) continue;
    crossing += pids.front() != finishes[id].front();
  }
  return crossing;
}

TEST_F(TraceCli, PipelineRunMergesRendersAfterMovingAndLogsTensorBoard) {
  if (!have("mpirun")) GTEST_SKIP() << "mpirun is not installed";
  const fs::path run = dir_ / "run", tb = dir_ / "tb";
  const ShellResult t = infinipipe::testing::shell_run(fmt::format(
      "mpirun --allow-run-as-root --oversubscribe --bind-to none -np 2 env OMP_NUM_THREADS=1 {} "
      "train {} --pp 2 --memory-budget 8MiB --trace {} --trace-iterations 2-3 --tensorboard-dir {} "
      "--timings {}",
      INFINIPIPE_BINARY, corpus_train_args(4), run.string(), tb.string(),
      (dir_ / "timings.jsonl").string()));
  ASSERT_EQ(t.exit_code, 0) << t.output;

  // Each rank's timings name the pipeline rank that ran the actions.
  for (int rank : {0, 1}) {
    std::ifstream timings(dir_ / (rank == 0 ? "timings.jsonl" : "timings-rank00001.jsonl"));
    std::string record;
    int records = 0;
    while (std::getline(timings, record)) {
      ++records;
      for (const json& a : json::parse(record).at("actions")) EXPECT_EQ(a.at("rank"), rank);
    }
    EXPECT_EQ(records, 4) << "rank " << rank;
  }

  // Each rank's file holds only iterations 2 and 3, each with the process's RSS peak; its sends
  // finish in the other rank's file.
  for (const char* f : {"trace-rank00000.json", "trace-rank00001.json"}) {
    std::set<int64_t> iterations;
    const json trace = json_read(run / f);
    for (const json& e : trace.at("traceEvents")) {
      if (e.at("ph") != "X" || e.at("cat") != "iteration") continue;
      iterations.insert(e["args"]["iteration"].get<int64_t>());
      EXPECT_GT(e["args"].at("rss_peak_bytes").get<int64_t>(),
                e["args"].at("measured_peak_bytes").get<int64_t>());
    }
    EXPECT_EQ(iterations, (std::set<int64_t>{2, 3})) << f;
  }
  // The run directory moves; the report runs from elsewhere and merges the traces.
  const fs::path moved = dir_ / "moved" / "run";
  fs::create_directories(moved.parent_path());
  fs::rename(run, moved);
  fs::create_directories(dir_ / "elsewhere");
  const ShellResult r = infinipipe::testing::shell_run(
      fmt::format("cd {} && {} report ../moved/run --merge-trace merged.json",
                  (dir_ / "elsewhere").string(), INFINIPIPE_BINARY));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const json merged = json_read(dir_ / "elsewhere" / "merged.json");
  EXPECT_EQ(merged.at("metadata").at("ranks").size(), 2u);
  EXPECT_GT(merged_trace_check(merged), 0) << "no flow from one rank to the other";

  // TensorBoard: rank 0's event file, every iteration's scalars equal to metrics.jsonl's.
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(tb)) files.push_back(e.path());
  ASSERT_EQ(files.size(), 1u);
  EXPECT_EQ(files[0].filename().string().rfind("events.out.tfevents.", 0), 0u);
  const auto events = infinipipe::test_tfevents::events_read(files[0].string());
  ASSERT_EQ(events.size(), 5u);  // the header and 4 iterations
  EXPECT_EQ(events[0].file_version, "brain.Event:2");
  std::ifstream lines(moved / "metrics.jsonl");
  std::string line;
  for (size_t i = 1; std::getline(lines, line); ++i) {
    ASSERT_LT(i, events.size());
    const json m = json::parse(line);
    EXPECT_EQ(events[i].step, m.at("iteration").get<int64_t>());
    EXPECT_EQ(events[i].scalars.at("lm loss"), m.at("loss").get<float>());
    EXPECT_EQ(events[i].scalars.at("learning-rate"), m.at("lr").get<float>());
    EXPECT_EQ(events[i].scalars.at("grad-norm"), m.at("grad_norm").get<float>());
    EXPECT_EQ(events[i].scalars.at("throughput"), m.at("tokens_per_s").get<float>());
    EXPECT_EQ(events[i].scalars.at("iteration-time"), m.at("seconds").get<float>());
  }

  if (!have("chromium")) {
    GTEST_SKIP() << "chromium is not installed (scripts/install-deps.sh installs it): the HTML "
                    "render check did not run";
  }
  const std::string flags =
      "--headless --no-sandbox --disable-gpu --disable-background-networking "
      "--disable-dev-shm-usage --user-data-dir=" +
      (dir_ / "chromium-profile").string();
  const ShellResult dom = infinipipe::testing::shell_run(fmt::format(
      "timeout 60 chromium {} --dump-dom file://{}", flags, (moved / "report.html").string()));
  ASSERT_EQ(dom.exit_code, 0) << dom.output;
  // 2 ranks: two Gantt charts, two memory charts, loss, tokens/s, lr, gradient norm, RSS,
  // prediction error.
  EXPECT_NE(dom.output.find("charts rendered: 10 of 10"), std::string::npos) << dom.output;
  // The budget is within a few times the peaks: each memory chart draws its line.
  size_t budget_lines = 0;
  for (size_t at = 0; (at = dom.output.find(">budget</text>", at)) != std::string::npos; ++at) {
    ++budget_lines;
  }
  EXPECT_EQ(budget_lines, 2u);
  for (const char* name : {"memory-rank1", "lr", "grad-norm", "rss", "id=\"config\"",
                           "<option value=\"2\">2</option>", "<option value=\"3\" selected"}) {
    EXPECT_NE(dom.output.find(name), std::string::npos) << name;
  }

  // At a laptop's and a phone's width the page never scrolls sideways: charts scale down, wide
  // tables scroll inside their own box. A copy of the page measures itself once laid out.
  std::string page = text_of(moved / "report.html");
  page.insert(page.rfind("</body>"),
              "<script>window.addEventListener('load', () => { const d = "
              "document.createElement('div'); d.id = 'width-check'; d.textContent = 'page ' + "
              "document.documentElement.scrollWidth + ' of ' + window.innerWidth; "
              "document.body.appendChild(d); });</script>");
  std::ofstream(moved / "measured.html") << page;
  for (int width : {1000, 500}) {
    const ShellResult narrow = infinipipe::testing::shell_run(
        fmt::format("timeout 60 chromium {} --window-size={},900 --dump-dom file://{}", flags,
                    width, (moved / "measured.html").string()));
    ASSERT_EQ(narrow.exit_code, 0) << narrow.output;
    std::smatch m;
    const std::regex measured(R"re(id="width-check">page (\d+) of (\d+)<)re");
    ASSERT_TRUE(std::regex_search(narrow.output, m, measured)) << narrow.output;
    EXPECT_LE(std::stoi(m[1]), std::stoi(m[2])) << "at a window " << width << " px wide";
  }
}

// A run directory is relocatable: the calibration the run planned with (given by a path relative
// to where train ran) travels inside it, so report works after the directory moved and the
// original file is gone; a run without that copy whose path no longer resolves says what to do.
TEST_F(TraceCli, ARunsCalibrationTravelsWithItsDirectory) {
  ShellResult t = run_cli(fmt::format("train {} --cost-model-update online --save {}",
                                      corpus_train_args(1), (dir_ / "learned").string()));
  ASSERT_EQ(t.exit_code, 0) << t.output;
  t = infinipipe::testing::shell_run(
      fmt::format("cd {} && {} train {} --calibration learned/calibration.json --trace run",
                  dir_.string(), INFINIPIPE_BINARY, corpus_train_args(2)));
  ASSERT_EQ(t.exit_code, 0) << t.output;
  fs::create_directories(dir_ / "moved");
  fs::rename(dir_ / "run", dir_ / "moved" / "run");
  fs::remove_all(dir_ / "learned");
  const std::string report = fmt::format("cd / && {} report {} --no-html", INFINIPIPE_BINARY,
                                         (dir_ / "moved" / "run").string());
  const ShellResult r = infinipipe::testing::shell_run(report);
  EXPECT_EQ(r.exit_code, 0) << r.output;

  // A link in its place is refused, as every file of a run directory is.
  const fs::path copy = dir_ / "moved" / "run" / "prior-calibration.json";
  fs::rename(copy, dir_ / "elsewhere.json");
  fs::create_symlink(dir_ / "elsewhere.json", copy);
  const ShellResult linked = infinipipe::testing::shell_run(report);
  EXPECT_EQ(linked.exit_code, 1) << linked.output;
  EXPECT_NE(linked.output.find("symbolic link"), std::string::npos) << linked.output;

  fs::remove(copy);
  const ShellResult lost = infinipipe::testing::shell_run(report);
  EXPECT_EQ(lost.exit_code, 1) << lost.output;
  EXPECT_NE(lost.output.find("the run's calibration 'learned/calibration.json' (its config.yaml) "
                             "is not there from this directory"),
            std::string::npos)
      << lost.output;
  EXPECT_NE(lost.output.find("prior-calibration.json"), std::string::npos) << lost.output;
}

TEST_F(TraceCli, BadTraceIterationsIsOneClearError) {
  for (const char* bad : {"5-2", "0-3", "x"}) {
    const ShellResult r = run_cli(fmt::format("train {} --trace {} --trace-iterations {}",
                                              corpus_train_args(1), (dir_ / "run").string(), bad));
    EXPECT_EQ(r.exit_code, 2) << r.output;
    EXPECT_NE(r.output.find("--trace-iterations"), std::string::npos) << r.output;
    EXPECT_EQ(r.output.find("internal error"), std::string::npos) << r.output;
  }
  const ShellResult r =
      run_cli(fmt::format("train {} --trace-iterations 1-2", corpus_train_args(1)));
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("add --trace DIR"), std::string::npos) << r.output;
}

}  // namespace
