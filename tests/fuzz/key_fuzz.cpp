// Fuzzes lock key validation, the check every key passes before it reaches
// SQL (src/core/validate.hpp, sqlock::client::check_key,
// sqlock::job_runner::lock_key).
//
// The input is a key. Checked against an independent reading of the
// documented limits — keys are 1 to 255 bytes of UTF-8 without NUL (Unicode
// 15, table 3-7: no overlong forms, no surrogates, nothing above U+10FFFF);
// key prefixes the same but may be empty; job names 1 to 100 bytes of UTF-8
// without ':' or control characters; run keys 1 to 128 bytes of UTF-8
// without NUL:
// - each check accepts exactly what the limits allow;
// - a refusal is sqlock::config_error (anything else is a crash) with a
//   message; one for a key's length names the limit, 255;
// - the lock key of a job's run (the input split in two: job name, run key)
//   is "job:<job>:<run key>" and is itself a valid key.

#include "core/validate.hpp"

#include <sqlock/client.hpp>
#include <sqlock/errors.hpp>
#include <sqlock/jobs.hpp>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

namespace {

[[noreturn]] void fail(const char* what, std::string_view input, const std::string& detail = {}) {
    std::fprintf(stderr, "key_fuzz: %s (%zu bytes)\n  %s\n", what, input.size(), detail.c_str());
    std::abort();
}

// Well-formed UTF-8 by Unicode's table 3-7: for each lead byte, the range
// its second byte must be in; the rest are 80..BF.
bool well_formed(std::string_view s) {
    std::size_t i = 0;
    while (i < s.size()) {
        const auto b = static_cast<unsigned char>(s[i]);
        int trail;
        unsigned char lo = 0x80, hi = 0xBF;
        if (b <= 0x7F) trail = 0;
        else if (b >= 0xC2 && b <= 0xDF) trail = 1;
        else if (b == 0xE0) trail = 2, lo = 0xA0;
        else if ((b >= 0xE1 && b <= 0xEC) || b == 0xEE || b == 0xEF) trail = 2;
        else if (b == 0xED) trail = 2, hi = 0x9F;
        else if (b == 0xF0) trail = 3, lo = 0x90;
        else if (b >= 0xF1 && b <= 0xF3) trail = 3;
        else if (b == 0xF4) trail = 3, hi = 0x8F;
        else return false;
        if (s.size() - i <= static_cast<std::size_t>(trail)) return false;
        for (int k = 1; k <= trail; ++k) {
            const auto c = static_cast<unsigned char>(s[i + static_cast<std::size_t>(k)]);
            if (k == 1 ? (c < lo || c > hi) : (c < 0x80 || c > 0xBF)) return false;
        }
        i += static_cast<std::size_t>(trail) + 1;
    }
    return true;
}

bool has_nul(std::string_view s) { return s.find('\0') != std::string_view::npos; }

bool key_ok(std::string_view k) { return !k.empty() && k.size() <= 255 && !has_nul(k) && well_formed(k); }
bool prefix_ok(std::string_view p) { return p.size() <= 255 && !has_nul(p) && well_formed(p); }
bool job_ok(std::string_view j) {
    if (j.empty() || j.size() > 100 || !well_formed(j)) return false;
    for (char c : j) {
        const auto u = static_cast<unsigned char>(c);
        if (c == ':' || u < 0x20 || u == 0x7F) return false;
    }
    return true;
}
bool run_key_ok(std::string_view r) { return !r.empty() && r.size() <= 128 && !has_nul(r) && well_formed(r); }

// Runs f; true if it returned, false if it threw config_error (with a
// message). Any other exception escapes: libFuzzer reports it as a crash.
template <class F>
bool accepted(F&& f, std::string_view input, const char* what, std::string* message = nullptr) {
    try {
        f();
        return true;
    } catch (const sqlock::config_error& e) {
        if (std::string_view(e.what()).empty()) fail("a refusal without a message", input, what);
        if (message) *message = e.what();
        return false;
    }
}

void expect(bool got, bool want, std::string_view input, const char* what) {
    if (got != want)
        fail(got ? "accepted what the limits refuse" : "refused what the limits allow", input, what);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string_view key(reinterpret_cast<const char*>(data), size);

    std::string message;
    const bool valid = accepted([&] { sqlock::detail::validate_key(key); }, key, "validate_key", &message);
    expect(valid, key_ok(key), key, "validate_key");
    if (!valid && key.size() > 255 && message.find("255") == std::string::npos)
        fail("a key too long is refused without naming the limit", key, message);
    expect(accepted([&] { sqlock::client::check_key(key); }, key, "client::check_key"), valid, key,
           "client::check_key");
    expect(accepted([&] { sqlock::detail::validate_prefix(key); }, key, "validate_prefix"), prefix_ok(key), key,
           "validate_prefix");
    expect(sqlock::detail::valid_utf8(key), well_formed(key), key, "valid_utf8");

    const std::string_view job = key.substr(0, size / 2), run_key = key.substr(size / 2);
    std::string lock_key;
    const bool made = accepted([&] { lock_key = sqlock::job_runner::lock_key(job, run_key); }, key,
                               "job_runner::lock_key");
    expect(made, job_ok(job) && run_key_ok(run_key), key, "job_runner::lock_key");
    if (made) {
        if (lock_key != "job:" + std::string(job) + ":" + std::string(run_key))
            fail("job_runner::lock_key is not job:<job>:<run key>", key, lock_key);
        if (!accepted([&] { sqlock::detail::validate_key(lock_key); }, key, "validate_key(lock_key)"))
            fail("a job's lock key is not a valid key", key, lock_key);
    }
    return 0;
}
