#include "url.hpp"

#include <sqlock/errors.hpp>

#include <charconv>

namespace sqlock::detail {
namespace {

bool starts_with(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }

int hex_value(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

// mysql://[user[:password]@]host[:port][/database][?key=value&...]
url_parts parse_mysql(std::string_view url, std::string_view rest) {
    url_parts u;
    u.scheme = "mysql";
    u.raw = std::string(url);
    auto query_at = rest.find('?');
    std::string_view query = query_at == std::string_view::npos ? "" : rest.substr(query_at + 1);
    rest = rest.substr(0, query_at);
    auto slash = rest.find('/');
    std::string_view authority = rest.substr(0, slash);
    if (slash != std::string_view::npos) u.database = percent_decode(rest.substr(slash + 1));
    auto at = authority.rfind('@');
    if (at != std::string_view::npos) {
        std::string_view userinfo = authority.substr(0, at);
        authority = authority.substr(at + 1);
        auto colon = userinfo.find(':');
        u.user = percent_decode(userinfo.substr(0, colon));
        if (colon != std::string_view::npos) u.password = percent_decode(userinfo.substr(colon + 1));
    }
    auto colon = authority.rfind(':');
    if (colon != std::string_view::npos && authority.find(']') == std::string_view::npos) {
        std::string_view port = authority.substr(colon + 1);
        int value = 0;
        auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
        if (ec != std::errc{} || end != port.data() + port.size() || value <= 0 || value > 65535)
            throw config_error("mysql URL has a bad port '" + std::string(port) +
                               "': use mysql://user:pass@host:3306/db");
        u.port = value;
        authority = authority.substr(0, colon);
    }
    u.host = percent_decode(authority);
    while (!query.empty()) {
        auto amp = query.find('&');
        std::string_view pair = query.substr(0, amp);
        auto eq = pair.find('=');
        if (eq == std::string_view::npos)
            throw config_error("mysql URL parameter '" + std::string(pair) + "' needs a value (key=value)");
        u.params[percent_decode(pair.substr(0, eq))] = percent_decode(pair.substr(eq + 1));
        query = amp == std::string_view::npos ? "" : query.substr(amp + 1);
    }
    for (const auto& [k, v] : u.params) {
        if (k == "socket") u.socket = v;
        else
            throw config_error("mysql URL parameter '" + k + "' is not known: only 'socket' is accepted");
    }
    if (u.host.empty() && u.socket.empty())
        throw config_error("mysql URL names no host: use mysql://user:pass@host:port/db or "
                           "mysql://user:pass@localhost/db?socket=/path/to/mysqld.sock");
    if (u.host.empty()) u.host = "localhost";
    if (u.database.empty())
        throw config_error("mysql URL names no database: add /dbname after the host");
    return u;
}

}  // namespace

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

url_parts parse_url(std::string_view url) {
    auto colon = url.find(':');
    if (url.empty() || colon == std::string_view::npos)
        throw config_error("database URL '" + redact_url(url) +
                           "' has no scheme: use postgresql://, mysql:// or sqlite:");
    std::string_view scheme = url.substr(0, colon);
    std::string_view rest = url.substr(colon + 1);
    if (scheme == "postgresql" || scheme == "postgres") {
        if (!starts_with(rest, "//"))
            throw config_error("PostgreSQL URL must start with postgresql://");
        url_parts u;
        u.scheme = "postgres";
        u.raw = std::string(url);
        return u;
    }
    if (scheme == "mysql" || scheme == "mariadb") {
        if (!starts_with(rest, "//")) throw config_error("MySQL URL must start with mysql://");
        return parse_mysql(url, rest.substr(2));
    }
    if (scheme == "sqlite") {
        // sqlite:///abs/path and sqlite://rel/path are URL-shaped spellings of
        // sqlite:/abs/path and sqlite:rel/path.
        std::string_view path = starts_with(rest, "//") ? rest.substr(2) : rest;
        auto query = path.find('?');
        if (query != std::string_view::npos)
            throw config_error("sqlite URL takes no parameters: use sqlite:path/to/file.db");
        if (path.empty()) throw config_error("sqlite URL names no file: use sqlite:path/to/file.db");
        if (path == ":memory:" || starts_with(path, "file::memory:"))
            throw config_error("sqlite in-memory databases are private to one connection and cannot hold "
                               "shared locks: use a file, e.g. sqlite:/tmp/locks.db");
        url_parts u;
        u.scheme = "sqlite";
        u.raw = std::string(url);
        u.path = percent_decode(path);
        return u;
    }
    throw config_error("unknown database URL scheme '" + std::string(scheme) +
                       "': use postgresql://, mysql:// or sqlite:");
}

std::string redact_url(std::string_view url) {
    // Mask the password in scheme://user:password@host and in a libpq
    // "password=" query parameter.
    std::string out(url);
    auto scheme_end = out.find("://");
    if (scheme_end != std::string::npos) {
        auto auth_start = scheme_end + 3;
        auto auth_end = out.find_first_of("/?#", auth_start);
        if (auth_end == std::string::npos) auth_end = out.size();
        auto at = out.rfind('@', auth_end);
        if (at != std::string::npos && at >= auth_start) {
            auto colon = out.find(':', auth_start);
            if (colon != std::string::npos && colon < at) out.replace(colon + 1, at - colon - 1, "***");
        }
    }
    for (std::size_t pos = out.find("password="); pos != std::string::npos; pos = out.find("password=", pos + 1)) {
        auto value = pos + 9;
        auto end = out.find_first_of("& ", value);
        if (end == std::string::npos) end = out.size();
        out.replace(value, end - value, "***");
    }
    return out;
}

}  // namespace sqlock::detail
