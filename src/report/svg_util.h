// Helpers the report's SVG charts share.
#pragma once

#include <string>

namespace infinipipe::report {

// Escapes <, >, & and " for SVG/HTML text and attributes.
std::string svg_escape(const std::string& s);
// "0", "12.5 us", "3.2 ms", "1.05 s".
std::string svg_format_seconds(double s);
// A "nice" tick step (1, 2 or 5 × 10^k) giving about `n` ticks over `span`.
double svg_tick_step(double span, int n);

}  // namespace infinipipe::report
