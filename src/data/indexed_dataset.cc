#include "data/indexed_dataset.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstring>

#include "core/error.h"

namespace infinipipe::data {

namespace {

constexpr char kMagic[9] = {'M', 'M', 'I', 'D', 'I', 'D', 'X', '\0', '\0'};
constexpr int64_t kHeaderBytes = 9 + 8 + 1 + 8 + 8;

template <typename T>
T load(const std::byte* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));  // the arrays of an .idx need not be aligned
  return v;
}

bool is_dtype_code(uint8_t code) {
  return code >= 1 && code <= 8;
}

// Appends n tokens of type T, checking that each is an integer in int32 range.
template <typename T>
void append_tokens(const std::byte* p, int64_t n, std::vector<int32_t>& out, const char* what,
                   int64_t doc) {
  for (int64_t i = 0; i < n; ++i) {
    const T v = load<T>(p + i * static_cast<int64_t>(sizeof(T)));
    if constexpr (std::is_floating_point_v<T>) {
      if (!std::isfinite(v) || v != std::floor(v) || v < -2147483648.0 || v > 2147483647.0) {
        fail("document {} of {} holds token {} which is not an integer token id", doc, what,
             static_cast<double>(v));
      }
    } else if constexpr (sizeof(T) > 4) {
      if (v < INT32_MIN || v > INT32_MAX) {
        fail("document {} of {} holds token {} which is outside the int32 range", doc, what,
             static_cast<int64_t>(v));
      }
    }
    out.push_back(static_cast<int32_t>(v));
  }
}

}  // namespace

int64_t token_dtype_size(TokenDType dtype) {
  switch (dtype) {
    case TokenDType::uint8:
    case TokenDType::int8:
      return 1;
    case TokenDType::int16:
    case TokenDType::uint16:
      return 2;
    case TokenDType::int32:
    case TokenDType::float32:
      return 4;
    case TokenDType::int64:
    case TokenDType::float64:
      return 8;
  }
  return 0;
}

const char* token_dtype_name(TokenDType dtype) {
  switch (dtype) {
    case TokenDType::uint8:
      return "uint8";
    case TokenDType::int8:
      return "int8";
    case TokenDType::int16:
      return "int16";
    case TokenDType::int32:
      return "int32";
    case TokenDType::int64:
      return "int64";
    case TokenDType::float64:
      return "float64";
    case TokenDType::float32:
      return "float32";
    case TokenDType::uint16:
      return "uint16";
  }
  return "?";
}

TokenDType token_dtype_from_name(const std::string& name) {
  for (uint8_t code = 1; code <= 8; ++code) {
    const auto dtype = static_cast<TokenDType>(code);
    if (name == token_dtype_name(dtype)) return dtype;
  }
  fail_config(
      "unknown token dtype '{}': choose one of uint8, int8, int16, uint16, int32, int64, "
      "float32, float64",
      name);
}

MappedFile::MappedFile(const std::string& path) : path_(path) {
  // Non-blocking: a FIFO in a dataset's place is refused below instead of waited on.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) fail("cannot open {}: {}", path, std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    fail("cannot read {}: not a regular file", path);
  }
  size_ = static_cast<size_t>(st.st_size);
  if (size_ > 0) {
    void* p = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      const int err = errno;
      ::close(fd);
      fail("cannot memory-map {}: {}", path, std::strerror(err));
    }
    data_ = static_cast<const std::byte*>(p);
  }
  ::close(fd);
}

MappedFile::~MappedFile() {
  if (data_ != nullptr) ::munmap(const_cast<std::byte*>(data_), size_);
}

