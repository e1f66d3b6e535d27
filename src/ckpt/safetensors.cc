#include "ckpt/safetensors.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <set>
#include <utility>

#include <nlohmann/json.hpp>

#include "ckpt/checkpoint_checksum.h"
#include "ckpt/checkpoint_fs.h"
#include "core/error.h"
#include "core/json_read.h"

namespace infinipipe {

static_assert(std::endian::native == std::endian::little,
              "safetensors data is little-endian; a big-endian host would need byte swaps");

namespace {

// The reference implementation's limit; real headers are at most a few MB.
constexpr uint64_t kMaxHeader = 100ull << 20;

int64_t dtype_size(const std::string& dtype) {
  static const std::map<std::string, int64_t> sizes = {
      {"BOOL", 1}, {"U8", 1},  {"I8", 1},  {"F8_E5M2", 1}, {"F8_E4M3", 1},
      {"I16", 2},  {"U16", 2}, {"F16", 2}, {"BF16", 2},    {"I32", 4},
      {"U32", 4},  {"F32", 4}, {"F64", 8}, {"I64", 8},     {"U64", 8}};
  auto it = sizes.find(dtype);
  return it == sizes.end() ? 0 : it->second;
}

// Product of dims, or -1 when a dim is negative or the product overflows.
int64_t checked_numel(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0 || __builtin_mul_overflow(n, d, &n)) return -1;
  }
  return n;
}

}  // namespace

int64_t SafetensorsInfo::numel() const {
  return checked_numel(shape);
}

// ---------------------------------------------------------------------------------------------
// Writer

void SafetensorsWriter::add(const std::string& name, const char* dtype, int64_t elem_size,
                            std::vector<int64_t> shape, const void* data, int64_t numel) {
  if (name.empty() || name == "__metadata__") fail("safetensors: invalid tensor name '{}'", name);
  for (const Entry& e : entries_) {
    if (e.name == name) fail("safetensors: tensor {} added twice", name);
  }
  const int64_t want = checked_numel(shape);
  if (want != numel) {
    fail("safetensors: tensor {} has {} elements but its shape holds {}", name, numel, want);
  }
  entries_.push_back({name, dtype, std::move(shape), data, numel * elem_size, elem_size});
}

void SafetensorsWriter::add_f32(const std::string& name, std::vector<int64_t> shape,
                                std::span<const float> data) {
  add(name, "F32", 4, std::move(shape), data.data(), static_cast<int64_t>(data.size()));
}

void SafetensorsWriter::add_bf16(const std::string& name, std::vector<int64_t> shape,
                                 std::span<const uint16_t> data) {
  add(name, "BF16", 2, std::move(shape), data.data(), static_cast<int64_t>(data.size()));
}

void SafetensorsWriter::add_i64(const std::string& name, std::vector<int64_t> shape,
                                std::span<const int64_t> data) {
  add(name, "I64", 8, std::move(shape), data.data(), static_cast<int64_t>(data.size()));
}

void SafetensorsWriter::set_metadata(const std::string& key, const std::string& value) {
  metadata_[key] = value;
}

