// `train --rank-placement auto` with links measured between two hosts: the layout search at the
// run's own pp and dp ranks both rank orders by predicted time on the run's batches, prints why
// (both tokens/s and the measured link) and appends the chosen order to the options; with pp
// auto it searches the layouts in both orders. Without links the options are left alone (the
// byte count decides after, setup/rank_order_bytes.h).
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "cli/run_cli.h"
#include "common/test_temp.h"
#include "core/error.h"
#include "cost/host_link_table.h"
#include "options/options.h"
#include "setup/train_auto_layout.h"

namespace infinipipe {
namespace {

namespace fs = std::filesystem;

// Two hosts of two ranks each (ranks 0-1 on host A), a slow link between them.
cost::HostLinkTable two_hosts() {
  cost::HostLinkTable t;
  t.hosts = {{"host-a", 2}, {"host-b", 2}};
  t.links = {{5e9, 2e-6}, {5e7, 50e-6}, {5e7, 50e-6}, {5e9, 2e-6}};
  t.host_of_rank = {0, 0, 1, 1};
  return t;
}

class TrainPlacement : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = test::test_temp_path("train_placement");
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    corpus_ = (dir_ / "corpus").string();
    const ShellResult r = run_cli(
        fmt::format("data synth --num-documents 100 --seq-length 2048 --output {}", corpus_));
    ASSERT_EQ(r.exit_code, 0) << r.output;
  }
  void TearDown() override { fs::remove_all(dir_); }

  struct Resolved {
    std::vector<std::pair<std::string, std::string>> appended;
    std::string printed;
    bool same = false;  // the options came back unchanged
  };

  // train_resolve_auto_layout on 4 ranks with `links`, the model given by `model` flags.
  Resolved resolve(std::vector<std::string> args, const cost::HostLinkTable& links) const {
    for (const std::string& w :
         {std::string("--data-path"), corpus_, std::string("--device"), std::string("cpu"),
          std::string("--train-iters"), std::string("3")})
      args.push_back(w);
    options::ParsedArgs parsed = options::parse_config_args(args);
    parsed.options->world_size = 4;
    setup::TrainAutoLayout how;
    how.world = 4;
    how.links = links;
    const size_t before = parsed.options->flags.size();
    ::testing::internal::CaptureStdout();
    std::shared_ptr<options::ConfigOptions> out;
    try {
      out = setup::train_resolve_auto_layout(parsed.options, Config{}, how);
    } catch (...) {
      ::testing::internal::GetCapturedStdout();
      throw;
    }
    Resolved r;
    r.printed = ::testing::internal::GetCapturedStdout();
    r.same = out == parsed.options;
    r.appended.assign(out->flags.begin() + static_cast<std::ptrdiff_t>(before), out->flags.end());
    return r;
  }

  fs::path dir_;
  std::string corpus_;
};

// The small model of the multi-host check: long sequences over hidden 64, whose activations
// outweigh its gradients.
const std::vector<std::string> kSmall = {"--num-layers",
                                         "2",
                                         "--hidden-size",
                                         "64",
                                         "--num-attention-heads",
                                         "4",
                                         "--seq-length",
                                         "2048",
                                         "--global-batch-size",
                                         "8",
                                         "--vocab-size",
                                         "256",
                                         "--pp",
                                         "2",
                                         "--dp",
                                         "2",
                                         "--rank-placement",
                                         "auto"};

TEST_F(TrainPlacement, MeasuredLinksRankBothOrdersAtTheRunsLayout) {
  std::vector<std::string> args = kSmall;
  args.push_back("--measure-links");
  const Resolved r = resolve(args, two_hosts());
  ASSERT_EQ(r.appended.size(), 1u) << r.printed;
  EXPECT_EQ(r.appended[0].first, "rank-placement");
  EXPECT_EQ(r.appended[0].second, "pipelines") << r.printed;
  EXPECT_NE(r.printed.find("rank placement auto: pipelines on adjacent ranks (rank = replica x "
                           "pp + stage) for pp 2 x vpp 1 x ulysses 1 x dp 2, epp: predicted "),
            std::string::npos)
      << r.printed;
  EXPECT_NE(r.printed.find("tokens/s in Megatron's order"), std::string::npos) << r.printed;
  EXPECT_NE(r.printed.find("host-a <-> host-b: 50 MB/s, 50 us"), std::string::npos) << r.printed;
  EXPECT_NE(r.printed.find("on 3 sampled batch(es)"), std::string::npos) << r.printed;
  EXPECT_EQ(r.printed.find("layout search over"), std::string::npos) << r.printed;
}

TEST_F(TrainPlacement, WideModelOnShortSequencesKeepsMegatronsOrder) {
  const Resolved r =
      resolve({"--num-layers", "2", "--hidden-size", "512", "--num-attention-heads", "4",
               "--seq-length", "64", "--global-batch-size", "8", "--vocab-size", "32000", "--pp",
               "2", "--dp", "2", "--rank-placement", "auto", "--measure-links"},
              two_hosts());
  ASSERT_EQ(r.appended.size(), 1u) << r.printed;
  EXPECT_EQ(r.appended[0].second, "megatron") << r.printed;
  EXPECT_NE(r.printed.find("rank placement auto: Megatron's order (rank = stage x dp + replica)"),
            std::string::npos)
      << r.printed;
}

TEST_F(TrainPlacement, PipelineAutoSearchesTheLayoutsInBothOrders) {
  std::vector<std::string> args = kSmall;
  args[13] = "auto";  // --pp auto, dp searched with it
  args.erase(args.begin() + 14, args.begin() + 16);
  args.push_back("--measure-links");
  const Resolved r = resolve(args, two_hosts());
  ASSERT_FALSE(r.same);
  ASSERT_GE(r.appended.size(), 2u) << r.printed;
  EXPECT_EQ(r.appended[0].first, "rank-placement");
  EXPECT_NE(r.printed.find("layout search over 4 ranks"), std::string::npos) << r.printed;
  EXPECT_NE(r.printed.find("rank placement auto: "), std::string::npos) << r.printed;
}

TEST_F(TrainPlacement, WithoutLinksOrOnOneHostTheOptionsStay) {
  EXPECT_TRUE(resolve(kSmall, {}).same);
  cost::HostLinkTable one;
  one.hosts = {{"host-a", 4}};
  one.links = {{5e9, 2e-6}};
  one.host_of_rank = {0, 0, 0, 0};
  std::vector<std::string> args = kSmall;
  args.push_back("--measure-links");
  EXPECT_TRUE(resolve(args, one).same);
  // A given order is kept: the links only price it.
  args[17] = "megatron";
  EXPECT_TRUE(resolve(args, two_hosts()).same);
}

TEST_F(TrainPlacement, SearchIterationsSizeThePlacementSearchOnly) {
  // --search-iterations is for a search: auto degrees, or auto placement with measured links.
  const ShellResult r =
      run_cli(fmt::format("train --data-path {} --rank-placement auto --search-iterations 2 "
                          "--train-iters 1",
                          corpus_));
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--rank-placement auto --measure-links"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace infinipipe
