#pragma once
// Durations on the command line: "250ms", "30s", "5m", "1h", "1h30m", "2d".

#include <chrono>
#include <string>
#include <string_view>

namespace sqlock::cli {

// Parses a sequence of <digits><unit> parts, units d, h, m, s, ms, each at
// most once and largest first. Throws std::invalid_argument with a message
// that says what to write instead.
std::chrono::milliseconds parse_duration(std::string_view text);

// "1h30m", "250ms", "0s": the shortest form parse_duration reads back.
std::string format_duration(std::chrono::milliseconds d);

}  // namespace sqlock::cli
