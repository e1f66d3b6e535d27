#include "runlog/record_fields.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "core/error.h"
#include "core/json_read.h"

namespace infinipipe::runlog {

RecordReader::RecordReader(const nlohmann::json& record, std::string where, std::string kind,
                           std::string fix)
    : record_(record), where_(std::move(where)), kind_(std::move(kind)), fix_(std::move(fix)) {
  if (!record_.is_object()) {
    fail("{}: a {} must be a JSON object, got {}; {}", where_, kind_, json_brief(record_), fix_);
  }
}

std::string RecordReader::field_where(const char* key) const {
  return fmt::format("{}: field \"{}\" of the {}", where_, key, kind_);
}

const nlohmann::json& RecordReader::field(const char* key) {
  known_.push_back(key);
  const auto it = record_.find(key);
  if (it == record_.end()) {
    fail(
        "{}: the {} lacks the field \"{}\" (renamed, or the file comes from another version of "
        "infinipipe); {}",
        where_, kind_, key, fix_);
  }
  return *it;
}

void RecordReader::required(const char* key, int64_t& value, int64_t lo, int64_t hi) {
  value = json_int(field(key), field_where(key), lo, hi);
}

void RecordReader::required(const char* key, int32_t& value, int64_t lo, int64_t hi) {
  const int64_t lo32 = std::max<int64_t>(lo, std::numeric_limits<int32_t>::min());
  const int64_t hi32 = std::min<int64_t>(hi, std::numeric_limits<int32_t>::max());
  value = static_cast<int32_t>(json_int(field(key), field_where(key), lo32, hi32));
}

void RecordReader::required(const char* key, double& value, int64_t, int64_t) {
  const nlohmann::json& v = field(key);
  value = v.is_null() ? std::numeric_limits<double>::quiet_NaN() : json_number(v, field_where(key));
}

void RecordReader::required(const char* key, bool& value, int64_t, int64_t) {
  value = json_bool(field(key), field_where(key));
}

void RecordReader::required(const char* key, std::string& value, int64_t, int64_t) {
  value = json_string(field(key), field_where(key));
}

void RecordReader::required(const char* key, plan::ActionKind& value, int64_t, int64_t) {
  const std::string& name = json_string(field(key), field_where(key));
  for (plan::ActionKind k : {plan::ActionKind::forward, plan::ActionKind::backward}) {
    if (name == plan::action_kind_name(k)) {
      value = k;
      return;
    }
  }
  fail("{} must be \"forward\" or \"backward\", got {}; {}", field_where(key), json_brief(name),
       fix_);
}

void RecordReader::required(const char* key, std::array<int64_t, 2>& value, int64_t lo,
                            int64_t hi) {
  const nlohmann::json& v = field(key);
  if (!v.is_array() || v.size() != 2)
    fail("{} must be an array of two integers, got {}; {}", field_where(key), json_brief(v), fix_);
  for (size_t i = 0; i < 2; ++i) value[i] = json_int(v[i], field_where(key), lo, hi);
}

void RecordReader::required(const char* key, nlohmann::json& value, int64_t, int64_t) {
  value = field(key);
}

void RecordReader::finish() const {
  for (const auto& [key, v] : record_.items()) {
    if (std::find(known_.begin(), known_.end(), key) == known_.end()) {
      fail(
          "{}: the {} has the field \"{}\", which this version of infinipipe does not know "
          "(renamed, or the file comes from another version); {}",
          where_, kind_, key, fix_);
    }
  }
}

}  // namespace infinipipe::runlog
