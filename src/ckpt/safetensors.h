// Reader and writer of Hugging Face's safetensors format:
//   8 bytes   little-endian u64 N, the header size
//   N bytes   JSON header {"name": {"dtype": "F32", "shape": [..], "data_offsets": [b, e]}, ...,
//             "__metadata__": {"key": "value"}}, padded with spaces to a multiple of 8
//   rest      the data buffer; offsets are relative to its start, tensors cover it exactly
// The reader treats the file as hostile: every size and offset is checked before use, and a
// damaged file gives an Error naming the file and the problem, never a read out of bounds.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

namespace infinipipe {

// One tensor as described by the header.
struct SafetensorsInfo {
  std::string name;
  std::string dtype;  // as in the header: "F32", "I64", "BF16", ...
  std::vector<int64_t> shape;
  int64_t begin = 0;  // byte range [begin, end) inside the data buffer
  int64_t end = 0;
  int64_t numel() const;
};

struct SafetensorsWritten {
  int64_t bytes = 0;    // size of the file
  uint32_t crc32c = 0;  // CRC-32C of the whole file (see checkpoint_checksum.h)
};

// Collects borrowed tensors (the data must outlive write()) and writes one file.
class SafetensorsWriter {
 public:
  void add_f32(const std::string& name, std::vector<int64_t> shape, std::span<const float> data);
  void add_i64(const std::string& name, std::vector<int64_t> shape, std::span<const int64_t> data);
  // Raw bf16 bits (see float_convert.h), for Hugging Face exports.
  void add_bf16(const std::string& name, std::vector<int64_t> shape,
                std::span<const uint16_t> data);
  void set_metadata(const std::string& key, const std::string& value);
  size_t size() const { return entries_.size(); }

  // Writes `path` atomically (temporary file, fsync, rename) and returns its size and checksum.
  SafetensorsWritten write(const std::string& path) const;

 private:
  struct Entry {
    std::string name, dtype;
    std::vector<int64_t> shape;
    const void* data;
    int64_t bytes;
    int64_t elem_size;
  };
  void add(const std::string& name, const char* dtype, int64_t elem_size,
           std::vector<int64_t> shape, const void* data, int64_t numel);
  std::vector<Entry> entries_;
  std::map<std::string, std::string> metadata_;
};

// Opens a file and validates its header; tensor data is read on request (pread, not mmap, so a
// file truncated underneath us is an Error, not a SIGBUS).
class SafetensorsReader {
 public:
  explicit SafetensorsReader(const std::string& path);
  ~SafetensorsReader();
  SafetensorsReader(const SafetensorsReader&) = delete;
  SafetensorsReader& operator=(const SafetensorsReader&) = delete;

  const std::string& path() const { return path_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  const std::vector<SafetensorsInfo>& tensors() const { return tensors_; }  // sorted by name
  const SafetensorsInfo* find(const std::string& name) const;               // null if absent
  const SafetensorsInfo& info(const std::string& name) const;               // Error if absent

  // Reads an F32 tensor into `out` (sizes must match). Error for another dtype.
  void read_f32(const std::string& name, std::span<float> out) const;
  std::vector<float> read_f32(const std::string& name) const;
  // Reads an F32, BF16 or F16 tensor converted to fp32 (Hugging Face checkpoints store any of
  // them). Error for another dtype or a size mismatch.
  void read_as_f32(const std::string& name, std::span<float> out) const;
  // The tensor's bytes as stored (little-endian), whatever its dtype.
  std::vector<uint8_t> read_raw(const std::string& name) const;
  std::vector<int64_t> read_i64(const std::string& name) const;

 private:
  void parse();
  void read_bytes(const SafetensorsInfo& t, void* out) const;
  std::string path_;
  int fd_ = -1;
  int64_t data_start_ = 0;  // file offset of the data buffer
  std::vector<SafetensorsInfo> tensors_;
  std::map<std::string, std::string> metadata_;
};

}  // namespace infinipipe
