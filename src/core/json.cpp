#include "dialects/dialect.hpp"

namespace sqlock::detail {
namespace {

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
        out += ",\"ms\":" + std::to_string(r.lease_ms) + "}";
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

}  // namespace sqlock::detail