namespace {

constexpr const char* kRebuild =
    "rebuild it with `infinipipe data prepare` or Megatron's preprocess_data.py";

// What a version-1 index header promises, checked against the index's size.
struct IdxHeader {
  TokenDType dtype = TokenDType::uint16;
  int64_t n_seq = 0;
  int64_t n_doc = 0;
};

IdxHeader idx_header_check(std::span<const std::byte> idx, const std::string& idx_path) {
  const int64_t idx_size = static_cast<int64_t>(idx.size());
  IdxHeader h;
  if (idx_size < kHeaderBytes) {
    fail("{} is truncated: {} bytes, but the header alone takes {}; {}", idx_path, idx_size,
         kHeaderBytes, kRebuild);
  }
  if (std::memcmp(idx.data(), kMagic, sizeof(kMagic)) != 0) {
    fail(
        "{} is not a Megatron indexed dataset index (its first bytes are not \"MMIDIDX\\0\\0\"); "
        "pass the prefix of a .bin/.idx pair or {}",
        idx_path, kRebuild);
  }
  const std::byte* p = idx.data() + 9;
  const uint64_t version = load<uint64_t>(p);
  if (version != 1) {
    fail(
        "{} has index version {}, but only version 1 exists; the file is damaged or from an "
        "unknown writer",
        idx_path, version);
  }
  const uint8_t code = load<uint8_t>(p + 8);
  if (!is_dtype_code(code)) {
    fail(
        "{} has dtype code {}, expected 1..8 (uint8, int8, int16, int32, int64, float64, "
        "float32, uint16); the file is damaged",
        idx_path, code);
  }
  h.dtype = static_cast<TokenDType>(code);
  const uint64_t seq_count = load<uint64_t>(p + 9);
  const uint64_t doc_entries = load<uint64_t>(p + 17);
  if (doc_entries == 0) {
    fail(
        "{} has a document count of 0, but document_indices always holds a leading 0; the file "
        "is damaged",
        idx_path);
  }
  // Sizes promised by the header; counts above the file size cannot fit and would overflow.
  const uint64_t room = static_cast<uint64_t>(idx_size - kHeaderBytes);
  if (seq_count > room / 12 || doc_entries > room / 8 || 12 * seq_count + 8 * doc_entries > room) {
    fail(
        "{} is truncated: its header promises {} sequences and {} documents, which need more "
        "than its {} bytes; {}",
        idx_path, seq_count, doc_entries - 1, idx_size, kRebuild);
  }
  const int64_t n_seq = static_cast<int64_t>(seq_count);
  const int64_t n_doc = static_cast<int64_t>(doc_entries) - 1;
  const int64_t needed = kHeaderBytes + 12 * n_seq + 8 * (n_doc + 1);
  if (idx_size != needed && idx_size != needed + n_seq) {
    fail(
        "{} has {} bytes after its document indices that no version-1 index holds (expected "
        "{} or {} bytes in all, found {}); the file is damaged",
        idx_path, idx_size - needed, needed, needed + n_seq, idx_size);
  }
  h.n_seq = n_seq;
  h.n_doc = n_doc;
  return h;
}

// document_indices: 0 first, non-decreasing, the number of sequences last.
void doc_index_check(const std::byte* doc_index, int64_t n_doc, int64_t n_seq,
                     const std::string& idx_path) {
  int64_t prev = load<int64_t>(doc_index);
  if (prev != 0) {
    fail("{}: document_indices[0] is {}, but must be 0; the file is damaged", idx_path, prev);
  }
  for (int64_t d = 1; d <= n_doc; ++d) {
    const int64_t cur = load<int64_t>(doc_index + 8 * d);
    if (cur < prev || cur > n_seq) {
      fail(
          "{}: document_indices[{}] is {}, but must lie in [{}, {}] (non-decreasing, at most "
          "the number of sequences); the file is damaged",
          idx_path, d, cur, prev, n_seq);
    }
    prev = cur;
  }
  if (prev != n_seq) {
    fail(
        "{}: the last document index is {}, but the index holds {} sequences; the file is "
        "damaged",
        idx_path, prev, n_seq);
  }
}

// Every sequence's length and pointer lie inside the .bin (bin_size bytes); returns the tokens
// of all sequences.
int64_t sequences_check(const std::byte* lengths, const std::byte* pointers, int64_t n_seq,
                        TokenDType dtype, int64_t bin_size, const std::string& idx_path,
                        const std::string& bin_path) {
  int64_t num_tokens = 0;
  const int64_t item = token_dtype_size(dtype);
  for (int64_t s = 0; s < n_seq; ++s) {
    const int64_t len = load<int32_t>(lengths + 4 * s);
    const int64_t ptr = load<int64_t>(pointers + 8 * s);
    if (len < 0)
      fail("{}: sequence {} has negative length {}; the file is damaged", idx_path, s, len);
    if (ptr < 0 || ptr > bin_size || len > (bin_size - ptr) / item) {
      fail(
          "{}: sequence {} ({} tokens of {} at byte {}) lies outside {} ({} bytes); the .bin is "
          "truncated or does not belong to this .idx",
          idx_path, s, len, token_dtype_name(dtype), ptr, bin_path, bin_size);
    }
    num_tokens += len;
  }
  return num_tokens;
}

}  // namespace

