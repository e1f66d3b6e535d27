// Megatron-LM's --split "969,30,1": the documents of a dataset are cut into train, validation
// and test by contiguous document ranges in those proportions (its GPT dataset's rule: each
// bound rounded from the running sum, the last moved to the end), so the splits are disjoint,
// cover every document and do not depend on the seed.
#pragma once

#include <array>
#include <cstdint>
#include <string>

namespace infinipipe::data {

enum class DataSplit : int32_t { train = 0, valid = 1, test = 2 };
const char* data_split_name(DataSplit s);  // "train" | "validation" | "test"

// Normalised weights of "A,B,C" (also "A B C", or fewer parts: the missing ones are 0), each a
// finite number ≥ 0, not all 0. ConfigError otherwise.
std::array<double, 3> split_parse(const std::string& text);

struct DocRange {
  int64_t begin = 0, end = 0;
  int64_t size() const { return end - begin; }
  bool operator==(const DocRange&) const = default;
};

std::array<DocRange, 3> split_ranges(int64_t num_documents, const std::array<double, 3>& weights);

}  // namespace infinipipe::data