SafetensorsWritten SafetensorsWriter::write(const std::string& path) const {
  // Largest alignment first, then by name (as the reference writer), so every tensor starts
  // aligned to its element size and the file does not depend on the order of add() calls.
  std::vector<const Entry*> order;
  for (const Entry& e : entries_) order.push_back(&e);
  std::sort(order.begin(), order.end(), [](const Entry* a, const Entry* b) {
    return a->elem_size != b->elem_size ? a->elem_size > b->elem_size : a->name < b->name;
  });

  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata_.empty()) {
    nlohmann::ordered_json meta = nlohmann::ordered_json::object();
    for (const auto& [k, v] : metadata_) meta[k] = v;
    header["__metadata__"] = std::move(meta);
  }
  int64_t offset = 0;
  for (const Entry* e : order) {
    header[e->name] = {
        {"dtype", e->dtype}, {"shape", e->shape}, {"data_offsets", {offset, offset + e->bytes}}};
    offset += e->bytes;
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  const uint64_t n = text.size();
  unsigned char size_le[8];
  for (int i = 0; i < 8; i++) size_le[i] = static_cast<unsigned char>(n >> (8 * i));

  FsAtomicFile file(path);
  uint32_t crc = 0;
  auto put = [&](const void* p, size_t len) {
    crc = checksum_crc32c(crc, p, len);
    file.write(p, len);
  };
  put(size_le, 8);
  put(text.data(), text.size());
  constexpr int64_t kBlock = 1 << 24;  // checksum and write in blocks that stay in cache
  for (const Entry* e : order) {
    const auto* p = static_cast<const char*>(e->data);
    for (int64_t done = 0; done < e->bytes; done += kBlock) {
      put(p + done, static_cast<size_t>(std::min(kBlock, e->bytes - done)));
    }
  }
  SafetensorsWritten out{file.bytes_written(), crc};
  file.commit();
  return out;
}

// ---------------------------------------------------------------------------------------------
// Reader

namespace {

using Json = nlohmann::json;

std::vector<int64_t> parse_ints(const std::string& path, const std::string& name, const char* field,
                                const Json& v) {
  if (!v.is_array()) fail("{}: tensor {} has a '{}' that is not a list", path, name, field);
  std::vector<int64_t> out;
  for (const Json& x : v) {
    if (!x.is_number_unsigned() || x.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) {
      fail("{}: tensor {} has a '{}' entry that is not a non-negative integer: {}", path, name,
           field, json_brief(x));
    }
    out.push_back(static_cast<int64_t>(x.get<uint64_t>()));
  }
  return out;
}

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size() && i < 8; ++i)
    out += fmt::format("{}{}", i ? ", " : "", shape[i]);
  return out + (shape.size() > 8 ? ", ...]" : "]");
}

constexpr const char* kNotSafetensors = "the file is truncated or is not a safetensors file";

// The JSON header of the open file fd (file_size bytes): its 8-byte little-endian length, then
// the text, which must fit in the file and start with '{'.
std::string header_text_read(int fd, const std::string& path, uint64_t file_size) {
  const char* hint = kNotSafetensors;
  if (file_size < 8)
    fail("{}: only {} bytes, too short for a safetensors header; {}", path, file_size, hint);
  unsigned char size_le[8];
  if (::pread(fd, size_le, 8, 0) != 8) fail("cannot read {}: {}", path, std::strerror(errno));
  uint64_t n = 0;
  for (int i = 0; i < 8; i++) n |= static_cast<uint64_t>(size_le[i]) << (8 * i);
  if (n > kMaxHeader)
    fail("{}: header size {} is larger than the 100 MiB limit; {}", path, n, hint);
  if (n > file_size - 8) {
    fail("{}: header size {} goes beyond the end of the file ({} bytes); {}", path, n, file_size,
         hint);
  }
  std::string text(n, '\0');
  if (n > 0 && ::pread(fd, text.data(), n, 8) != static_cast<ssize_t>(n)) {
    fail("cannot read the header of {}: {}", path, std::strerror(errno));
  }
  if (n == 0 || text[0] != '{') fail("{}: the header does not start with '{{'; {}", path, hint);
  return text;
}

// The header as a JSON object whose names are unique.
Json header_json_parse(const std::string& path, const std::string& text) {
  // The spec forbids duplicate names; nlohmann would silently keep the last one.
  std::set<std::string> seen;
  std::string duplicate;
  Json::parser_callback_t on_event = [&](int depth, Json::parse_event_t event, Json& parsed) {
    if (event == Json::parse_event_t::key && depth == 1) {
      const std::string key = parsed.get<std::string>();
      if (!seen.insert(key).second && duplicate.empty()) duplicate = key;
    }
    return true;
  };
  json_check_depth(text, path + ": the header");
  Json header = Json::parse(text, on_event, /*allow_exceptions=*/false);
  if (header.is_discarded() || !header.is_object()) {
    fail("{}: the header is not a valid JSON object; {}", path, kNotSafetensors);
  }
  if (!duplicate.empty()) fail("{}: the header names tensor {} twice", path, duplicate);
  return header;
}