IndexedDataset IndexedDataset::open(const std::string& prefix) {
  IndexedDataset ds;
  ds.prefix_ = prefix;
  const std::string idx_path = prefix + ".idx";
  const std::string bin_path = prefix + ".bin";
  for (const std::string& path : {idx_path, bin_path}) {
    if (::access(path.c_str(), F_OK) != 0) {
      fail("cannot open {}: {} (a dataset is given by its prefix: PREFIX.bin and PREFIX.idx)", path,
           std::strerror(errno));
    }
  }
  ds.idx_ = std::make_shared<MappedFile>(idx_path);
  ds.bin_ = std::make_shared<MappedFile>(bin_path);
  const auto idx = ds.idx_->bytes();
  const int64_t bin_size = static_cast<int64_t>(ds.bin_->bytes().size());
  const IdxHeader h = idx_header_check(idx, idx_path);
  ds.dtype_ = h.dtype;
  ds.num_sequences_ = h.n_seq;
  ds.num_documents_ = h.n_doc;
  ds.lengths_ = idx.data() + kHeaderBytes;
  ds.pointers_ = ds.lengths_ + 4 * h.n_seq;
  ds.doc_index_ = ds.pointers_ + 8 * h.n_seq;
  doc_index_check(ds.doc_index_, h.n_doc, h.n_seq, idx_path);
  ds.num_tokens_ =
      sequences_check(ds.lengths_, ds.pointers_, h.n_seq, ds.dtype_, bin_size, idx_path, bin_path);
  return ds;
}

void IndexedDataset::check_document(int64_t doc) const {
  if (doc < 0 || doc >= num_documents_) {
    fail("document {} is out of range: {} has {} documents", doc, prefix_, num_documents_);
  }
}

int64_t IndexedDataset::sequence_length(int64_t seq) const {
  if (seq < 0 || seq >= num_sequences_) {
    fail("sequence {} is out of range: {} has {} sequences", seq, prefix_, num_sequences_);
  }
  return load<int32_t>(lengths_ + 4 * seq);
}

int64_t IndexedDataset::document_length(int64_t doc) const {
  check_document(doc);
  const int64_t first = load<int64_t>(doc_index_ + 8 * doc);
  const int64_t last = load<int64_t>(doc_index_ + 8 * (doc + 1));
  int64_t total = 0;
  for (int64_t s = first; s < last; ++s) total += load<int32_t>(lengths_ + 4 * s);
  return total;
}

std::vector<int32_t> IndexedDataset::document_tokens(int64_t doc, int64_t max_len,
                                                     int64_t start) const {
  check_document(doc);
  if (max_len < 0) fail("document_tokens: max_len {} must not be negative", max_len);
  if (start < 0) fail("document_tokens: start {} must not be negative", start);
  const int64_t first = load<int64_t>(doc_index_ + 8 * doc);
  const int64_t last = load<int64_t>(doc_index_ + 8 * (doc + 1));
  std::vector<int32_t> out;
  const int64_t length = document_length(doc);
  out.reserve(static_cast<size_t>(std::min(max_len, std::max<int64_t>(length - start, 0))));
  const std::byte* bin = bin_->bytes().data();
  const std::string what = prefix_ + ".bin";
  const int64_t item = token_dtype_size(dtype_);
  int64_t skip = start;  // tokens before `start` still to pass
  for (int64_t s = first; s < last; ++s) {
    const int64_t room = max_len - static_cast<int64_t>(out.size());
    if (room <= 0) break;
    const int64_t len = load<int32_t>(lengths_ + 4 * s);
    if (skip >= len) {
      skip -= len;
      continue;
    }
    const int64_t n = std::min<int64_t>(len - skip, room);
    const std::byte* src = bin + load<int64_t>(pointers_ + 8 * s) + skip * item;
    skip = 0;
    switch (dtype_) {
      case TokenDType::uint8:
        append_tokens<uint8_t>(src, n, out, what.c_str(), doc);
        break;
      case TokenDType::int8:
        append_tokens<int8_t>(src, n, out, what.c_str(), doc);
        break;
      case TokenDType::int16:
        append_tokens<int16_t>(src, n, out, what.c_str(), doc);
        break;
      case TokenDType::uint16:
        append_tokens<uint16_t>(src, n, out, what.c_str(), doc);
        break;
      case TokenDType::int32:
        append_tokens<int32_t>(src, n, out, what.c_str(), doc);
        break;
      case TokenDType::int64:
        append_tokens<int64_t>(src, n, out, what.c_str(), doc);
        break;
      case TokenDType::float32:
        append_tokens<float>(src, n, out, what.c_str(), doc);
        break;
      case TokenDType::float64:
        append_tokens<double>(src, n, out, what.c_str(), doc);
        break;
    }
  }
  return out;
}

}  // namespace infinipipe::data
