#include "cost/online_fit_state.h"

#include <fmt/format.h>

#include "core/error.h"
#include "core/json_read.h"
#include "cost/calibration.h"

namespace infinipipe::cost {

using Json = nlohmann::json;

namespace {

const Json& array_field(const Json& j, const char* key, const std::string& where, size_t n) {
  const Json& a = json_field(j, key, where);
  if (!a.is_array() || a.size() != n)
    fail("{}: {} must be an array of {} entries, got {}", where, key, n, json_brief(a));
  return a;
}

template <size_t N>
void numbers_from(const Json& a, const std::string& where, std::array<double, N>& out) {
  if (!a.is_array() || a.size() != N)
    fail("{} must be an array of {} numbers, got {}", where, N, json_brief(a));
  for (size_t i = 0; i < N; ++i) out[i] = json_number(a[i], fmt::format("{}[{}]", where, i));
}

template <size_t N>
void numbers_read(const Json& j, const char* key, const std::string& where,
                  std::array<double, N>& out) {
  numbers_from(array_field(j, key, where, N), fmt::format("{}: {}", where, key), out);
}

template <size_t N>
void counts_read(const Json& j, const char* key, const std::string& where,
                 std::array<int64_t, N>& out) {
  const Json& a = array_field(j, key, where, N);
  for (size_t i = 0; i < N; ++i)
    out[i] = json_int(a[i], fmt::format("{}: {}[{}]", where, key, i), 0, int64_t{1} << 53);
}

}  // namespace

Json online_fit_state_to_json(const OnlineFitState& s) {
  Json names = Json::array();
  for (int i = 0; i < kNumOnlineTerms; ++i) names.push_back(online_term_name(OnlineTerm(i)));
  return {{"terms", names},
          {"value", s.value},
          {"scale", s.scale},
          {"covariance", s.cov},
          {"covered", s.covered},
          {"term_samples", s.term_count},
          {"samples", s.count},
          {"residual_sq", s.residual_sq},
          {"residual_weight", s.residual_weight}};
}

OnlineFitState online_fit_state_from_json(const Json& j, const std::string& where) {
  if (!j.is_object()) fail("{}: the fit state must be an object, got {}", where, json_brief(j));
  const Json& names = array_field(j, "terms", where, kNumOnlineTerms);
  for (int i = 0; i < kNumOnlineTerms; ++i) {
    if (names[i] != online_term_name(OnlineTerm(i)))
      fail("{}: terms[{}] is {}, this build's term {} is {}", where, i, json_brief(names[i]), i,
           online_term_name(OnlineTerm(i)));
  }
  OnlineFitState s;
  numbers_read(j, "value", where, s.value);
  numbers_read(j, "scale", where, s.scale);
  const Json& cov = array_field(j, "covariance", where, kNumOnlineTerms);
  for (int i = 0; i < kNumOnlineTerms; ++i)
    numbers_from(cov[i], fmt::format("{}: covariance[{}]", where, i), s.cov[i]);
  const Json& covered = array_field(j, "covered", where, kNumOnlineTerms);
  for (int i = 0; i < kNumOnlineTerms; ++i)
    s.covered[i] = json_bool(covered[i], fmt::format("{}: covered[{}]", where, i));
  counts_read(j, "term_samples", where, s.term_count);
  counts_read(j, "samples", where, s.count);
  numbers_read(j, "residual_sq", where, s.residual_sq);
  numbers_read(j, "residual_weight", where, s.residual_weight);
  return s;
}

void json_terms_read(const Json& j, const std::string& where, std::span<double> out) {
  if (out.size() != static_cast<size_t>(kNumOnlineTerms))
    fail("{}: {} time terms asked for, there are {}", where, out.size(), kNumOnlineTerms);
  if (!j.is_array() || j.size() != out.size())
    fail("{} must be an array of {} numbers, got {}", where, out.size(), json_brief(j));
  for (size_t i = 0; i < out.size(); ++i) {
    // What the run plans with and writes as its calibration file: within a calibration's range.
    const char* name = online_term_name(OnlineTerm(i));
    out[i] = json_number(j[i], fmt::format("{}[{}] ({})", where, i, name), 0,
                         calibration_coefficient_max(name));
    if (out[i] == 0 && calibration_coefficient_positive(name))
      fail("{}[{}] ({}) must be > 0", where, i, name);
  }
}

void json_numbers_read(const Json& j, const std::string& where, std::span<double> out, double hi) {
  if (!j.is_array() || j.size() != out.size())
    fail("{} must be an array of {} numbers, got {}", where, out.size(), json_brief(j));
  for (size_t i = 0; i < out.size(); ++i)
    out[i] = json_number(j[i], fmt::format("{}[{}]", where, i), 0, hi);
}

}  // namespace infinipipe::cost
