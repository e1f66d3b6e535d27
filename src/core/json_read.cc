#include "core/json_read.h"

#include <cmath>
#include <fstream>
#include <sstream>

#include "core/error.h"
#include "core/input_file.h"

namespace infinipipe {

void json_check_depth(std::string_view text, const std::string& what) {
  // Brackets outside strings are the structure of valid JSON; invalid text that passes this
  // scan is refused by the parser.
  int depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\')
        ++i;
      else if (c == '"')
        in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > kJsonMaxDepth)
        fail(
            "{} nests arrays or objects more than {} levels deep (at byte {}); no file this "
            "tool reads needs that: the file is damaged or not what it should be",
            what, kJsonMaxDepth, i);
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
}

std::string json_error_text(const nlohmann::json::exception& e) {
  std::string m = e.what();
  if (m.rfind("[json.exception.", 0) == 0) {
    const size_t end = m.find("] ");
    if (end != std::string::npos) m.erase(0, end + 2);
  }
  return m;
}

nlohmann::json json_parse(std::string_view text, const std::string& what, const std::string& hint) {
  json_check_depth(text, what);
  try {
    return nlohmann::json::parse(text.begin(), text.end());
  } catch (const nlohmann::json::exception& e) {
    fail("{} is not valid JSON ({}){}{}", what, json_error_text(e), hint.empty() ? "" : "; ",
         hint);
  }
}

nlohmann::json json_read_file(const std::string& path, const std::string& hint) {
  return json_parse(input_file_read(path, input_kind::kJson), path, hint);
}

std::string json_brief(const nlohmann::json& v) {
  constexpr size_t kMax = 60;
  if (v.is_object() || v.is_array())
    return fmt::format("{} of {} entries", v.type_name(), v.size());
  std::string s = v.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  if (s.size() > kMax) s = s.substr(0, kMax) + "...";
  return s;
}

int64_t json_int(const nlohmann::json& v, const std::string& where, int64_t lo, int64_t hi) {
  const auto refuse = [&]() -> int64_t {
    fail("{} must be an integer in [{}, {}], got {}", where, lo, hi, json_brief(v));
  };
  if (v.is_number_unsigned()) {
    const uint64_t u = v.get<uint64_t>();
    if (u > static_cast<uint64_t>(INT64_MAX) || static_cast<int64_t>(u) > hi ||
        static_cast<int64_t>(u) < lo)
      return refuse();
    return static_cast<int64_t>(u);
  }
  if (!v.is_number_integer()) return refuse();
  const int64_t x = v.get<int64_t>();
  if (x < lo || x > hi) return refuse();
  return x;
}

double json_number(const nlohmann::json& v, const std::string& where, double lo, double hi) {
  if (!v.is_number()) fail("{} must be a number, got {}", where, json_brief(v));
  const double x = v.get<double>();
  if (!std::isfinite(x) || x < lo || x > hi)
    fail("{} must be a number in [{}, {}], got {}", where, lo, hi, json_brief(v));
  return x;
}

bool json_bool(const nlohmann::json& v, const std::string& where) {
  if (!v.is_boolean()) fail("{} must be true or false, got {}", where, json_brief(v));
  return v.get<bool>();
}

const std::string& json_string(const nlohmann::json& v, const std::string& where) {
  if (!v.is_string()) fail("{} must be a string, got {}", where, json_brief(v));
  return v.get_ref<const std::string&>();
}

const nlohmann::json& json_field(const nlohmann::json& obj, const char* key,
                                 const std::string& where) {
  if (!obj.is_object()) fail("{} must be an object, got {}", where, json_brief(obj));
  const auto it = obj.find(key);
  if (it == obj.end()) fail("{} lacks the field \"{}\"", where, key);
  return *it;
}

}  // namespace infinipipe
