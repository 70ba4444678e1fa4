// mysql:// URL parsing (see mysql_url.hpp).

#include "dialects/mysql/mysql_url.hpp"

#include "dialects/common/common.hpp"

#include <sqlock/errors.hpp>

#include <charconv>
#include <map>

namespace sqlock::detail {

mysql_url parse_mysql_url(std::string_view url) {
    const auto scheme_end = url.find("://");
    if (scheme_end == std::string_view::npos) throw config_error("MySQL URL must start with mysql://");
    std::string_view rest = url.substr(scheme_end + 3);
    mysql_url u;
    std::map<std::string, std::string> params;
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
        params[percent_decode(pair.substr(0, eq))] = percent_decode(pair.substr(eq + 1));
        query = amp == std::string_view::npos ? "" : query.substr(amp + 1);
    }
    for (const auto& [k, v] : params) {
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

}  // namespace sqlock::detail
