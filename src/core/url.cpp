#include "core/url.hpp"

#include "dialects/common/common.hpp"

#include <sqlock/errors.hpp>


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
// showing it. `rest` is the URL after "scheme://".
void check_server_url(std::string_view url, std::string_view rest) {
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
        return;
    }
    if (auth_end == std::string_view::npos) return;
    // No userinfo in the authority, but an '@' further on: either legitimately
    // in the path or query (postgresql://db/app?user=me@corp), or a password
    // holding '/' or '?' cut the authority short (postgresql://u:pa/ss@h/db),
    // which shows as a "port" that is not a number, or as an '@' in the first
    // path segment.
    const auto later_at = rest.find('@', auth_end);
    if (later_at == std::string_view::npos) return;
    const auto colon = auth.rfind(':');
    const bool bad_port = colon != std::string_view::npos && auth.find(']') == std::string_view::npos &&
                          !all_digits(auth.substr(colon + 1));
    const auto segment_end = rest.find_first_of("/?", auth_end + 1);
    const bool at_in_first_segment = rest[auth_end] == '/' && later_at < segment_end;
    // In a query an '@' may follow a '=' (user=me@corp), never precede the first one.
    const bool at_before_first_value = rest[auth_end] == '?' && later_at < rest.find('=', auth_end);
    if (bad_port || at_in_first_segment || at_before_first_value)
        malformed(url, "the user name or password seems to contain '/' or '?'; write them as %2F and %3F "
                       "(and '@' as %40)");
}

// The secrets a server URL holds: the password of its userinfo and the value
// of any password= parameter, as written and decoded.
std::vector<std::string> secrets_of(std::string_view rest) {
    std::vector<std::string> out;
    auto add = [&](std::string_view raw) {
        if (raw.empty()) return;
        out.emplace_back(raw);
        try {
            auto decoded = percent_decode(raw);
            if (decoded != raw) out.push_back(std::move(decoded));
        } catch (const config_error&) {
        }
    };
    const std::string_view auth = rest.substr(0, rest.find_first_of("/?"));
    if (const auto at = auth.find('@'); at != std::string_view::npos) {
        const std::string_view userinfo = auth.substr(0, at);
        if (const auto colon = userinfo.find(':'); colon != std::string_view::npos) add(userinfo.substr(colon + 1));
    }
    for (std::size_t pos = rest.find("password="); pos != std::string_view::npos;
         pos = rest.find("password=", pos + 1)) {
        const auto value = pos + 9;
        add(rest.substr(value, rest.find_first_of("& ", value) - value));
    }
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
        check_server_url(url, rest.substr(2));
        return url_parts{name, std::string(url), secrets_of(rest.substr(2))};
    };
    if (scheme == "postgresql" || scheme == "postgres") return server("postgres", "postgresql://");
    if (scheme == "mysql" || scheme == "mariadb") return server("mysql", "mysql://");
    if (scheme == "sqlite") return url_parts{"sqlite", std::string(url), {}};
    // The scheme is what comes before the first ':', which in a URL without
    // one may be a user name: show it only when it looks like a scheme.
    const bool shown = !scheme.empty() && scheme.size() <= 20 &&
                       scheme.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789+.-") == std::string_view::npos;
    throw config_error("unknown database URL scheme" + (shown ? " '" + std::string(scheme) + "'" : std::string()) +
                       ": use postgresql://, mysql:// or sqlite:");
}

std::string redact_url(std::string_view url) {
    // Mask from the first ':' after "scheme://" to the last '@': the password
    // of scheme://user:password@host, wherever a malformed URL ends it (an
    // unencoded '/', '?', '#' or '@' in the password). A URL with an '@' only
    // in its query (user=me@corp) and a port loses more than its password,
    // which is the safe way to be wrong. Then every password= parameter.
    std::string out(url);
    const auto scheme_end = out.find("://");
    if (scheme_end != std::string::npos) {
        const auto auth_start = scheme_end + 3;
        const auto at = out.rfind('@');
        const auto colon = out.find(':', auth_start);
        if (at != std::string::npos && at > auth_start && colon != std::string::npos && colon < at)
            out.replace(colon + 1, at - colon - 1, "***");
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