void metadata_parse(const std::string& path, const Json& v,
                    std::map<std::string, std::string>& out) {
  if (!v.is_object()) fail("{}: __metadata__ is not an object of strings", path);
  for (auto m = v.begin(); m != v.end(); ++m) {
    if (!m.value().is_string()) {
      fail("{}: __metadata__ entry {} is not a string (the format allows only strings)", path,
           m.key());
    }
    out[m.key()] = m.value().get<std::string>();
  }
}

// One tensor's entry: a known dtype, a shape whose bytes are its data_offsets' span, inside the
// data buffer of data_size bytes.
SafetensorsInfo tensor_entry_parse(const std::string& path, const std::string& name, const Json& v,
                                   int64_t data_size) {
  if (!v.is_object() || !v.contains("dtype") || !v.contains("shape") ||
      !v.contains("data_offsets") || !v["dtype"].is_string()) {
    fail("{}: tensor {} lacks dtype, shape or data_offsets", path, name);
  }
  SafetensorsInfo t;
  t.name = name;
  t.dtype = v["dtype"].get<std::string>();
  t.shape = parse_ints(path, name, "shape", v["shape"]);
  const std::vector<int64_t> off = parse_ints(path, name, "data_offsets", v["data_offsets"]);
  if (off.size() != 2 || off[0] > off[1]) {
    fail("{}: tensor {} has data_offsets {} (need [begin, end] with begin <= end)", path, name,
         json_brief(v["data_offsets"]));
  }
  t.begin = off[0];
  t.end = off[1];
  const int64_t esize = dtype_size(t.dtype);
  if (esize == 0) fail("{}: tensor {} has unknown dtype {}", path, name, t.dtype);
  const int64_t numel = t.numel();
  int64_t bytes = 0;
  if (numel < 0 || __builtin_mul_overflow(numel, esize, &bytes)) {
    fail("{}: tensor {} has shape {}, whose size overflows", path, name, shape_text(t.shape));
  }
  if (bytes != t.end - t.begin) {
    fail("{}: tensor {} has {} bytes of data, but dtype {} and shape {} need {}", path, name,
         t.end - t.begin, t.dtype, shape_text(t.shape), bytes);
  }
  if (t.end > data_size) {
    fail("{}: tensor {} ends at byte {} of a {}-byte data buffer; {}", path, name, t.end, data_size,
         kNotSafetensors);
  }
  return t;
}

// The tensors must tile the buffer exactly: no overlap (aliasing) and no holes (polyglots).
void tensors_tiling_check(const std::string& path, const std::vector<SafetensorsInfo>& tensors,
                          int64_t data_size) {
  std::vector<const SafetensorsInfo*> by_offset;
  for (const SafetensorsInfo& t : tensors) by_offset.push_back(&t);
  std::sort(by_offset.begin(), by_offset.end(), [](const auto* a, const auto* b) {
    return a->begin != b->begin ? a->begin < b->begin : a->end < b->end;
  });
  int64_t covered = 0;
  const SafetensorsInfo* prev = nullptr;
  for (const SafetensorsInfo* t : by_offset) {
    if (t->begin < covered) {
      fail("{}: tensors {} and {} overlap (bytes {} and {})", path, prev->name, t->name,
           prev->begin, t->begin);
    }
    if (t->begin > covered)
      fail("{}: bytes {}..{} of the data belong to no tensor", path, covered, t->begin);
    covered = t->end;
    prev = t;
  }
  if (covered != data_size) {
    fail("{}: the data buffer has {} bytes but the tensors describe {}; {}", path, data_size,
         covered, kNotSafetensors);
  }
}

}  // namespace

