#include "ckpt/checkpoint_checksum.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <vector>

#include <fmt/format.h>

#include "core/error.h"

#if defined(__SSE4_2__)
#include <nmmintrin.h>
#endif

namespace infinipipe {

namespace {

constexpr uint32_t kPoly = 0x82F63B78u;  // reflected Castagnoli polynomial

constexpr std::array<uint32_t, 256> make_table() {
  std::array<uint32_t, 256> t{};
  for (uint32_t i = 0; i < 256; i++) {
    uint32_t c = i;
    for (int k = 0; k < 8; k++) c = (c & 1) ? (c >> 1) ^ kPoly : c >> 1;
    t[i] = c;
  }
  return t;
}
constexpr std::array<uint32_t, 256> kTable = make_table();

}  // namespace

uint32_t checksum_crc32c_table(uint32_t crc, const void* data, size_t n) {
  const auto* p = static_cast<const unsigned char*>(data);
  uint32_t c = ~crc;
  for (size_t i = 0; i < n; i++) c = kTable[(c ^ p[i]) & 0xFF] ^ (c >> 8);
  return ~c;
}

uint32_t checksum_crc32c(uint32_t crc, const void* data, size_t n) {
#if defined(__SSE4_2__)
  const auto* p = static_cast<const unsigned char*>(data);
  uint64_t c = ~crc;
  while (n >= 8) {
    uint64_t word;
    std::memcpy(&word, p, 8);
    c = _mm_crc32_u64(c, word);
    p += 8;
    n -= 8;
  }
  uint32_t c32 = static_cast<uint32_t>(c);
  while (n > 0) {
    c32 = _mm_crc32_u8(c32, *p++);
    n--;
  }
  return ~c32;
#else
  return checksum_crc32c_table(crc, data, n);
#endif
}

FileChecksum checksum_file(const std::string& path) {
  // O_NOFOLLOW: a checkpoint file that became a symbolic link is not the file that was saved.
  // O_NONBLOCK and the check on the descriptor: one swapped for a FIFO or a device is refused,
  // never waited on (as core/input_file.h reads).
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0) fail("cannot open {}: {}", path, std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    fail("{} is not a regular file: a checkpoint's files are the files it saved", path);
  }
  FileChecksum out;
  std::vector<unsigned char> buf(1 << 22);
  for (;;) {
    const ssize_t got = ::read(fd, buf.data(), buf.size());
    if (got < 0) {
      if (errno == EINTR) continue;
      const int err = errno;
      ::close(fd);
      fail("cannot read {}: {}", path, std::strerror(err));
    }
    if (got == 0) break;
    out.crc32c = checksum_crc32c(out.crc32c, buf.data(), static_cast<size_t>(got));
    out.bytes += got;
  }
  ::close(fd);
  return out;
}

std::string checksum_hex(uint32_t crc) {
  return fmt::format("{:08x}", crc);
}

}  // namespace infinipipe
