#include "data/split.h"

#include <cmath>
#include <cstdlib>
#include <vector>

#include "core/error.h"

namespace infinipipe::data {

const char* data_split_name(DataSplit s) {
  switch (s) {
    case DataSplit::train:
      return "train";
    case DataSplit::valid:
      return "validation";
    case DataSplit::test:
      return "test";
  }
  return "?";
}

std::array<double, 3> split_parse(const std::string& text) {
  std::vector<std::string> parts;
  std::string cur;
  for (char c : text) {
    if (c == ',' || c == ' ' || c == '/') {
      if (!cur.empty()) parts.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  if (!cur.empty()) parts.push_back(cur);
  if (parts.empty() || parts.size() > 3) {
    fail_config("--split '{}': give one to three weights, train,validation,test (e.g. 969,30,1)",
                text);
  }
  std::array<double, 3> w{0, 0, 0};
  double sum = 0;
  for (size_t i = 0; i < parts.size(); ++i) {
    char* end = nullptr;
    w[i] = std::strtod(parts[i].c_str(), &end);
    if (end != parts[i].c_str() + parts[i].size() || !std::isfinite(w[i]) || w[i] < 0) {
      fail_config("--split '{}': '{}' is not a weight (a finite number ≥ 0)", text, parts[i]);
    }
    sum += w[i];
  }
  if (!(sum > 0)) fail_config("--split '{}': the weights sum to 0", text);
  for (double& x : w) x /= sum;
  return w;
}

std::array<DocRange, 3> split_ranges(int64_t num_documents, const std::array<double, 3>& weights) {
  std::array<int64_t, 4> bound{0, 0, 0, 0};
  for (size_t i = 0; i < 3; ++i) {
    bound[i + 1] = bound[i] + static_cast<int64_t>(
                                  std::llround(weights[i] * static_cast<double>(num_documents)));
  }
  const int64_t excess = bound[3] - num_documents;
  for (size_t i = 1; i < 4; ++i) bound[i] = std::max<int64_t>(0, bound[i] - excess);
  std::array<DocRange, 3> out;
  for (size_t i = 0; i < 3; ++i) out[i] = {bound[i], std::max(bound[i], bound[i + 1])};
  return out;
}

}  // namespace infinipipe::data
