// Megatron-LM indexed datasets: PREFIX.idx (index) + PREFIX.bin (tokens), memory-mapped.
//
// PREFIX.idx, little-endian:
//   "MMIDIDX\0\0" (9 bytes) | version u64 = 1 | dtype code u8 | sequence_count u64 |
//   document_count u64 (entries of document_indices = documents + 1) |
//   sequence_lengths int32[sequence_count] | sequence_pointers int64[sequence_count] (bytes
//   into .bin) | document_indices int64[document_count] (0, ..., sequence_count) |
//   optional sequence_modes int8[sequence_count] (multimodal datasets; ignored).
// A document (one training sample) is the concatenation of the sequences
// [document_indices[d], document_indices[d+1]).
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace infinipipe::data {

// Megatron's dtype codes.
enum class TokenDType : uint8_t {
  uint8 = 1,
  int8 = 2,
  int16 = 3,
  int32 = 4,
  int64 = 5,
  float64 = 6,
  float32 = 7,
  uint16 = 8,
};
int64_t token_dtype_size(TokenDType dtype);
const char* token_dtype_name(TokenDType dtype);
TokenDType token_dtype_from_name(const std::string& name);  // throws ConfigError listing choices

// A read-only memory mapping of a whole file (empty files map to an empty span).
class MappedFile {
 public:
  explicit MappedFile(const std::string& path);  // throws Error naming the file
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  std::span<const std::byte> bytes() const { return {data_, size_}; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  const std::byte* data_ = nullptr;
  size_t size_ = 0;
};

class IndexedDataset {
 public:
  // Maps PREFIX.idx and PREFIX.bin and checks every header field, array size, document index
  // and sequence pointer; anything inconsistent throws Error naming the file and the fault.
  static IndexedDataset open(const std::string& prefix);

  const std::string& prefix() const { return prefix_; }
  TokenDType dtype() const { return dtype_; }
  int64_t num_sequences() const { return num_sequences_; }
  int64_t num_documents() const { return num_documents_; }
  int64_t num_tokens() const { return num_tokens_; }

  // Tokens of a document (its sequences concatenated) from token `start` on, at most max_len
  // of them. Throws Error for a document id out of range or a token that is not an integer in
  // int32 range.
  std::vector<int32_t> document_tokens(int64_t doc,
                                       int64_t max_len = std::numeric_limits<int64_t>::max(),
                                       int64_t start = 0) const;
  int64_t document_length(int64_t doc) const;  // untruncated
  int64_t sequence_length(int64_t seq) const;

 private:
  IndexedDataset() = default;
  void check_document(int64_t doc) const;

  std::string prefix_;
  std::shared_ptr<MappedFile> idx_;
  std::shared_ptr<MappedFile> bin_;
  TokenDType dtype_ = TokenDType::uint16;
  int64_t num_sequences_ = 0;
  int64_t num_documents_ = 0;
  int64_t num_tokens_ = 0;
  // Views into the .idx mapping (possibly unaligned, so read with memcpy).
  const std::byte* lengths_ = nullptr;    // int32[num_sequences_]
  const std::byte* pointers_ = nullptr;   // int64[num_sequences_]
  const std::byte* doc_index_ = nullptr;  // int64[num_documents_ + 1]
};

// Writes a dataset Megatron-LM reads, one sequence per document. Files are written as
// PREFIX.bin.tmp / PREFIX.idx.tmp, synced, and renamed by finalize() (.bin first, then .idx),
// so a reader never sees a half-written dataset. Without finalize() the temp files are removed.
class IndexedDatasetWriter {
 public:
  IndexedDatasetWriter(const std::string& prefix, TokenDType dtype);  // throws Error
  ~IndexedDatasetWriter();
  IndexedDatasetWriter(const IndexedDatasetWriter&) = delete;
  IndexedDatasetWriter& operator=(const IndexedDatasetWriter&) = delete;

  // Throws Error if a token does not fit the dtype (e.g. 300 in uint8).
  void add_document(std::span<const int32_t> tokens);
  void finalize();

  int64_t num_documents() const { return static_cast<int64_t>(lengths_.size()); }
  int64_t num_tokens() const { return num_tokens_; }

 private:
  std::string prefix_;
  TokenDType dtype_;
  int bin_fd_ = -1;  // PREFIX.bin.tmp
  std::vector<int32_t> lengths_;
  std::vector<std::byte> buffer_;
  int64_t num_tokens_ = 0;
  bool finalized_ = false;
};

}  // namespace infinipipe::data
