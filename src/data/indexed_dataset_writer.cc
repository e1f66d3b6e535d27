#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "core/error.h"
#include "data/indexed_dataset.h"

namespace infinipipe::data {

namespace {

constexpr size_t kFlushBytes = size_t{1} << 20;

template <typename T>
void put(std::vector<std::byte>& out, T v) {
  const size_t at = out.size();
  out.resize(at + sizeof(T));
  std::memcpy(out.data() + at, &v, sizeof(T));
}

void write_all(int fd, const std::byte* p, size_t n, const std::string& path) {
  while (n > 0) {
    const ssize_t k = ::write(fd, p, n);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) fail("cannot write {}: {}", path, std::strerror(errno));
    p += k;
    n -= static_cast<size_t>(k);
  }
}

int open_for_write(const std::string& path) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0)
    fail("cannot create {}: {} (does the output folder exist?)", path, std::strerror(errno));
  return fd;
}

void sync_close(int fd, const std::string& path) {
  if (::fsync(fd) != 0 || ::close(fd) != 0) fail("cannot sync {}: {}", path, std::strerror(errno));
}

// The token range each dtype holds exactly (float32 has a 24-bit mantissa).
void token_range(TokenDType dtype, int64_t& lo, int64_t& hi) {
  switch (dtype) {
    case TokenDType::uint8:
      lo = 0, hi = 255;
      return;
    case TokenDType::int8:
      lo = -128, hi = 127;
      return;
    case TokenDType::int16:
      lo = -32768, hi = 32767;
      return;
    case TokenDType::uint16:
      lo = 0, hi = 65535;
      return;
    case TokenDType::float32:
      lo = -(int64_t{1} << 24), hi = int64_t{1} << 24;
      return;
    case TokenDType::int32:
    case TokenDType::int64:
    case TokenDType::float64:
      lo = INT32_MIN, hi = INT32_MAX;
      return;
  }
}

}  // namespace

IndexedDatasetWriter::IndexedDatasetWriter(const std::string& prefix, TokenDType dtype)
    : prefix_(prefix), dtype_(dtype) {
  if (token_dtype_size(dtype) == 0) fail("unknown token dtype code {}", static_cast<int>(dtype));
  bin_fd_ = open_for_write(prefix_ + ".bin.tmp");
  buffer_.reserve(kFlushBytes + 4096);
}

IndexedDatasetWriter::~IndexedDatasetWriter() {
  if (finalized_) return;
  if (bin_fd_ >= 0) ::close(bin_fd_);
  std::remove((prefix_ + ".bin.tmp").c_str());
  std::remove((prefix_ + ".idx.tmp").c_str());
}

void IndexedDatasetWriter::add_document(std::span<const int32_t> tokens) {
  if (finalized_) fail("{}: add_document after finalize", prefix_);
  if (tokens.size() > static_cast<size_t>(INT32_MAX)) {
    fail("a document of {} tokens does not fit a Megatron index (int32 lengths); split it",
         tokens.size());
  }
  int64_t lo = 0, hi = 0;
  token_range(dtype_, lo, hi);
  for (const int32_t t : tokens) {
    if (t < lo || t > hi) {
      fail("token {} of document {} does not fit dtype {} (range [{}, {}]); choose a wider dtype",
           t, lengths_.size(), token_dtype_name(dtype_), lo, hi);
    }
    switch (dtype_) {
      case TokenDType::uint8:
        put(buffer_, static_cast<uint8_t>(t));
        break;
      case TokenDType::int8:
        put(buffer_, static_cast<int8_t>(t));
        break;
      case TokenDType::int16:
        put(buffer_, static_cast<int16_t>(t));
        break;
      case TokenDType::uint16:
        put(buffer_, static_cast<uint16_t>(t));
        break;
      case TokenDType::int32:
        put(buffer_, t);
        break;
      case TokenDType::int64:
        put(buffer_, static_cast<int64_t>(t));
        break;
      case TokenDType::float32:
        put(buffer_, static_cast<float>(t));
        break;
      case TokenDType::float64:
        put(buffer_, static_cast<double>(t));
        break;
    }
    if (buffer_.size() >= kFlushBytes) {
      write_all(bin_fd_, buffer_.data(), buffer_.size(), prefix_ + ".bin.tmp");
      buffer_.clear();
    }
  }
  lengths_.push_back(static_cast<int32_t>(tokens.size()));
  num_tokens_ += static_cast<int64_t>(tokens.size());
}

void IndexedDatasetWriter::finalize() {
  if (finalized_) return;
  const std::string bin_tmp = prefix_ + ".bin.tmp";
  const std::string idx_tmp = prefix_ + ".idx.tmp";
  write_all(bin_fd_, buffer_.data(), buffer_.size(), bin_tmp);
  buffer_.clear();
  sync_close(bin_fd_, bin_tmp);
  bin_fd_ = -1;

  const uint64_t n = lengths_.size();
  std::vector<std::byte> idx;
  idx.reserve(34 + 20 * n + 8);
  for (const char c : {'M', 'M', 'I', 'D', 'I', 'D', 'X', '\0', '\0'}) put(idx, c);
  put(idx, uint64_t{1});
  put(idx, static_cast<uint8_t>(dtype_));
  put(idx, n);      // sequences
  put(idx, n + 1);  // entries of document_indices
  for (const int32_t len : lengths_) put(idx, len);
  int64_t ptr = 0;
  for (const int32_t len : lengths_) {
    put(idx, ptr);
    ptr += int64_t{len} * token_dtype_size(dtype_);
  }
  for (uint64_t d = 0; d <= n; ++d) put(idx, static_cast<int64_t>(d));
  const int fd = open_for_write(idx_tmp);
  write_all(fd, idx.data(), idx.size(), idx_tmp);
  sync_close(fd, idx_tmp);

  for (const char* ext : {".bin", ".idx"}) {
    const std::string to = prefix_ + ext;
    if (std::rename((to + ".tmp").c_str(), to.c_str()) != 0) {
      fail("cannot rename {}.tmp to {}: {}", to, to, std::strerror(errno));
    }
  }
  // Make the renames durable too.
  const std::filesystem::path parent = std::filesystem::path(prefix_).parent_path();
  const std::string dir = parent.empty() ? std::string(".") : parent.string();
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
  finalized_ = true;
}

}  // namespace infinipipe::data
