// Reading JSON that people and tools write: nesting bounded before parsing, every library
// exception turned into one Error naming the file, and typed, range-checked fields (invariant 4
// of docs/architecture.md). Every JSON reader of the project parses through json_parse.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace infinipipe {

// Deeper than any file the project writes (a plan nests 4 levels), shallow enough that the
// library's recursive functions (dump, comparison, copy) cannot exhaust the stack.
inline constexpr int kJsonMaxDepth = 64;

// Error naming `what` when `text` nests arrays and objects deeper than kJsonMaxDepth.
void json_check_depth(std::string_view text, const std::string& what);
// Parses `text`; any failure (syntax, depth, a number beyond double such as 1e400) is an Error
// "`what` is not valid JSON (...)" followed by `hint`.
nlohmann::json json_parse(std::string_view text, const std::string& what,
                          const std::string& hint = "");
// The library's message without its "[json.exception.parse_error.101] " tag: for people.
std::string json_error_text(const nlohmann::json::exception& e);
// Reads and parses a whole file; `what` defaults to the path.
nlohmann::json json_read_file(const std::string& path, const std::string& hint = "");

// A short, bounded rendering of a value for error messages: never the whole of a large value.
std::string json_brief(const nlohmann::json& v);

// Typed fields. `where` names the file and field, e.g. "plan.json: stages[2].num_layers".
// Integers must be JSON integers (32.9 and 1e300 are refused, not truncated) within [lo, hi].
int64_t json_int(const nlohmann::json& v, const std::string& where, int64_t lo = INT64_MIN,
                 int64_t hi = INT64_MAX);
// Numbers must be finite and within [lo, hi].
double json_number(const nlohmann::json& v, const std::string& where, double lo = -1e308,
                   double hi = 1e308);
bool json_bool(const nlohmann::json& v, const std::string& where);
const std::string& json_string(const nlohmann::json& v, const std::string& where);
// The member `key` of object `obj`; Error "`where` lacks the field `key`" when absent.
const nlohmann::json& json_field(const nlohmann::json& obj, const char* key,
                                 const std::string& where);

}  // namespace infinipipe
