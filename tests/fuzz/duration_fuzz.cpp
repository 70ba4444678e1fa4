// Fuzzes the command line's durations (src/cli/duration.hpp).
//
// The input is the text given to --lease, --wait, --once-per ... Checked:
// - parse_duration either returns or throws std::invalid_argument (anything
//   else is a crash), and accepts exactly what an independent reading of the
//   documented grammar accepts — <digits><unit> parts, units d h m s ms, each
//   at most once, largest first — with the same value, refusing what does not
//   fit in 64-bit milliseconds;
// - what it accepts is never negative, and format_duration of it reads back
//   to the same value, in a form that formats to itself;
// - format_duration of any 64-bit count (the input's first 8 bytes) is
//   defined behaviour, and reads back for every count that is not negative.

#include "cli/duration.hpp"

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

namespace {

using std::chrono::milliseconds;

[[noreturn]] void fail(const char* what, std::string_view input, const std::string& detail) {
    std::fprintf(stderr, "duration_fuzz: %s\n  input: '%.*s'\n  %s\n", what, static_cast<int>(input.size()),
                 input.data(), detail.c_str());
    std::abort();
}

constexpr std::int64_t max_ms = std::numeric_limits<std::int64_t>::max();

struct part_unit {
    std::string_view name;
    std::int64_t ms;
};
// The grammar, in the order the units must appear.
constexpr part_unit grammar[] = {{"d", 86'400'000}, {"h", 3'600'000}, {"m", 60'000}, {"s", 1'000}, {"ms", 1}};

bool is_digit(char c) { return c >= '0' && c <= '9'; }

// The reference: matches text against (D+d)?(D+h)?(D+m)?(D+s)?(D+ms)? with
// backtracking (so "5ms" can only be milliseconds, never minutes then a
// dangling "s"), then adds the parts up in 128 bits. The library refuses a
// number as "too large" as soon as it exceeds (max - 9) / 10 with a digit
// still to come: an implementation choice the reference follows.
bool match(std::string_view text, std::size_t at, std::size_t unit, __int128 total, bool any,
           std::optional<std::int64_t>& out) {
    if (at == text.size()) {
        if (!any) return false;
        out = total > max_ms ? std::nullopt : std::optional<std::int64_t>(static_cast<std::int64_t>(total));
        return true;
    }
    for (std::size_t u = unit; u < std::size(grammar); ++u) {
        std::size_t end = at;
        while (end < text.size() && is_digit(text[end])) ++end;
        if (end == at) return false;
        if (text.substr(end, grammar[u].name.size()) != grammar[u].name) continue;
        // The number, saturated: only whether it is too large matters then.
        __int128 n = 0;
        bool too_large = false;
        for (std::size_t i = at; i < end; ++i) {
            if (n > (max_ms - 9) / 10) too_large = true;
            n = too_large ? n : n * 10 + (text[i] - '0');
        }
        const __int128 next = too_large ? __int128(max_ms) + 1 : total + n * grammar[u].ms;
        if (match(text, end + grammar[u].name.size(), u + 1, next > max_ms ? __int128(max_ms) + 1 : next, true,
                  out))
            return true;
    }
    return false;
}

// nullopt: refused (malformed or too long).
std::optional<std::int64_t> reference(std::string_view text) {
    std::optional<std::int64_t> out;
    if (!match(text, 0, 0, 0, false, out)) return std::nullopt;
    return out;
}

std::optional<milliseconds> parse(std::string_view text) {
    try {
        return sqlock::cli::parse_duration(text);
    } catch (const std::invalid_argument& e) {
        if (std::strncmp(e.what(), "malformed duration", 18) != 0) fail("unexpected message", text, e.what());
        return std::nullopt;
    }
}

void check_round_trip(milliseconds d, std::string_view input) {
    const std::string text = sqlock::cli::format_duration(d);
    const auto back = parse(text);
    if (!back || *back != d)
        fail("format_duration does not read back", input,
             std::to_string(d.count()) + " ms formats as '" + text + "', which reads as " +
                 (back ? std::to_string(back->count()) : std::string("an error")));
    if (sqlock::cli::format_duration(*back) != text) fail("format_duration is not canonical", input, text);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string_view text(reinterpret_cast<const char*>(data), size);

    const auto got = parse(text);
    const auto want = reference(text);
    if (got.has_value() != want.has_value() || (got && got->count() != *want))
        fail("parse_duration disagrees with the grammar", text,
             "library: " + (got ? std::to_string(got->count()) : std::string("refused")) +
                 ", reference: " + (want ? std::to_string(*want) : std::string("refused")));
    if (got) {
        if (got->count() < 0) fail("negative duration", text, std::to_string(got->count()));
        check_round_trip(*got, text);
    }

    if (size >= 8) {
        std::int64_t raw;
        std::memcpy(&raw, data, sizeof raw);
        const milliseconds d(raw);
        const std::string formatted = sqlock::cli::format_duration(d);  // UBSan: no overflow for any count
        if (raw >= 0) check_round_trip(d, text);
        else if (formatted.empty() || formatted[0] != '-' || parse(formatted))
            fail("a negative duration formats as something parse_duration reads", text, formatted);
    }
    return 0;
}
