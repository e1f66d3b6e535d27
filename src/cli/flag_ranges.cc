#include "cli/flag_ranges.h"

#include <charconv>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

namespace infinipipe::cli {

namespace {

CLI::Validator integer_range(int64_t lo, int64_t hi) {
  return CLI::Validator(
      [lo, hi](std::string& v) -> std::string {
        int64_t x = 0;
        const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), x);
        if (v.empty() || end != v.data() + v.size() || ec != std::errc() || x < lo || x > hi)
          return fmt::format("expects an integer in [{}, {}], got '{}'", lo, hi, v);
        return std::string();
      },
      "", "integer range");
}

// The innermost subcommand the command line named ("data prepare").
std::string command_path(const CLI::App& app) {
  std::string path;
  const CLI::App* at = &app;
  for (;;) {
    const auto subs = at->get_subcommands();
    if (subs.empty()) break;
    at = subs.front();
    path += " " + at->get_name();
  }
  return path;
}

}  // namespace

void integer_flags_bound(CLI::App& app) {
  for (CLI::Option* o : app.get_options()) {
    const std::string type = o->get_type_name();
    if (type.rfind("INT", 0) == 0) o->check(integer_range(-kFlagIntMax, kFlagIntMax));
    if (type.rfind("UINT", 0) == 0) o->check(integer_range(0, kFlagIntMax));
  }
  for (CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; }))
    integer_flags_bound(*sub);
}

std::string parse_error_message(const CLI::App& app, const std::string& what) {
  std::string msg = what.substr(0, what.find('\n'));
  // "Could not convert: --x = abc": say what was expected of the value instead.
  constexpr std::string_view kConvert = "Could not convert: ";
  if (msg.rfind(kConvert, 0) == 0) {
    const std::string rest = msg.substr(kConvert.size());
    const size_t eq = rest.find(" = ");
    if (eq != std::string::npos)
      msg = fmt::format("{}: '{}' is not a value it takes", rest.substr(0, eq),
                        rest.substr(eq + 3));
  }
  return fmt::format("{}; see `infinipipe{} --help`", msg, command_path(app));
}

}  // namespace infinipipe::cli