SafetensorsReader::SafetensorsReader(const std::string& path) : path_(path) {
  try {
    parse();
  } catch (...) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
    throw;
  }
}

void SafetensorsReader::parse() {
  const std::string& path = path_;
  // Non-blocking: a FIFO in a weights file's place is refused below instead of waited on.
  fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd_ < 0) fail("cannot open {}: {}", path, std::strerror(errno));
  struct stat st {};
  if (::fstat(fd_, &st) != 0) fail("cannot stat {}: {}", path, std::strerror(errno));
  if (!S_ISREG(st.st_mode)) fail("{} is not a regular file", path);
  const uint64_t file_size = static_cast<uint64_t>(st.st_size);
  const std::string text = header_text_read(fd_, path, file_size);
  const Json header = header_json_parse(path, text);

  const uint64_t n = text.size();
  data_start_ = static_cast<int64_t>(8 + n);
  const int64_t data_size = static_cast<int64_t>(file_size - 8 - n);
  for (auto it = header.begin(); it != header.end(); ++it) {
    if (it.key() == "__metadata__") {
      metadata_parse(path, it.value(), metadata_);
    } else {
      tensors_.push_back(tensor_entry_parse(path, it.key(), it.value(), data_size));
    }
  }
  tensors_tiling_check(path, tensors_, data_size);
  std::sort(tensors_.begin(), tensors_.end(),
            [](const auto& a, const auto& b) { return a.name < b.name; });
}

SafetensorsReader::~SafetensorsReader() {
  if (fd_ >= 0) ::close(fd_);
}

const SafetensorsInfo* SafetensorsReader::find(const std::string& name) const {
  auto it =
      std::lower_bound(tensors_.begin(), tensors_.end(), name,
                       [](const SafetensorsInfo& t, const std::string& n) { return t.name < n; });
  return it != tensors_.end() && it->name == name ? &*it : nullptr;
}

const SafetensorsInfo& SafetensorsReader::info(const std::string& name) const {
  const SafetensorsInfo* t = find(name);
  if (t == nullptr) fail("{}: has no tensor named {}", path_, name);
  return *t;
}

void SafetensorsReader::read_bytes(const SafetensorsInfo& t, void* out) const {
  auto* p = static_cast<char*>(out);
  int64_t done = 0;
  const int64_t total = t.end - t.begin;
  while (done < total) {
    const ssize_t got =
        ::pread(fd_, p + done, static_cast<size_t>(total - done), data_start_ + t.begin + done);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) {
      fail("{}: cannot read tensor {} ({}); the file changed or was truncated while open", path_,
           t.name, got < 0 ? std::strerror(errno) : "unexpected end of file");
    }
    done += got;
  }
}

void SafetensorsReader::read_f32(const std::string& name, std::span<float> out) const {
  const SafetensorsInfo& t = info(name);
  if (t.dtype != "F32") fail("{}: tensor {} has dtype {}, expected F32", path_, name, t.dtype);
  if (t.numel() != static_cast<int64_t>(out.size())) {
    fail("{}: tensor {} has {} elements, expected {}", path_, name, t.numel(), out.size());
  }
  read_bytes(t, out.data());
}

std::vector<float> SafetensorsReader::read_f32(const std::string& name) const {
  std::vector<float> out(static_cast<size_t>(std::max<int64_t>(info(name).numel(), 0)));
  read_f32(name, out);
  return out;
}

std::vector<int64_t> SafetensorsReader::read_i64(const std::string& name) const {
  const SafetensorsInfo& t = info(name);
  if (t.dtype != "I64") fail("{}: tensor {} has dtype {}, expected I64", path_, name, t.dtype);
  std::vector<int64_t> out(static_cast<size_t>(t.numel()));
  read_bytes(t, out.data());
  return out;
}

}  // namespace infinipipe
