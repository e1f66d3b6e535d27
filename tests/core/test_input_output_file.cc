// The bounded reader and the checked writer of user-named files (core/input_file.h,
// core/output_file.h): special files, sizes past the bound, links where they are refused,
// output paths that name a folder or an input, and no temporary left by a failed write.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "common/error_text.h"
#include "common/test_temp.h"
#include "core/error.h"
#include "core/input_file.h"
#include "core/output_file.h"

namespace infinipipe {
namespace {

namespace fs = std::filesystem;
using testing::error_text;

constexpr InputKind kSmall{"small file", 8, false};
constexpr InputKind kSmallConfig{"small config", 8, true};

class FileBoundsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = test::test_temp_path("files");
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string write(const std::string& name, const std::string& text) {
    std::ofstream((dir_ / name).string(), std::ios::binary) << text;
    return (dir_ / name).string();
  }
  fs::path dir_;
};

TEST_F(FileBoundsTest, ReadsARegularFileWithinItsBound) {
  EXPECT_EQ(input_file_read(write("a", "12345678"), kSmall), "12345678");
  EXPECT_EQ(input_file_check(write("b", ""), kSmall), 0);
}

TEST_F(FileBoundsTest, RefusesSpecialFilesTooLargeFilesAndMissingOnes) {
  const std::string fifo = (dir_ / "fifo").string();
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_NE(error_text([&] { input_file_read(fifo, kSmall); }).find("is a FIFO (named pipe), not a "
                                                                  "regular file; give the path "
                                                                  "of a small file"),
            std::string::npos);
  EXPECT_NE(error_text([&] { input_file_read("/dev/zero", kSmall, InputLinks::follow, "--x"); })
                .find("--x /dev/zero is a character device"),
            std::string::npos);
  EXPECT_NE(error_text([&] { input_file_read(dir_.string(), kSmall); }).find("is a directory"),
            std::string::npos);
  EXPECT_NE(error_text([&] { input_file_read(write("c", "123456789"), kSmall); })
                .find("is 9 bytes, more than the 8 bytes a small file may be"),
            std::string::npos);
  EXPECT_NE(error_text([&] { input_file_read((dir_ / "none").string(), kSmall); })
                .find("cannot be read: it does not exist"),
            std::string::npos);
  // The kind decides the exit code: a configuration file's fault is a ConfigError.
  EXPECT_THROW(input_file_read("/dev/zero", kSmallConfig), ConfigError);
  try {
    input_file_read("/dev/zero", kSmall);
  } catch (const ConfigError&) {
    ADD_FAILURE() << "a run-time file's fault must not be a ConfigError";
  } catch (const Error&) {
  }
}

TEST_F(FileBoundsTest, LinksAreFollowedOnlyWhereAsked) {
  const std::string target = write("target", "secret");
  fs::create_symlink(target, dir_ / "link");
  const std::string link = (dir_ / "link").string();
  EXPECT_EQ(input_file_read(link, kSmall), "secret");
  const std::string e = error_text([&] { input_file_read(link, kSmall, InputLinks::refuse); });
  EXPECT_NE(e.find("is a symbolic link"), std::string::npos) << e;
  EXPECT_EQ(e.find("secret"), std::string::npos) << e;
}

TEST_F(FileBoundsTest, OutputPathsMustNameAFileInAnExistingFolder) {
  const std::string d = dir_.string();
  EXPECT_NE(error_text([&] { output_path_check(d + "/", "--out"); }).find("names a folder"),
            std::string::npos);
  EXPECT_NE(error_text([&] { output_path_check("/", "--out"); }).find("names a folder"),
            std::string::npos);
  EXPECT_NE(error_text([&] { output_path_check(d + "/..", "--out"); }).find("names a folder"),
            std::string::npos);
  EXPECT_NE(error_text([&] { output_path_check(d, "--out"); }).find("is an existing folder"),
            std::string::npos);
  EXPECT_NE(error_text([&] { output_path_check(d + "/no/x", "--out"); }).find("does not exist"),
            std::string::npos);
  EXPECT_THROW(output_path_check("", "--out"), ConfigError);
  EXPECT_NO_THROW(output_path_check(d + "/x", "--out"));
  const std::string in = write("in", "data");
  fs::create_symlink(in, dir_ / "alias");
  EXPECT_NE(error_text([&] { output_not_input_check((dir_ / "alias").string(), in, "--out"); })
                .find("is the input"),
            std::string::npos);
  EXPECT_NO_THROW(output_not_input_check(d + "/other", in, "--out"));
}

TEST_F(FileBoundsTest, WritesThroughATemporaryNeverThroughALink) {
  const std::string out = (dir_ / "out.txt").string();
  output_file_write(out, "hello", "--out");
  EXPECT_EQ(input_file_read(out, kSmall), "hello");
  EXPECT_FALSE(fs::exists(out + ".tmp"));
  // A stale temporary, or a link planted at its name, is replaced and never written through.
  const std::string victim = write("victim", "keep");
  fs::create_symlink(victim, out + ".tmp");
  output_file_write(out, "again", "--out");
  EXPECT_EQ(input_file_read(victim, kSmall), "keep");
  EXPECT_EQ(input_file_read(out, kSmall), "again");
  // An existing folder at the name is refused before anything is written.
  fs::create_directories(dir_ / "folder");
  EXPECT_THROW(output_file_write((dir_ / "folder").string(), "x", "--out"), ConfigError);
  EXPECT_FALSE(fs::exists(dir_ / "folder.tmp"));
}

}  // namespace
}  // namespace infinipipe
