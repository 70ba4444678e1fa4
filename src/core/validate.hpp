#pragma once
// Input checks that run before any SQL: bad input never reaches a statement.

#include <sqlock/options.hpp>

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

namespace sqlock::detail {

inline constexpr std::size_t max_key_bytes = 255;
inline constexpr std::size_t max_note_bytes = 1024;
inline constexpr std::size_t max_prefix_bytes = 40;

// Strict UTF-8: no overlong forms, no surrogates, nothing above U+10FFFF.
bool valid_utf8(std::string_view s) noexcept;
// The length of the strict UTF-8 sequence that starts at s[at] (1 to 4), or
// 0 when the bytes there are not one; *code_point gets its code point.
std::size_t utf8_sequence(std::string_view s, std::size_t at, std::uint32_t* code_point = nullptr) noexcept;

// Each throws config_error saying what to fix.
void validate_key(std::string_view key);
// A key prefix to list by: like a key, but may be empty.
void validate_prefix(std::string_view prefix);
// A semaphore's limit: 1 to 1,000,000 permits.
void validate_permits(std::int64_t permits);
void validate_lock_options(const lock_options& options);
// A duration sqlock sends to the database: positive (or zero when
// zero_ok) and at most max_duration. `what` names it in the message.
void validate_duration(std::string_view what, std::chrono::milliseconds d, bool zero_ok = false);

// The safety margin and renewal interval a lease uses, zeros resolved.
std::chrono::milliseconds effective_margin(const lock_options& options);
std::chrono::milliseconds effective_renew_interval(const lock_options& options);
void validate_timeout(std::chrono::milliseconds timeout);
void validate_client_options(const client_options& options);

}  // namespace sqlock::detail
