#include "cli/duration.hpp"

#include <array>
#include <cstdint>
#include <limits>
#include <stdexcept>

namespace sqlock::cli {
namespace {

struct unit {
    std::string_view name;
    std::int64_t ms;
};
// Largest first; "ms" before "m" so that the longer suffix wins.
constexpr std::array<unit, 5> units{{{"d", 86'400'000}, {"h", 3'600'000}, {"ms", 1}, {"m", 60'000}, {"s", 1'000}}};

int rank(std::string_view name) {  // order in which units must appear
    if (name == "d") return 0;
    if (name == "h") return 1;
    if (name == "m") return 2;
    if (name == "s") return 3;
    return 4;  // ms
}

[[noreturn]] void bad(std::string_view text, std::string_view why) {
    throw std::invalid_argument("malformed duration '" + std::string(text) + "': " + std::string(why) +
                                " (write e.g. 250ms, 30s, 5m, 1h or 1h30m)");
}

}  // namespace

std::chrono::milliseconds parse_duration(std::string_view text) {
    if (text.empty()) bad(text, "it is empty");
    std::int64_t total = 0;
    int last_rank = -1;
    std::size_t i = 0;
    while (i < text.size()) {
        std::int64_t n = 0;
        const std::size_t digits_from = i;
        for (; i < text.size() && text[i] >= '0' && text[i] <= '9'; ++i) {
            if (n > (std::numeric_limits<std::int64_t>::max() - 9) / 10) bad(text, "the number is too large");
            n = n * 10 + (text[i] - '0');
        }
        if (i == digits_from) bad(text, "expected a number");
        const unit* found = nullptr;
        for (const auto& u : units)
            if (text.substr(i, u.name.size()) == u.name) {
                found = &u;
                break;
            }
        if (!found) bad(text, i == text.size() ? "the number needs a unit" : "unknown unit");
        i += found->name.size();
        const int r = rank(found->name);
        if (r <= last_rank) bad(text, "units must appear once each, largest first");
        last_rank = r;
        if (n > (std::numeric_limits<std::int64_t>::max() - total) / found->ms) bad(text, "it is too long");
        total += n * found->ms;
    }
    return std::chrono::milliseconds(total);
}

std::string format_duration(std::chrono::milliseconds d) {
    const std::int64_t count = d.count();
    if (count == 0) return "0s";
    // The magnitude, unsigned: negating the most negative count overflows.
    std::uint64_t left = count < 0 ? 0 - static_cast<std::uint64_t>(count) : static_cast<std::uint64_t>(count);
    std::string out = count < 0 ? "-" : "";
    for (auto [name, ms] : {unit{"d", 86'400'000}, unit{"h", 3'600'000}, unit{"m", 60'000}, unit{"s", 1'000},
                            unit{"ms", 1}}) {
        const auto step = static_cast<std::uint64_t>(ms);
        if (left >= step) {
            out += std::to_string(left / step) + std::string(name);
            left %= step;
        }
    }
    return out;
}

}  // namespace sqlock::cli
