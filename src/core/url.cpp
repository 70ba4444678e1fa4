#include "core/url.hpp"

#include "dialects/common/common.hpp"

#include <sqlock/errors.hpp>

#include <algorithm>
#include <utility>

namespace sqlock::detail {
namespace {

bool starts_with(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }

int hex_value(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

// What a malformed URL is reported as: its scheme, nothing that could be
// part of a user name or password.
std::string scheme_of(std::string_view url) {
    const auto end = url.find("://");
    return end == std::string_view::npos ? std::string("database") : std::string(url.substr(0, end));
}

[[noreturn]] void malformed(std::string_view url, const std::string& why) {
    throw config_error(scheme_of(url) + " URL is malformed: " + why +
                       " (the URL is not shown: it may hold a password)");
}

bool all_digits(std::string_view s) {
    return !s.empty() && s.find_first_not_of("0123456789") == std::string_view::npos;
}

// Checks a server URL (postgresql:// or mysql://) for the shapes in which a
// parser would take part of the password for a host, port, database or
// parameter — and then quote it in an error. A password must be
// percent-encoded; where it evidently is not, say how to fix it without
// showing it. `rest` is the URL after "scheme://"; `mysql` for sqlock's own
// mysql:// parser, which takes only a socket parameter.
void check_server_url(std::string_view url, std::string_view rest, bool mysql) {
    // No database URL has a fragment: a '#' is an unencoded password character.
    if (url.find('#') != std::string_view::npos)
        malformed(url, "'#' is not allowed; if the user name or password contains '#', write it as %23");
    // Every '%' must start an escape, wherever it is (a password= parameter too).
    for (std::size_t i = 0; i < url.size(); ++i) {
        if (url[i] != '%') continue;
        if (i + 2 >= url.size() || hex_value(url[i + 1]) < 0 || hex_value(url[i + 2]) < 0)
            malformed(url, "a '%' does not start a %XX escape; write '%' itself as %25");
    }
    // The authority ends at the first '/' or '?'. Its userinfo ends at an '@'.
    const auto auth_end = rest.find_first_of("/?");
    const std::string_view auth = rest.substr(0, auth_end);
    const auto at = auth.find('@');
    if (at != std::string_view::npos) {
        if (auth.find('@', at + 1) != std::string_view::npos)
            malformed(url, "more than one '@' before the host; write '@' in a user name or password as %40");
        // A password holding '@' and then '/' (u:ab@cd/x@h/db) leaves its
        // tail and the real host in the database name, where libpq would
        // quote it: an '@' in the path is that, not a name.
        if (auth_end != std::string_view::npos && rest[auth_end] == '/' &&
            rest.find('@', auth_end) < rest.find('?', auth_end))
            malformed(url, "an '@' in the database name; if the password contains '@' or '/', write them as %40 and "
                           "%2F (an '@' in a database name as %40)");
        return;
    }
    if (auth_end == std::string_view::npos) return;
    // No userinfo in the authority, but an '@' further on: either legitimately
    // in a libpq query (postgresql://db/app?user=me@corp), or a password
    // holding '/' or '?' cut the authority short (postgresql://u:pa/ss@h/db),
    // which shows as a "port" that is not a number, or as an '@' in the path
    // (an '@' in a database name is written %40).
    const auto later_at = rest.find('@', auth_end);
    if (later_at == std::string_view::npos) return;
    // The mysql parser's only parameter is a socket path: an '@' in the query
    // is no user=me@corp but a password holding '?' (mysql://u:1?a=b@h/db
    // read as host "u", port 1 and a parameter "a" that its error named).
    if (mysql)
        malformed(url, "an '@' after the host: if the user name or password contains '/' or '?', write them as %2F "
                       "and %3F (and '@' as %40); an '@' in the database name or socket path as %40");
    // A libpq multi-host authority (h1:5432,h2:5433) has a port per host.
    bool bad_port = false;
    for (std::size_t begin = 0; begin <= auth.size();) {
        const auto end = std::min(auth.find(',', begin), auth.size());
        const std::string_view host = auth.substr(begin, end - begin);
        const auto colon = host.rfind(':');
        if (colon != std::string_view::npos && host.find(']') == std::string_view::npos &&
            !all_digits(host.substr(colon + 1)))
            bad_port = true;
        begin = end + 1;
    }
    const bool at_in_path = rest[auth_end] == '/' && later_at < rest.find('?', auth_end);
    // In a query an '@' may follow a '=' (user=me@corp), never precede the first one.
    const bool at_before_first_value = rest[auth_end] == '?' && later_at < rest.find('=', auth_end);
    if (bad_port || at_in_path || at_before_first_value)
        malformed(url, "the user name or password seems to contain '/' or '?'; write them as %2F and %3F "
                       "(and '@' as %40)");
}

// Percent-decoding that leaves a bad escape as it is: for reading a
// parameter's keyword in a URL not yet checked.
std::string lenient_decode(std::string_view s) {
    std::string out;
    for (std::size_t i = 0; i < s.size(); ++i) {
        if (s[i] == '%' && i + 2 < s.size() && hex_value(s[i + 1]) >= 0 && hex_value(s[i + 2]) >= 0) {
            out += static_cast<char>(hex_value(s[i + 1]) * 16 + hex_value(s[i + 2]));
            i += 2;
        } else {
            out += s[i];
        }
    }
    return out;
}

using range = std::pair<std::size_t, std::size_t>;  // [begin, end) of a URL

// Where a URL's password parameters hold their values: after every
// "password=", and after the '=' of every parameter whose keyword
// percent-decodes to "password" (libpq decodes keywords: pass%77ord= is a
// password). A value runs to the next '&', as libpq reads it (spaces too).
std::vector<range> password_values(std::string_view url) {
    std::vector<range> out;
    auto value_from = [&](std::size_t begin) {
        const auto end = url.find('&', begin);
        out.emplace_back(begin, end == std::string_view::npos ? url.size() : end);
    };
    for (auto pos = url.find("password="); pos != std::string_view::npos; pos = url.find("password=", pos + 1))
        value_from(pos + 9);
    for (auto pos = url.find_first_of("?&"); pos != std::string_view::npos; pos = url.find_first_of("?&", pos + 1)) {
        const auto eq = url.find('=', pos + 1);
        if (eq == std::string_view::npos) break;
        if (eq < url.find('&', pos + 1) && lenient_decode(url.substr(pos + 1, eq - pos - 1)) == "password")
            value_from(eq + 1);
    }
    return out;
}

// The secrets a server URL holds: the password of its userinfo and the value
// of every password parameter, as written and decoded. The userinfo is read
// as libpq reads it, ending at the first '@' before any '/' even past a '?'
// (postgresql://h?x=u:pw@y has the password "pw"); for the URLs
// check_server_url lets through, that is also what the mysql parser reads.
// With `parameters` false, the userinfo's password only (an sqlite://
// URL's: its path may hold "password=" as a file name).
std::vector<std::string> secrets_of(std::string_view url, std::string_view rest, bool parameters = true) {
    std::vector<std::string> out;
    auto add = [&](std::string_view raw) {
        if (raw.empty() || std::find(out.begin(), out.end(), raw) != out.end()) return;
        out.emplace_back(raw);
        try {
            auto decoded = percent_decode(raw);
            if (decoded != raw) out.push_back(std::move(decoded));
        } catch (const config_error&) {
        }
    };
    const std::string_view auth = rest.substr(0, rest.find('/'));
    if (const auto at = auth.find('@'); at != std::string_view::npos) {
        const std::string_view userinfo = auth.substr(0, at);
        if (const auto colon = userinfo.find(':'); colon != std::string_view::npos) add(userinfo.substr(colon + 1));
    }
    if (parameters)
        for (const auto& [begin, end] : password_values(url)) add(url.substr(begin, end - begin));
    return out;
}

}  // namespace

url_parts parse_url(std::string_view url) {
    auto colon = url.find(':');
    if (url.empty() || colon == std::string_view::npos)
        throw config_error("database URL has no scheme: use postgresql://, mysql:// or sqlite:");
    std::string_view scheme = url.substr(0, colon);
    std::string_view rest = url.substr(colon + 1);
    // A server URL: checked for a password that would be misread, and its
    // secrets noted for scrubbing; the dialect parses the rest.
    auto server = [&](const char* name, const char* example) {
        if (!starts_with(rest, "//"))
            throw config_error("a " + std::string(scheme) + " URL must start with " + example);
        check_server_url(url, rest.substr(2), std::string_view(name) == "mysql");
        return url_parts{name, std::string(url), secrets_of(url, rest.substr(2))};
    };
    if (scheme == "postgresql" || scheme == "postgres") return server("postgres", "postgresql://");
    if (scheme == "mysql" || scheme == "mariadb") return server("mysql", "mysql://");
    // An SQLite URL holds no password; but sqlite://user:pw@host/db, a
    // server URL given the wrong scheme, names the file "user:pw@host/db"
    // and messages quote it: its would-be password is scrubbed from them.
    if (scheme == "sqlite")
        return url_parts{"sqlite", std::string(url),
                         starts_with(rest, "//") ? secrets_of(url, rest.substr(2), false) : std::vector<std::string>{}};
    // The scheme is what comes before the first ':', which in a URL without
    // one may be a user name: show it only when it looks like a scheme.
    const bool shown = !scheme.empty() && scheme.size() <= 20 &&
                       scheme.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789+.-") == std::string_view::npos;
    throw config_error("unknown database URL scheme" + (shown ? " '" + std::string(scheme) + "'" : std::string()) +
                       ": use postgresql://, mysql:// or sqlite:");
}

std::string redact_url(std::string_view url) {
    // Masks the password of the userinfo and every password parameter's
    // value, and nothing else: the redacted URL names the database in
    // messages and in dialect::tables() (which keys the process's wake-up
    // queues), so the host, port, database and other parameters must stay.
    // The ranges are all found in the URL as given, then masked together: an
    // '@' in a parameter's value (password=p@ss) is not taken for the end of
    // a userinfo once that value is masked, nor the reverse.
    std::vector<range> ranges = password_values(url);
    const auto scheme_end = url.find("://");
    if (scheme_end != std::string_view::npos) {
        const auto auth_start = scheme_end + 3;
        const std::string_view scheme = url.substr(0, scheme_end);
        const bool server = scheme == "postgresql" || scheme == "postgres" || scheme == "mysql" || scheme == "mariadb";
        bool well_formed = server || scheme == "sqlite";
        if (server) {
            try {
                check_server_url(url, url.substr(auth_start), scheme == "mysql" || scheme == "mariadb");
            } catch (const config_error&) {
                well_formed = false;
            }
        }
        if (well_formed) {
            // The userinfo as libpq reads it (secrets_of): up to the first
            // '@' before any '/', even past a '?' (postgresql://h?x=u:pw@y has
            // the password "pw"); for a URL check_server_url accepts, also
            // the mysql parser's. Its password follows its first ':'.
            const auto at = url.find_first_of("@/", auth_start);
            if (at != std::string_view::npos && url[at] == '@') {
                const auto colon = url.find(':', auth_start);
                if (colon < at) ranges.emplace_back(colon + 1, at);
            }
        } else {
            // A URL parse_url refuses (an unencoded '/', '?', '#' or '@' in
            // the password) or of no known scheme: from the first ':' after
            // "scheme://" to the last '@', wherever the password ends. A URL
            // with an '@' only in its query loses more than its password,
            // which is the safe way to be wrong.
            const auto at = url.rfind('@');
            const auto colon = url.find(':', auth_start);
            if (at != std::string_view::npos && at > auth_start && colon != std::string_view::npos && colon < at)
                ranges.emplace_back(colon + 1, at);
        }
    }
    std::sort(ranges.begin(), ranges.end());
    std::string out;
    std::size_t done = 0;  // url[0, done) is in out
    for (std::size_t i = 0; i < ranges.size();) {
        auto [begin, end] = ranges[i];
        for (++i; i < ranges.size() && ranges[i].first <= end; ++i) end = std::max(end, ranges[i].second);
        out += url.substr(done, begin - done);
        out += "***";
        done = end;
    }
    out += url.substr(done);
    return out;
}

}  // namespace sqlock::detail
