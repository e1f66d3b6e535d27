#include "options/megatron_flags.h"

#include <algorithm>
#include <cctype>

#include <fmt/format.h>

#include "core/error.h"
#include "core/strings.h"
#include "options/options.h"

namespace infinipipe::options {
namespace {

std::string dashed(std::string key) {
  std::replace(key.begin(), key.end(), '_', '-');
  return key;
}

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

// The literal neutral value matched as argparse would read it: numbers by value, booleans in
// any of the spellings a flag accepts.
bool same_value(const std::string& given, const std::string& neutral) {
  const std::string g = lower(given), n = lower(neutral);
  if (g == n) return true;
  auto truthy = [](const std::string& s) {
    return s == "true" || s == "1" || s == "yes" || s == "on";
  };
  auto falsy = [](const std::string& s) {
    return s == "false" || s == "0" || s == "no" || s == "off";
  };
  if (n == "true") return truthy(g);
  if (n == "false") return falsy(g);
  try {
    size_t pg = 0, pn = 0;
    const double a = std::stod(g, &pg), b = std::stod(n, &pn);
    return pg == g.size() && pn == n.size() && a == b;
  } catch (...) {
    return false;
  }
}

size_t common_prefix(const std::string& a, const std::string& b) {
  size_t i = 0;
  while (i < a.size() && i < b.size() && a[i] == b[i]) ++i;
  return i;
}

std::vector<std::string> known_names() {
  std::vector<std::string> names = option_names();
  for (const NeutralFlag& n : megatron_neutral_flags()) names.push_back(n.name);
  for (const FlagGroup& g : megatron_irrelevant_flags())
    names.insert(names.end(), g.names.begin(), g.names.end());
  for (const FlagGroup& g : megatron_refused_flags())
    names.insert(names.end(), g.names.begin(), g.names.end());
  return names;
}

}  // namespace

const char* flag_class_name(FlagClass c) {
  switch (c) {
    case FlagClass::supported:
      return "supported";
    case FlagClass::neutral:
      return "neutral";
    case FlagClass::irrelevant:
      return "irrelevant";
    case FlagClass::refused:
      return "refused";
    case FlagClass::unknown:
      break;
  }
  return "unknown";
}

FlagInfo megatron_flag(const std::string& raw) {
  const std::string name = dashed(raw);
  if (is_option_name(name)) return {FlagClass::supported, "", nullptr};
  for (const NeutralFlag& n : megatron_neutral_flags())
    if (n.name == name) return {FlagClass::neutral, n.why, &n};
  for (const FlagGroup& g : megatron_irrelevant_flags())
    if (std::find(g.names.begin(), g.names.end(), name) != g.names.end())
      return {FlagClass::irrelevant, g.why, nullptr};
  for (const FlagGroup& g : megatron_refused_flags())
    if (std::find(g.names.begin(), g.names.end(), name) != g.names.end())
      return {FlagClass::refused, g.why, nullptr};
  return {};
}

std::string nearest_option_name(const std::string& raw) {
  const std::string key = dashed(raw);
  // Up to a quarter of the word mistyped (at least 2 edits), else the hint would mislead.
  const int allowed = static_cast<int>(std::max<size_t>(2, key.size() / 4));
  std::string best;
  int best_d = 1 << 30;
  size_t best_prefix = 0;
  for (const std::string& c : known_names()) {
    // A name the key begins (argparse's abbreviation) is what was meant, the shortest first.
    if (c.size() > key.size() && c.compare(0, key.size(), key) == 0) {
      const int d = static_cast<int>(c.size() - key.size()) - (1 << 20);
      if (d < best_d) best_d = d, best = c, best_prefix = key.size();
      continue;
    }
    const int d = edit_distance(key, c, std::min(best_d, allowed));
    const size_t p = common_prefix(key, c);
    if (d < best_d || (d == best_d && p > best_prefix)) best_d = d, best = c, best_prefix = p;
  }
  if (best_d < 0) return best;
  return best_d <= allowed ? best : std::string();
}

void megatron_extras_add(MegatronExtras& extras, const std::string& raw_key,
                         const std::string& value, const std::string& origin) {
  const std::string key = dashed(raw_key);
  const FlagInfo f = megatron_flag(key);
  switch (f.cls) {
    case FlagClass::neutral:
    case FlagClass::irrelevant:
      extras.value[key] = value;  // argparse: the last one given wins
      extras.origin[key] = origin;
      return;
    case FlagClass::refused:
      fail_config("{} is a Megatron-LM option infinipipe does not support: {}", origin, f.why);
    case FlagClass::supported:
      fail_config("internal: option {} reached the Megatron table", key);
    case FlagClass::unknown:
      break;
  }
  const std::string near = nearest_option_name(key);
  if (near.empty())
    fail_config("unknown option '{}': run `infinipipe config show --help` for the list", origin);
  fail_config("unknown option '{}': did you mean '{}'?", origin, near);
}

void megatron_extras_check(const MegatronExtras& extras, const Config& cfg,
                           std::vector<std::string>& notes, std::vector<std::string>* errors) {
  for (const auto& [key, value] : extras.value) {
    const FlagInfo f = megatron_flag(key);
    const std::string& where = extras.origin.at(key);
    if (f.cls == FlagClass::irrelevant) {
      notes.push_back(fmt::format("note: {} has no effect here: {}", where, f.why));
      continue;
    }
    const NeutralFlag& n = *f.neutral;
    const bool ok = n.ok ? n.ok(value, cfg) : same_value(value, n.neutral);
    if (ok) continue;
    const std::string problem = fmt::format("{} {} is not supported (accepted only at {}): {}",
                                            where, value, n.neutral, n.why);
    if (!errors) throw ConfigError(problem);
    errors->push_back(problem);
  }
}

}  // namespace infinipipe::options
