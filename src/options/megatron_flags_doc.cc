// The flag table of docs/megatron.md, rendered from the table itself so the page cannot drift
// (tests/cli/test_megatron_flags.cc compares the two).
#include <algorithm>

#include <fmt/format.h>

#include "options/megatron_flags.h"
#include "options/options.h"

namespace infinipipe::options {
namespace {

std::string flag_list(std::vector<std::string> names) {
  std::sort(names.begin(), names.end());
  std::string out;
  for (const std::string& n : names) out += (out.empty() ? "" : ", ") + fmt::format("`--{}`", n);
  return out;
}

std::string group_table(const std::vector<FlagGroup>& groups) {
  std::string out = "| reason | flags |\n|---|---|\n";
  for (const FlagGroup& g : groups) {
    std::vector<std::string> left;
    for (const std::string& n : g.names)
      if (!is_option_name(n)) left.push_back(n);
    if (!left.empty()) out += fmt::format("| {} | {} |\n", g.why, flag_list(left));
  }
  return out;
}

}  // namespace

std::string megatron_flags_markdown(const std::vector<std::string>& arguments_py_names) {
  std::vector<std::string> supported;
  for (const std::string& n : arguments_py_names)
    if (is_option_name(n)) supported.push_back(n);
  std::string out = fmt::format("### Supported ({} flags, same meaning)\n\n{}\n\n", supported.size(),
                                flag_list(supported));
  out += "### Accepted at the neutral value only\n\n| flag | accepted at | any other value |\n"
         "|---|---|---|\n";
  for (const NeutralFlag& n : megatron_neutral_flags())
    if (!is_option_name(n.name))
      out += fmt::format("| `--{}` | {} | {} |\n", n.name, n.neutral, n.why);
  out += "\n### Accepted, without effect here (a note says so once per run)\n\n";
  out += group_table(megatron_irrelevant_flags());
  out += "\n### Refused\n\n" + group_table(megatron_refused_flags());
  return out;
}

}  // namespace infinipipe::options
