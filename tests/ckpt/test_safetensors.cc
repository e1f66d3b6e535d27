// safetensors: round trip, format details from the specification, and damaged files.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>

#include "ckpt/checkpoint_checksum.h"
#include "ckpt/safetensors.h"
#include "common/error_text.h"
#include "core/error.h"

namespace infinipipe {
namespace {

namespace fs = std::filesystem;

class SafetensorsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("ip_st_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string file(const std::string& name) const { return (dir_ / name).string(); }

  // A file with a hand-written header (padded to 8 like real writers) and raw data.
  std::string craft(const std::string& header, const std::string& data) {
    std::string h = header;
    h.append((8 - h.size() % 8) % 8, ' ');
    const uint64_t n = h.size();
    std::string bytes(8, '\0');
    std::memcpy(bytes.data(), &n, 8);
    const std::string path = file("crafted.safetensors");
    std::ofstream(path, std::ios::binary) << bytes << h << data;
    return path;
  }

  fs::path dir_;
};

std::string error_of(const std::string& path) {
  return infinipipe::testing::error_text([&] { SafetensorsReader r(path); });
}

std::vector<char> slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void spit(const std::string& path, const std::vector<char>& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc).write(bytes.data(), bytes.size());
}

TEST(Checksum, Crc32cKnownVectorAndPaths) {
  const char* s = "123456789";
  EXPECT_EQ(checksum_crc32c(0, s, 9), 0xE3069283u);
  EXPECT_EQ(checksum_crc32c_table(0, s, 9), 0xE3069283u);
  std::vector<unsigned char> data(10007);
  std::mt19937 rng(1);
  for (auto& b : data) b = static_cast<unsigned char>(rng());
  const uint32_t whole = checksum_crc32c(0, data.data(), data.size());
  EXPECT_EQ(whole, checksum_crc32c_table(0, data.data(), data.size()));
  const uint32_t split =
      checksum_crc32c(checksum_crc32c(0, data.data(), 333), data.data() + 333, data.size() - 333);
  EXPECT_EQ(whole, split);
  data[5000] ^= 1;
  EXPECT_NE(whole, checksum_crc32c(0, data.data(), data.size()));
}

// A checkpoint file swapped for a FIFO is refused at once, not waited on.
TEST_F(SafetensorsTest, ChecksumOfAFifoIsRefusedNotWaitedOn) {
  const std::string path = file("fifo.safetensors");
  ASSERT_EQ(::mkfifo(path.c_str(), 0600), 0);
  EXPECT_NE(error_text([&] { checksum_file(path); }).find("is not a regular file"),
            std::string::npos);
}

TEST_F(SafetensorsTest, RoundTripIsBitIdentical) {
  std::vector<float> a(6 * 7), scalar = {3.25f};
  std::vector<int64_t> steps = {1, -2, 1LL << 40};
  std::mt19937 rng(2);
  std::normal_distribution<float> dist;
  for (float& x : a) x = dist(rng);
  a[3] = -0.0f;
  a[4] = std::numeric_limits<float>::denorm_min();
  SafetensorsWriter w;
  w.add_f32("model.layers.0.mlp.up_proj.weight", {6, 7}, a);
  w.add_f32("scalar", {}, scalar);
  w.add_f32("empty", {0, 3}, {});
  w.add_f32("odd", {3}, std::span<const float>(a.data(), 3));  // forces I64 alignment care
  w.add_i64("steps", {3}, steps);
  w.set_metadata("format", "pt");
  const std::string path = file("a.safetensors");
  const SafetensorsWritten written = w.write(path);

  EXPECT_EQ(written.bytes, static_cast<int64_t>(fs::file_size(path)));
  EXPECT_EQ(written.crc32c, checksum_file(path).crc32c);
  EXPECT_FALSE(fs::exists(path + ".tmp"));

  const std::vector<char> bytes = slurp(path);
  uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  EXPECT_EQ(n % 8, 0u);  // header padded so the data buffer is 8-byte aligned
  EXPECT_EQ(bytes[8], '{');

  SafetensorsReader r(path);
  EXPECT_EQ(r.metadata().at("format"), "pt");
  EXPECT_EQ(r.tensors().size(), 5u);
  std::vector<float> back = r.read_f32("model.layers.0.mlp.up_proj.weight");
  ASSERT_EQ(back.size(), a.size());
  EXPECT_EQ(std::memcmp(back.data(), a.data(), a.size() * 4), 0);
  EXPECT_EQ(r.read_f32("scalar"), scalar);
  EXPECT_TRUE(r.read_f32("empty").empty());
  EXPECT_EQ(r.info("empty").shape, (std::vector<int64_t>{0, 3}));
  EXPECT_EQ(r.read_i64("steps"), steps);
  EXPECT_EQ(r.info("steps").begin % 8, 0);
  EXPECT_EQ(r.find("missing"), nullptr);
}

TEST_F(SafetensorsTest, ReadsHandWrittenSpecExample) {
  // Two F32 values and one I64, offsets relative to the data buffer; __metadata__ anywhere.
  std::string data(16, '\0');
  const float f[2] = {1.5f, -2.0f};
  const int64_t i = 42;
  std::memcpy(data.data(), &i, 8);
  std::memcpy(data.data() + 8, f, 8);
  const std::string path =
      craft(R"({"b":{"dtype":"F32","shape":[2],"data_offsets":[8,16]},"__metadata__":{"k":"v"},)"
            R"("a":{"dtype":"I64","shape":[],"data_offsets":[0,8]}})",
            data);
  SafetensorsReader r(path);
  EXPECT_EQ(r.read_f32("b"), (std::vector<float>{1.5f, -2.0f}));
  EXPECT_EQ(r.read_i64("a"), (std::vector<int64_t>{42}));
  EXPECT_EQ(r.metadata().at("k"), "v");
}

TEST_F(SafetensorsTest, TruncatedFilesAreRefusedNamingTheFile) {
  std::vector<float> a(100, 1.0f);
  SafetensorsWriter w;
  w.add_f32("w", {10, 10}, a);
  const std::string path = file("t.safetensors");
  w.write(path);
  std::vector<char> bytes = slurp(path);

  spit(path, std::vector<char>(bytes.begin(), bytes.end() - 1));
  std::string e = error_of(path);
  EXPECT_NE(e.find(path), std::string::npos) << e;
  EXPECT_NE(e.find("data buffer"), std::string::npos) << e;

  spit(path, std::vector<char>(bytes.begin(), bytes.begin() + 20));  // cut inside the header
  e = error_of(path);
  EXPECT_NE(e.find("beyond the end of the file"), std::string::npos) << e;

  spit(path, std::vector<char>(bytes.begin(), bytes.begin() + 5));
  EXPECT_NE(error_of(path).find("too short"), std::string::npos);

  spit(path, {});
  EXPECT_NE(error_of(path).find(path), std::string::npos);
  EXPECT_NE(error_of(file("nonexistent")).find("cannot open"), std::string::npos);
}

TEST_F(SafetensorsTest, FlippedHeaderBytesAreRefused) {
  std::vector<float> a(12, 2.0f);
  SafetensorsWriter w;
  w.add_f32("w", {3, 4}, a);
  const std::string path = file("f.safetensors");
  w.write(path);
  const std::vector<char> good = slurp(path);
  uint64_t n = 0;
  std::memcpy(&n, good.data(), 8);
  // Flip each header byte in turn: every result must be an Error or a valid file whose tensor
  // still reads safely (a flipped space of padding, say) -- never a crash.
  int refused = 0;
  for (uint64_t k = 0; k < 8 + n; k++) {
    std::vector<char> bad = good;
    bad[k] ^= 0x5A;
    spit(path, bad);
    try {
      SafetensorsReader r(path);
      for (const auto& t : r.tensors()) {
        if (t.dtype == "F32") r.read_f32(t.name);
      }
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
      refused++;
    }
  }
  EXPECT_GT(refused, static_cast<int>(n) / 2);
  // The header size field: a huge value must be refused, not allocated.
  std::vector<char> bad = good;
  bad[7] = 0x7F;
  spit(path, bad);
  EXPECT_NE(error_of(path).find("100 MiB"), std::string::npos);
}

TEST_F(SafetensorsTest, BadOffsetsAndDtypesAreRefused) {
  const std::string d16(16, '\0');
  struct Case {
    const char* header;
    const char* expect;
  } cases[] = {
      {R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
       R"("b":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})",
       "overlap"},
      {R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})", "belong to no tensor"},
      {R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[8,24]}})", "ends at byte 24"},
      {R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,16]}})", "need 12"},
      {R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[16,0]}})", "begin <= end"},
      {R"({"a":{"dtype":"F32","shape":[-4],"data_offsets":[0,16]}})", "non-negative integer"},
      {R"({"a":{"dtype":"Q4","shape":[4],"data_offsets":[0,16]}})", "unknown dtype Q4"},
      {R"({"a":{"dtype":"F32","shape":[4]}})", "lacks dtype, shape or data_offsets"},
      {R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", "the tensors describe 8"},
      {R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]},)"
       R"("a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})",
       "names tensor a twice"},
      {R"({"__metadata__":{"k":1},"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})",
       "not a string"},
      {R"({"a":{"dtype":"F32","shape":[4611686018427387904,4],"data_offsets":[0,16]}})",
       "overflows"},
      {R"([1,2])", "does not start with"},
      {R"({"a":)", "not a valid JSON object"},
  };
  for (const Case& c : cases) {
    const std::string path = craft(c.header, d16);
    const std::string e = error_of(path);
    EXPECT_NE(e.find(c.expect), std::string::npos) << c.header << " -> " << e;
    EXPECT_NE(e.find(path), std::string::npos) << e;
  }
}

TEST_F(SafetensorsTest, WrongDtypeOrSizeOnReadIsAnError) {
  std::vector<int64_t> s = {7};
  std::vector<float> f(4, 1.0f);
  SafetensorsWriter w;
  w.add_i64("step", {}, s);
  w.add_f32("w", {4}, f);
  const std::string path = file("d.safetensors");
  w.write(path);
  SafetensorsReader r(path);
  EXPECT_THROW(r.read_f32("step"), Error);
  EXPECT_THROW(r.read_i64("w"), Error);
  std::vector<float> small(3);
  EXPECT_THROW(r.read_f32("w", small), Error);
  EXPECT_THROW(r.read_f32("nope"), Error);
  SafetensorsWriter dup;
  dup.add_f32("x", {4}, f);
  EXPECT_THROW(dup.add_f32("x", {4}, f), Error);
  EXPECT_THROW(dup.add_f32("y", {5}, f), Error);  // shape disagrees with data
}

}  // namespace
}  // namespace infinipipe
