// One schema, two directions. Each kind of record a run writes and the report reads lists its
// fields once, in a function template walked by RecordWriter (record -> JSON) and by RecordReader
// (JSON -> record), so the writer and the reader cannot disagree on a name:
//   template <typename Record, typename Fields> void xxx_fields(Record& r, Fields& f) {
//     f.required("iteration", r.iteration, 0);   // always written; a reader requires it
//     f.optional("cpu_s", r.cpu_s);              // absent in older files, or when unknown
//   }
// The reader is strict: a missing required field, a field of the wrong type or range, and a
// field the schema does not list (a renamed one) are each an Error naming the field, the record
// and where it is (the file and the line or the event), never a silent default.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "plan/plan.h"

namespace infinipipe::runlog {

inline constexpr int64_t kFieldMin = INT64_MIN, kFieldMax = INT64_MAX;

class RecordWriter {
 public:
  template <typename T>
  void required(const char* key, const T& value, int64_t = kFieldMin, int64_t = kFieldMax) {
    put(key, value);
  }
  template <typename T>
  void optional(const char* key, const std::optional<T>& value, int64_t = kFieldMin,
                int64_t = kFieldMax) {
    if (value) put(key, *value);
  }
  // A field written only when `present` (e.g. valid_tokens with valid_loss).
  template <typename T>
  void required_if(bool present, const char* key, const T& value, int64_t = kFieldMin,
                   int64_t = kFieldMax) {
    if (present) put(key, value);
  }
  nlohmann::json take() { return std::move(out_); }

 private:
  template <typename T>
  void put(const char* key, const T& value) {
    out_[key] = value;
  }
  void put(const char* key, plan::ActionKind kind) { out_[key] = plan::action_kind_name(kind); }

  nlohmann::json out_ = nlohmann::json::object();
};

class RecordReader {
 public:
  // `where` names the file and the line or event ("run/metrics.jsonl line 12"), `kind` the record
  // ("metrics record"), `fix` what to do about a bad one. Error unless `record` is an object.
  RecordReader(const nlohmann::json& record, std::string where, std::string kind, std::string fix);

  void required(const char* key, int64_t& value, int64_t lo = kFieldMin, int64_t hi = kFieldMax);
  void required(const char* key, int32_t& value, int64_t lo = kFieldMin, int64_t hi = kFieldMax);
  // A number, or null: writers write a non-finite number (a diverged loss) as null, JSON having
  // no NaN, so null reads as NaN.
  void required(const char* key, double& value, int64_t = kFieldMin, int64_t = kFieldMax);
  void required(const char* key, bool& value, int64_t = kFieldMin, int64_t = kFieldMax);
  void required(const char* key, std::string& value, int64_t = kFieldMin, int64_t = kFieldMax);
  void required(const char* key, plan::ActionKind& value, int64_t = kFieldMin, int64_t = kFieldMax);
  void required(const char* key, std::array<int64_t, 2>& value, int64_t lo = kFieldMin,
                int64_t hi = kFieldMax);
  // Any JSON value, read by its own schema (a trace event's args).
  void required(const char* key, nlohmann::json& value, int64_t = kFieldMin, int64_t = kFieldMax);

  template <typename T>
  void optional(const char* key, std::optional<T>& value, int64_t lo = kFieldMin,
                int64_t hi = kFieldMax) {
    known_.push_back(key);
    if (!record_.contains(key)) {
      value.reset();
      return;
    }
    T v{};
    required(key, v, lo, hi);
    value = std::move(v);
  }
  // Required when `present`; otherwise read if there.
  template <typename T>
  void required_if(bool present, const char* key, T& value, int64_t lo = kFieldMin,
                   int64_t hi = kFieldMax) {
    if (present || record_.contains(key)) required(key, value, lo, hi);
    known_.push_back(key);
  }
  // Error naming the first field the schema does not list: a renamed or unknown field.
  void finish() const;

 private:
  const nlohmann::json& field(const char* key);  // Error when absent
  std::string field_where(const char* key) const;

  const nlohmann::json& record_;
  std::string where_, kind_, fix_;
  std::vector<std::string> known_;
};

// `record` as JSON, its fields walked by `walk(record, writer)`.
template <typename Record, typename Walk>
nlohmann::json record_to_json(const Record& record, Walk walk) {
  RecordWriter w;
  walk(record, w);
  return w.take();
}

// A `kind` record read from `j` by `walk(record, reader)`; every field of `j` must be known.
template <typename Record, typename Walk>
Record record_from_json(const nlohmann::json& j, const std::string& where, const char* kind,
                        const std::string& fix, Walk walk) {
  RecordReader r(j, where, kind, fix);
  Record out;
  walk(out, r);
  r.finish();
  return out;
}

}  // namespace infinipipe::runlog
