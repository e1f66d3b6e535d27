#include "obs/tensorboard.h"

#include <unistd.h>

#include <array>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>

#include <fmt/format.h>

#include "core/error.h"

namespace infinipipe::obs {

namespace {

// The reflected CRC-32C table (polynomial 0x82F63B78).
std::array<uint32_t, 256> crc32c_table_make() {
  std::array<uint32_t, 256> table{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
    table[i] = c;
  }
  return table;
}

// Protobuf wire format: varints, tags (field << 3 | wire type), fixed 64/32-bit little endian.
void varint_put(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7F) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}

void tag_put(std::string& out, uint32_t field, uint32_t wire_type) {
  varint_put(out, (uint64_t{field} << 3) | wire_type);
}

void fixed_put(std::string& out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
}

void bytes_field_put(std::string& out, uint32_t field, std::string_view bytes) {
  tag_put(out, field, 2);
  varint_put(out, bytes.size());
  out.append(bytes);
}

double wall_seconds_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace

uint32_t crc32c(std::string_view bytes) {
  static const std::array<uint32_t, 256> table = crc32c_table_make();
  uint32_t c = 0xFFFFFFFFu;
  for (unsigned char b : bytes) c = table[(c ^ b) & 0xFF] ^ (c >> 8);
  return c ^ 0xFFFFFFFFu;
}

uint32_t crc32c_masked(std::string_view bytes) {
  const uint32_t c = crc32c(bytes);
  return ((c >> 15) | (c << 17)) + 0xA282EAD8u;
}

std::string tfrecord_frame(std::string_view data) {
  std::string length;
  fixed_put(length, data.size(), 8);
  std::string out = length;
  fixed_put(out, crc32c_masked(length), 4);
  out.append(data);
  fixed_put(out, crc32c_masked(data), 4);
  return out;
}

std::string tf_event_encode(double wall_time, int64_t step, const std::string& file_version,
                            const std::vector<std::pair<std::string, float>>& scalars) {
  std::string event;
  uint64_t wall_bits = 0;
  std::memcpy(&wall_bits, &wall_time, sizeof wall_bits);
  tag_put(event, 1, 1);  // double wall_time = 1
  fixed_put(event, wall_bits, 8);
  tag_put(event, 2, 0);  // int64 step = 2
  varint_put(event, static_cast<uint64_t>(step));
  if (!file_version.empty()) bytes_field_put(event, 3, file_version);  // string file_version = 3
  if (scalars.empty()) return event;
  std::string summary;
  for (const auto& [tag, value] : scalars) {
    std::string v;
    bytes_field_put(v, 1, tag);  // Summary.Value: string tag = 1
    uint32_t value_bits = 0;
    std::memcpy(&value_bits, &value, sizeof value_bits);
    tag_put(v, 2, 5);  // float simple_value = 2
    fixed_put(v, value_bits, 4);
    bytes_field_put(summary, 1, v);  // Summary: repeated Value value = 1
  }
  bytes_field_put(event, 5, summary);  // Summary summary = 5
  return event;
}

std::vector<std::pair<std::string, float>> tensorboard_scalars(const IterationMetrics& m) {
  std::vector<std::pair<std::string, float>> out = {
      {"lm loss", static_cast<float>(m.loss)},
      {"learning-rate", static_cast<float>(m.lr)},
      {"grad-norm", static_cast<float>(m.grad_norm)},
      {"iteration-time", static_cast<float>(m.seconds)},
      {"throughput", static_cast<float>(m.tokens_per_s)}};
  if (m.valid_loss) out.emplace_back("lm loss validation", static_cast<float>(*m.valid_loss));
  return out;
}

TensorBoardWriter::TensorBoardWriter(const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) {
    fail_config("cannot create the TensorBoard directory {} ({}); choose another --tensorboard-dir",
                dir, ec.message());
  }
  std::array<char, 256> host{};
  if (gethostname(host.data(), host.size() - 1) != 0) std::strcpy(host.data(), "localhost");
  const double now = wall_seconds_now();
  path_ = (fs::path(dir) /
           fmt::format("events.out.tfevents.{}.{}", static_cast<int64_t>(now), host.data()))
              .string();
  file_ = std::fopen(path_.c_str(), "ab");
  if (file_ == nullptr) {
    fail_config(
        "cannot create the TensorBoard event file {} ({}); choose another "
        "--tensorboard-dir",
        path_, std::strerror(errno));
  }
  record_write(tf_event_encode(now, 0, "brain.Event:2", {}));
}

TensorBoardWriter::~TensorBoardWriter() {
  if (file_ != nullptr) std::fclose(file_);
}

void TensorBoardWriter::scalars_add(int64_t step,
                                    const std::vector<std::pair<std::string, float>>& scalars) {
  record_write(tf_event_encode(wall_seconds_now(), step, "", scalars));
}

void TensorBoardWriter::record_write(const std::string& event) {
  const std::string frame = tfrecord_frame(event);
  if (std::fwrite(frame.data(), 1, frame.size(), file_) != frame.size() ||
      std::fflush(file_) != 0) {
    fail("cannot write the TensorBoard event file {} ({})", path_, std::strerror(errno));
  }
}

}  // namespace infinipipe::obs
