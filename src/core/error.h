// Errors are for people: each says what is wrong and how to fix it (invariant 4 of
// docs/architecture.md). The CLI maps ConfigError to exit code 2 and every other Error to exit
// code 1.
#pragma once

#include <stdexcept>
#include <string>

#include <fmt/format.h>

namespace infinipipe {

// A runtime failure: bad data, a damaged checkpoint, an infeasible plan, a dead peer rank.
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

// A usage or configuration mistake the user can fix by changing flags or files (exit 2).
class ConfigError : public Error {
 public:
  explicit ConfigError(const std::string& what) : Error(what) {}
};

template <typename... Args>
[[noreturn]] void fail(fmt::format_string<Args...> f, Args&&... args) {
  throw Error(fmt::format(f, std::forward<Args>(args)...));
}

template <typename... Args>
[[noreturn]] void fail_config(fmt::format_string<Args...> f, Args&&... args) {
  throw ConfigError(fmt::format(f, std::forward<Args>(args)...));
}

}  // namespace infinipipe
