// The subcommands' own flags (those outside the option table of src/options): every integer
// flag gets a range checked before CLI11 converts it, and CLI11's parse errors become one line
// naming the flag and the command's --help (docs/reliability.md, "Flags").
#pragma once

#include <string>

#include "options/cli11_fwd.h"

namespace infinipipe::cli {

// Magnitude bound of an integer subcommand flag: far above any count a command takes, far below
// the end of int64, so no flag can overflow the arithmetic that uses it. Each command checks its
// own tighter meaning (--workers 1..1024, ...).
inline constexpr int64_t kFlagIntMax = int64_t{1} << 40;

// Adds the range check to every integer option of `app` and of its subcommands, recursively.
void integer_flags_bound(CLI::App& app);

// CLI11's message for a parse error as one line: "--workers expects an integer in [...], got
// 'abc'; see `infinipipe data prepare --help`".
std::string parse_error_message(const CLI::App& app, const std::string& what);

}  // namespace infinipipe::cli
