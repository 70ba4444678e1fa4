// Code the dialects share (see common.hpp).

#include "dialects/common/common.hpp"

#include <sqlock/errors.hpp>

namespace sqlock::detail {

void dialect::fence_native(void*, std::string_view, std::int64_t) const {
    throw config_error("sqlock::sqlite::fence needs a lease from a SQLite client, not a " + std::string(name()) +
                       " one: fence with the helper of the lease's backend (sqlock/postgres.hpp, sqlock/mysql.hpp)");
}

[[noreturn]] void throw_schema_missing(const std::string& where, const std::string& driver_message) {
    throw schema_error("sqlock tables are missing in " + where + " (" + driver_message +
                       "): run client.migrate() or apply the files in migrations/");
}

namespace {

int hex_value(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}


void append_json_string(std::string& out, std::string_view s) {
    static constexpr char hex[] = "0123456789abcdef";
    out += '"';
    for (char ch : s) {
        auto c = static_cast<unsigned char>(ch);
        switch (c) {
            case '"': out += "\\\""; break;
            case '\\': out += "\\\\"; break;
            case '\n': out += "\\n"; break;
            case '\r': out += "\\r"; break;
            case '\t': out += "\\t"; break;
            default:
                if (c < 0x20) {
                    out += "\\u00";
                    out += hex[c >> 4];
                    out += hex[c & 15];
                } else {
                    out += ch;  // keys are valid UTF-8: copied as is
                }
        }
    }
    out += '"';
}

}  // namespace

std::string renewals_json(const std::vector<renewal>& batch) {
    std::string out = "[";
    for (const auto& r : batch) {
        if (out.size() > 1) out += ',';
        out += "{\"k\":";
        append_json_string(out, r.key);
        out += ",\"o\":";
        append_json_string(out, r.owner);
        out += ",\"ms\":" + std::to_string(r.lease_ms);
        if (r.kind != 'X') out += std::string(",\"t\":\"") + r.kind + '"';
        out += '}';
    }
    out += ']';
    return out;
}

std::string heartbeats_json(const std::vector<heartbeat>& batch) {
    std::string out = "[";
    for (const auto& h : batch) {
        if (out.size() > 1) out += ',';
        out += "{\"t\":" + std::to_string(h.ticket) + ",\"ms\":" + std::to_string(h.lease_ms) + "}";
    }
    out += ']';
    return out;
}

std::string fence_reason(std::string_view key, std::int64_t token, std::optional<std::int64_t> current,
                         std::optional<std::int64_t> lease_token, bool live) {
    const std::string lease = "the lease on '" + std::string(key) + "' with token " + std::to_string(token);
    if (!current) return "the lease on '" + std::string(key) + "' is not held: the key was never granted";
    if (*current != token)
        return lease + " is not held: the key was granted again (token " + std::to_string(*current) + ")";
    if (lease_token != token || !live) return lease + " is not held: it expired or was released";
    return "";
}

std::string percent_decode(std::string_view s) {
    std::string out;
    out.reserve(s.size());
    for (std::size_t i = 0; i < s.size(); ++i) {
        if (s[i] != '%') {
            out += s[i];
            continue;
        }
        int hi = i + 1 < s.size() ? hex_value(s[i + 1]) : -1;
        int lo = i + 2 < s.size() ? hex_value(s[i + 2]) : -1;
        if (hi < 0 || lo < 0) throw config_error("URL has a bad percent escape: write '%' as %25");
        out += static_cast<char>(hi * 16 + lo);
        i += 2;
    }
    return out;
}

std::string scrub(std::string text, const std::vector<std::string>& secrets) {
    for (const auto& secret : secrets) {
        if (secret.empty()) continue;
        for (auto pos = text.find(secret); pos != std::string::npos; pos = text.find(secret, pos + 3))
            text.replace(pos, secret.size(), "***");
    }
    return text;
}

}  // namespace sqlock::detail
