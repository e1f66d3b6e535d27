// An independent reader of TensorBoard event files for the tests: TFRecord frames checked with a
// bit-by-bit CRC-32C (not the writer's table), then the Event and Summary protobuf fields scalars
// use. Anything malformed is a test failure (an exception with what is wrong).
#pragma once

#include <cstdint>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace infinipipe::test_tfevents {

inline uint32_t crc32c_bitwise(const std::string& bytes) {
  uint32_t c = 0xFFFFFFFFu;
  for (unsigned char b : bytes) {
    c ^= b;
    for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (0x82F63B78u & (0u - (c & 1u)));
  }
  return ~c;
}

inline uint32_t masked(uint32_t crc) { return ((crc >> 15) | (crc << 17)) + 0xA282EAD8u; }

inline uint64_t little_endian(const std::string& s, size_t at, int bytes) {
  uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(s.at(at + i));
  return v;
}

struct Event {
  double wall_time = 0;
  int64_t step = 0;
  std::string file_version;
  std::map<std::string, float> scalars;
};

// Protobuf fields of one message: field number -> raw values (varints as numbers, fixed and
// length-delimited ones as bytes).
struct Field {
  uint32_t number = 0;
  uint32_t wire = 0;
  uint64_t varint = 0;
  std::string bytes;
};

inline uint64_t varint_read(const std::string& s, size_t& at) {
  uint64_t v = 0;
  for (int shift = 0; shift < 64; shift += 7) {
    const auto b = static_cast<unsigned char>(s.at(at++));
    v |= uint64_t{b & 0x7Fu} << shift;
    if ((b & 0x80) == 0) return v;
  }
  throw std::runtime_error("varint too long");
}

inline std::vector<Field> fields_read(const std::string& s) {
  std::vector<Field> out;
  size_t at = 0;
  while (at < s.size()) {
    Field f;
    const uint64_t key = varint_read(s, at);
    f.number = static_cast<uint32_t>(key >> 3);
    f.wire = static_cast<uint32_t>(key & 7);
    if (f.wire == 0) {
      f.varint = varint_read(s, at);
    } else if (f.wire == 1 || f.wire == 5) {
      const size_t n = f.wire == 1 ? 8 : 4;
      f.bytes = s.substr(at, n);
      if (f.bytes.size() != n) throw std::runtime_error("truncated fixed field");
      at += n;
    } else if (f.wire == 2) {
      const uint64_t n = varint_read(s, at);
      if (at + n > s.size()) throw std::runtime_error("truncated length-delimited field");
      f.bytes = s.substr(at, n);
      at += n;
    } else {
      throw std::runtime_error("unexpected wire type " + std::to_string(f.wire));
    }
    out.push_back(std::move(f));
  }
  return out;
}

inline Event event_decode(const std::string& data) {
  Event e;
  for (const Field& f : fields_read(data)) {
    if (f.number == 1 && f.wire == 1) {
      const uint64_t bits = little_endian(f.bytes, 0, 8);
      std::memcpy(&e.wall_time, &bits, 8);
    } else if (f.number == 2 && f.wire == 0) {
      e.step = static_cast<int64_t>(f.varint);
    } else if (f.number == 3 && f.wire == 2) {
      e.file_version = f.bytes;
    } else if (f.number == 5 && f.wire == 2) {
      for (const Field& value : fields_read(f.bytes)) {
        std::string tag;
        float v = 0;
        for (const Field& g : fields_read(value.bytes)) {
          if (g.number == 1) tag = g.bytes;
          if (g.number == 2 && g.wire == 5) {
            const auto bits = static_cast<uint32_t>(little_endian(g.bytes, 0, 4));
            std::memcpy(&v, &bits, 4);
          }
        }
        e.scalars[tag] = v;
      }
    }
  }
  return e;
}

// Every record of an event file, each frame's CRCs checked.
inline std::vector<Event> events_read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  const std::string s = ss.str();
  std::vector<Event> out;
  size_t at = 0;
  while (at < s.size()) {
    if (at + 12 > s.size()) throw std::runtime_error("truncated record header");
    const std::string length = s.substr(at, 8);
    if (little_endian(s, at + 8, 4) != masked(crc32c_bitwise(length))) {
      throw std::runtime_error("bad length CRC");
    }
    const uint64_t n = little_endian(s, at, 8);
    if (at + 12 + n + 4 > s.size()) throw std::runtime_error("truncated record");
    const std::string data = s.substr(at + 12, n);
    if (little_endian(s, at + 12 + n, 4) != masked(crc32c_bitwise(data))) {
      throw std::runtime_error("bad data CRC");
    }
    out.push_back(event_decode(data));
    at += 12 + n + 4;
  }
  return out;
}

}  // namespace infinipipe::test_tfevents
