#include "core/validate.hpp"

#include <sqlock/errors.hpp>

namespace sqlock::detail {

std::size_t utf8_sequence(std::string_view s, std::size_t at, std::uint32_t* code_point) noexcept {
    const auto byte = [&](std::size_t i) { return static_cast<unsigned char>(s[i]); };
    const unsigned char c = byte(at);
    std::size_t extra;
    std::uint32_t cp;
    if (c < 0x80) {
        extra = 0;
        cp = c;
    } else if (c >= 0xC2 && c <= 0xDF) {
        extra = 1;
        cp = c & 0x1F;
    } else if (c >= 0xE0 && c <= 0xEF) {
        extra = 2;
        cp = c & 0x0F;
    } else if (c >= 0xF0 && c <= 0xF4) {
        extra = 3;
        cp = c & 0x07;
    } else {
        return 0;
    }
    if (s.size() - at <= extra) return 0;
    for (std::size_t i = 1; i <= extra; ++i) {
        if ((byte(at + i) & 0xC0) != 0x80) return 0;
        cp = (cp << 6) | (byte(at + i) & 0x3F);
    }
    if ((extra == 2 && cp < 0x800) || (extra == 3 && cp < 0x10000) || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
        return 0;
    if (code_point) *code_point = cp;
    return extra + 1;
}

bool valid_utf8(std::string_view s) noexcept {
    for (std::size_t at = 0; at < s.size();) {
        const std::size_t n = utf8_sequence(s, at);
        if (n == 0) return false;
        at += n;
    }
    return true;
}

void validate_key(std::string_view key) {
    if (key.empty()) throw config_error("lock key is empty: keys are 1 to 255 bytes of UTF-8");
    if (key.size() > max_key_bytes)
        throw config_error("lock key is " + std::to_string(key.size()) +
                           " bytes: keys are at most 255 bytes of UTF-8 (hash longer names)");
    if (key.find('\0') != std::string_view::npos)
        throw config_error("lock key contains a NUL byte: keys are UTF-8 text without NUL");
    if (!valid_utf8(key)) throw config_error("lock key is not valid UTF-8: keys are 1 to 255 bytes of UTF-8");
}

void validate_prefix(std::string_view prefix) {
    if (prefix.size() > max_key_bytes)
        throw config_error("key prefix is " + std::to_string(prefix.size()) + " bytes: keys are at most 255 bytes");
    if (prefix.find('\0') != std::string_view::npos || !valid_utf8(prefix))
        throw config_error("key prefix must be UTF-8 text without NUL bytes");
}

void validate_duration(std::string_view what, std::chrono::milliseconds d, bool zero_ok) {
    if (d < std::chrono::milliseconds::zero() || (d == std::chrono::milliseconds::zero() && !zero_ok))
        throw config_error(std::string(what) + " must be " + (zero_ok ? "zero or positive" : "positive") + " (got " +
                           std::to_string(d.count()) + " ms)");
    if (d > max_duration)
        throw config_error(std::string(what) + " is " + std::to_string(d.count()) +
                           " ms: durations sqlock sends to the database are at most sqlock::max_duration (24 days, " +
                           std::to_string(max_duration.count()) + " ms)");
}

std::chrono::milliseconds effective_margin(const lock_options& options) {
    return options.safety_margin.count() > 0 ? options.safety_margin : options.lease / 10;
}

std::chrono::milliseconds effective_renew_interval(const lock_options& options) {
    auto interval = options.renew_interval.count() > 0 ? options.renew_interval : options.lease / 3;
    // A select_for_update lease's renewal is a ping on its own connection:
    // frequent pings notice a dead connection quickly.
    if (options.mode == mode::select_for_update) interval = std::min(interval, std::chrono::milliseconds(1000));
    return std::max(interval, std::chrono::milliseconds(1));
}

void validate_lock_options(const lock_options& options) {
    validate_duration("lease", options.lease);
    validate_duration("safety_margin", options.safety_margin, true);
    validate_duration("renew_interval", options.renew_interval, true);
    if (options.safety_margin >= options.lease)
        throw config_error("safety_margin must be zero (a tenth of the lease) or shorter than the lease");
    if (options.renew_interval >= options.lease)
        throw config_error("renew_interval must be zero (a third of the lease) or shorter than the lease");
    if (options.auto_renew) {
        // The lease is lost at (last renewal + lease - margin); the next
        // renewal is sent one interval after the last: it must come first.
        const auto margin = effective_margin(options), interval = effective_renew_interval(options);
        if (margin + interval >= options.lease)
            throw config_error("safety_margin (" + std::to_string(margin.count()) + " ms) plus renew_interval (" +
                               std::to_string(interval.count()) + " ms) must be shorter than the lease (" +
                               std::to_string(options.lease.count()) +
                               " ms), or the lease is lost before its first renewal: shorten them or lengthen "
                               "the lease");
    }
    if (options.max_hold < std::chrono::milliseconds::zero())
        throw config_error("max_hold must be zero (no cap) or positive");
    if (options.note.size() > max_note_bytes)
        throw config_error("note is " + std::to_string(options.note.size()) + " bytes: at most 1024");
    if (options.note.find('\0') != std::string::npos || !valid_utf8(options.note))
        throw config_error("note must be UTF-8 text without NUL bytes");
    if (options.mode != mode::unique_insert && options.mode != mode::conditional_update &&
        options.mode != mode::select_for_update)
        throw config_error("mode is not one of unique_insert, conditional_update, select_for_update");
}

void validate_timeout(std::chrono::milliseconds timeout) {
    if (timeout < std::chrono::milliseconds::zero())
        throw config_error("timeout must not be negative (got " + std::to_string(timeout.count()) +
                           " ms); use 0 to try once or sqlock::wait_forever");
}

void validate_client_options(const client_options& options) {
    const auto& p = options.table_prefix;
    bool ok = !p.empty() && p.size() <= max_prefix_bytes && ((p[0] >= 'a' && p[0] <= 'z') || p[0] == '_');
    for (char c : p) ok = ok && ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_');
    if (!ok)
        throw config_error("table_prefix '" + p +
                           "' is not a lower-case SQL identifier: use [a-z_][a-z0-9_]*, at most 40 bytes");
    if (options.pool_size == 0) throw config_error("pool_size must be at least 1");
    if (options.connect_timeout < std::chrono::seconds(1))
        throw config_error("connect_timeout must be at least 1 s (drivers count whole seconds)");
    validate_duration("connect_timeout", options.connect_timeout);
    validate_duration("statement_timeout", options.statement_timeout);
    validate_duration("row_lock_timeout", options.row_lock_timeout);
    if (options.renew_batch_size == 0 || options.renew_batch_size > 5000)
        throw config_error("renew_batch_size must be between 1 and 5000");
    if (options.sweep_batch_size == 0 || options.sweep_batch_size > 10000)
        throw config_error("sweep_batch_size must be between 1 and 10000");
    if (options.sweep_interval < std::chrono::milliseconds(10))
        throw config_error("sweep_interval must be at least 10 ms");
    validate_duration("sweep_interval", options.sweep_interval);
    if (options.job_retention < std::chrono::milliseconds::zero() ||
        (options.job_retention > std::chrono::milliseconds::zero() && options.job_retention < std::chrono::seconds(1)))
        throw config_error("job_retention must be zero (keep forever) or at least one second");
    // Ledger ages are compared in SQL as intervals: keep them in every
    // backend's range (and in any sensible one).
    if (options.job_retention > std::chrono::hours(24 * 366 * 100))
        throw config_error("job_retention must be at most 100 years (zero keeps rows forever)");
    if (options.durability != durability::strict && options.durability != durability::relaxed)
        throw config_error("durability is not one of strict, relaxed");
}

void validate_permits(std::int64_t permits) {
    if (permits < 1 || permits > 1'000'000)
        throw config_error("permits is " + std::to_string(permits) + ": a semaphore has 1 to 1000000 permits");
}

}  // namespace sqlock::detail
