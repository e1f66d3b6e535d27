// CLI11's classes by name only: a header that passes them around does not make every file that
// includes it compile CLI/CLI.hpp (header-only, several seconds per file).
#pragma once

namespace CLI {
class App;
class Option;
}  // namespace CLI
