// CRC-32C (Castagnoli) checksums of checkpoint files. CRC-32C is what iSCSI, ext4 and RocksDB use
// for data integrity; x86 computes it in hardware (SSE4.2), so verifying a checkpoint costs
// little more than reading it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace infinipipe {

// Extends `crc` (start with 0) over `n` bytes; crc32c(crc32c(0, a), b) == crc32c(0, a ++ b).
uint32_t checksum_crc32c(uint32_t crc, const void* data, size_t n);
// The same function computed with a lookup table (portable path; exposed for tests).
uint32_t checksum_crc32c_table(uint32_t crc, const void* data, size_t n);
// CRC-32C and size of a whole file; Error naming the file when it cannot be read.
struct FileChecksum {
  uint32_t crc32c = 0;
  int64_t bytes = 0;
};
FileChecksum checksum_file(const std::string& path);
// "1a2b3c4d": how checksums are written in JSON.
std::string checksum_hex(uint32_t crc);

}  // namespace infinipipe
