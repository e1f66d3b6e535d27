// `infinipipe train --save` when the disk refuses: a read-only folder fails before any training
// with exit 2, and a disk that fills up during a save ends the run with one clear error while the
// previous checkpoint and `latest` stay intact. Both need a real read-only or full file system:
// as root they mount a small tmpfs in a private mount namespace (unshare -m) and skip where that
// is not allowed; without root a read-only folder is simply chmod 0555.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "ckpt/checkpoint_checksum.h"
#include "ckpt/checkpoint_fs.h"
#include "ckpt/safetensors.h"
#include "cli/corpus_cli_test.h"
#include "common/build_paths.h"
#include "common/file_text.h"

namespace {

namespace fs = std::filesystem;

constexpr int kCannotMount = 77;  // the script's exit code when unshare or mount is refused

class CheckpointFaultCliTest : public CorpusCliTest {
 protected:
  std::string train(const std::string& extra) const {
    return fmt::format("{} train {} {}", INFINIPIPE_BINARY, corpus_args(), extra);
  }
  // Runs `body` (sh) in a private mount namespace with a tmpfs mounted at $M.
  ShellResult in_tmpfs(const std::string& body) const {
    const fs::path script = dir_ / "fault.sh";
    std::ofstream(script) << fmt::format(
        "exec 2>&1\nM={}\nmkdir -p $M\nmount -t tmpfs -o size=32m none $M || exit {}\n{}\n",
        (dir_ / "mnt").string(), kCannotMount, body);
    return shell(fmt::format("unshare -m sh {} || exit $?", script.string()));
  }
  static ShellResult shell(const std::string& cmd) { return infinipipe::testing::shell_run(cmd); }
};

TEST_F(CheckpointFaultCliTest, ReadOnlySaveFolderFailsBeforeTraining) {
  ShellResult r;
  if (::geteuid() != 0) {
    const fs::path ro = dir_ / "ro";
    fs::create_directories(ro);
    fs::permissions(ro, fs::perms::owner_read | fs::perms::owner_exec);
    r = shell(train(fmt::format("--train-iters 2 --save {}", ro.string())) + "; echo TRAIN_RC=$?");
    fs::permissions(ro, fs::perms::owner_all);
  } else {
    r = in_tmpfs("mkdir $M/ck && mount -o remount,ro $M || exit 77\n" +
                 train("--train-iters 2 --save $M/ck") + "\necho TRAIN_RC=$?");
    if (r.exit_code == kCannotMount) GTEST_SKIP() << "cannot mount a tmpfs here:\n" << r.output;
  }
  EXPECT_NE(r.output.find("TRAIN_RC=2"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("--save"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("cannot create a file there"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("iter 1/2"), std::string::npos) << "trained before failing:\n"
                                                          << r.output;
  EXPECT_EQ(r.output.find("internal error"), std::string::npos) << r.output;
}

// The first run saves iteration 1; the disk is then filled to within 128 KiB (room for the
// metrics lines, not for a checkpoint), and the resumed run's save of iteration 2 must fail
// cleanly: exit 1, one error naming the file and the full disk, no temporaries left, `latest`
// still 1 and that checkpoint still verifying.
TEST_F(CheckpointFaultCliTest, DiskFullDuringSaveKeepsThePreviousCheckpoint) {
  if (::geteuid() != 0) GTEST_SKIP() << "mounting a small tmpfs needs root";
  const ShellResult r =
      in_tmpfs(train("--train-iters 1 --save $M/ck --quiet") + " || exit 78\n" +
               "AVAIL=$(df -B1 --output=avail $M | tail -1)\n"
               "head -c $((AVAIL - 131072)) /dev/zero > $M/filler\n" +
               train("--train-iters 2 --save $M/ck --load $M/ck --quiet") +
               "\necho TRAIN_RC=$?\n"
               "echo LATEST=$(cat $M/ck/latest)\n"
               "echo TEMPORARIES=$(find $M/ck -name '*.tmp' | wc -l)\n" +
               fmt::format("{} checkpoint verify $M/ck\necho VERIFY_RC=$?\n", INFINIPIPE_BINARY));
  if (r.exit_code == kCannotMount) GTEST_SKIP() << "cannot mount a tmpfs here:\n" << r.output;
  ASSERT_NE(r.exit_code, 78) << "the first run failed:\n" << r.output;
  EXPECT_NE(r.output.find("TRAIN_RC=1"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("No space left on device"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("internal error"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("LATEST=1"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("TEMPORARIES=0"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("iter_0000001: OK"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("VERIFY_RC=0"), std::string::npos) << r.output;
}

// kill -9 of the job while it saves (as soon as the folder of its second checkpoint appears):
// whatever was half-written, --load resumes from a complete checkpoint that verifies.
TEST_F(CheckpointFaultCliTest, KilledDuringASaveResumesFromACompleteCheckpoint) {
  const std::string ck = (dir_ / "ck").string();
  const ShellResult k = shell(fmt::format(
      "exec 2>&1\n{} &\nP=$!\n"
      "for i in $(seq 6000); do [ -e {}/iter_0000004 ] && break; sleep 0.005; done\n"
      "kill -9 $P\nwait $P\necho KILLED_RC=$?\n",
      train(fmt::format("--train-iters 100000 --save-interval 2 --quiet --save {}", ck)), ck));
  ASSERT_NE(k.output.find("KILLED_RC=137"), std::string::npos) << k.output;
  const ShellResult v = run_cli(fmt::format("checkpoint verify {}", ck));
  EXPECT_EQ(v.exit_code, 0) << v.output;
  const ShellResult list = run_cli(fmt::format("checkpoint list {}", ck));
  EXPECT_NE(list.output.find("iter_0000002  complete"), std::string::npos) << list.output;
  const ShellResult r = shell(train(fmt::format("--train-iters 5 --load {}", ck)));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("resumed from"), std::string::npos) << r.output;
}

// NaN in one element of a saved moment (as for a token absent from the data, whose row is never
// read), with the checksums recomputed so only the values are wrong: `train --load` refuses to
// resume from it and `checkpoint verify` fails naming the tensor, instead of training on.
TEST_F(CheckpointFaultCliTest, PoisonedMomentIsRefusedByLoadAndVerify) {
  const fs::path ck = dir_ / "ck";
  ShellResult r = shell(train(fmt::format("--train-iters 1 --quiet --save {}", ck.string())));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const fs::path iter = ck / "iter_0000001";
  const std::string file = (iter / "optimizer.safetensors").string();
  const std::string tensor = "model.embed_tokens.weight.exp_avg";
  std::string bytes = infinipipe::file_text(file);
  {
    infinipipe::SafetensorsReader reader(file);
    uint64_t header = 0;
    for (int i = 0; i < 8; i++) header |= uint64_t(static_cast<unsigned char>(bytes[i])) << (8 * i);
    const float nan = std::nanf("");
    std::memcpy(bytes.data() + 8 + header + reader.info(tensor).begin + 4 * 300, &nan, 4);
  }
  std::ofstream(file, std::ios::binary | std::ios::trunc) << bytes;
  const infinipipe::FileChecksum c = infinipipe::checksum_file(file);
  nlohmann::json state =
      nlohmann::json::parse(infinipipe::file_text((iter / "state.json").string()));
  state["files"]["optimizer.safetensors"]["crc32c"] = infinipipe::checksum_hex(c.crc32c);
  std::ofstream(iter / "state.json", std::ios::trunc) << state.dump(2);

  r = shell(train(fmt::format("--train-iters 2 --load {}", ck.string())));
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find(tensor + " holds nan at element 300"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("iter 2/2"), std::string::npos) << r.output;
  r = run_cli(fmt::format("checkpoint verify {}", ck.string()));
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find(tensor + " holds nan"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find(": OK"), std::string::npos) << r.output;
}

}  // namespace
