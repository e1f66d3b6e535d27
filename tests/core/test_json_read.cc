// The shared JSON reader: bounded depth, library exceptions as Error, typed fields.
#include "core/json_read.h"

#include <gtest/gtest.h>

#include <string>

#include "core/error.h"

namespace infinipipe {
namespace {

std::string error_of_parse(const std::string& text) {
  try {
    json_parse(text, "test.json");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(JsonRead, DeepNestingIsRefusedBeforeParsing) {
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  const std::string e = error_of_parse(deep);
  EXPECT_NE(e.find("test.json nests arrays or objects more than 64 levels"), std::string::npos)
      << e;
  // Exactly the limit is fine; brackets inside strings do not count.
  EXPECT_EQ(error_of_parse(std::string(64, '[') + std::string(64, ']')), "");
  EXPECT_EQ(error_of_parse("{\"a\": \"" + std::string(1000, '[') + "\\\"\"}"), "");
}

TEST(JsonRead, LibraryErrorsBecomeErrorsNamingTheFile) {
  EXPECT_NE(error_of_parse("{\"a\": 1e400}").find("test.json is not valid JSON"),
            std::string::npos);
  EXPECT_NE(error_of_parse("{\"a\": ").find("test.json is not valid JSON"), std::string::npos);
  EXPECT_NE(error_of_parse("\"\xff\"").find("test.json is not valid JSON"), std::string::npos);
  // For people: the library's tag is cut, its explanation kept.
  for (const char* text : {"{\"a\": 1e400}", "{\"a\": ", "\"\xff\""}) {
    const std::string e = error_of_parse(text);
    EXPECT_EQ(e.find("[json.exception"), std::string::npos) << e;
    EXPECT_NE(e.find("(number overflow"), e.find("(parse error")) << e;
  }
}

TEST(JsonRead, IntegersAreCheckedNotTruncated) {
  const auto error_of_int = [](const char* text, int64_t lo, int64_t hi) -> std::string {
    try {
      json_int(nlohmann::json::parse(text), "f: x", lo, hi);
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_EQ(error_of_int("7", 0, 10), "");
  EXPECT_NE(error_of_int("32.9", 0, 100).find("f: x must be an integer in [0, 100], got 32.9"),
            std::string::npos);
  EXPECT_NE(error_of_int("1e300", 0, INT64_MAX), "");
  EXPECT_NE(error_of_int("18446744073709551615", INT64_MIN, INT64_MAX), "");  // > INT64_MAX
  EXPECT_NE(error_of_int("-1", 0, 10), "");
  EXPECT_NE(error_of_int("true", 0, 10), "");
  EXPECT_NE(error_of_int("\"3\"", 0, 10), "");
  EXPECT_EQ(json_int(nlohmann::json::parse("9223372036854775807"), "x"), INT64_MAX);
}

TEST(JsonRead, NumbersAndOtherTypes) {
  EXPECT_DOUBLE_EQ(json_number(nlohmann::json(2.5), "x", 0, 3), 2.5);
  EXPECT_THROW(json_number(nlohmann::json(4.0), "x", 0, 3), Error);
  EXPECT_THROW(json_number(nlohmann::json("2"), "x"), Error);
  EXPECT_THROW(json_bool(nlohmann::json(1), "x"), Error);
  EXPECT_THROW(json_string(nlohmann::json(1), "x"), Error);
  EXPECT_THROW(json_field(nlohmann::json::array(), "k", "x"), Error);
  EXPECT_THROW(json_field(nlohmann::json::object(), "k", "x"), Error);
}

TEST(JsonRead, BriefIsBounded) {
  EXPECT_EQ(json_brief(nlohmann::json::parse("[[1],[2],[3]]")), "array of 3 entries");
  EXPECT_LE(json_brief(nlohmann::json(std::string(10000, 'x'))).size(), 64u);
  EXPECT_EQ(json_brief(nlohmann::json(3)), "3");
}

}  // namespace
}  // namespace infinipipe
