// Fuzzes database URL parsing and redaction (src/core/url.hpp, the mysql://
// and sqlite: parsers, and the scrubbing of driver messages): a password
// never shows in anything sqlock says.
//
// The input is a URL, as given to client::open or `sqlock --url`. The
// harness works out which of its bytes are passwords, independently of the
// library:
// - the password of the userinfo as the driver reads it: libpq's rules for
//   postgresql:// (the userinfo ends at the first '@' before any '/', even
//   past a '?'), sqlock's mysql parser's for mysql:// (the last '@' of the
//   authority);
// - the value of every query parameter whose keyword percent-decodes to
//   "password" (libpq decodes keywords);
// - for a URL a parser could misread, everything between the first ':'
//   after "scheme://" and the last '@' (and the user name before it);
// - in a string with no "scheme://", what follows "password=" and what lies
//   between the first ':' and the last '@'.
// It then makes a twin of the URL in which every letter and digit of those
// bytes is changed to another of the same kind (digit, hex letter, other
// letter, same case; '0' kept), so that the twin has the same shape, and
// checks that:
// 1. parse_url accepts both or refuses both with the same message (a
//    message that depends on a password or user name shows some of it),
//    and throws nothing but config_error;
// 2. redact_url gives the same text for both (user names may show), for
//    the URLs it is given: those parse_url accepts, whose passwords are
//    what the driver reads (the userinfo's and password parameters; the
//    rest of the URL shows);
// 3. mysql: parse_mysql_url refuses both with the same message, or accepts
//    both with the same user, host, port, database and socket, and the
//    password the harness expects;
// 4. postgresql: every spelling of every password (as written, and
//    decoded) is masked by scrub() with the secrets parse_url found, and
//    the error libpq gives for the URL sqlock hands it (PQconninfoParse:
//    libpq quotes parts of a bad URL, sometimes the whole of it) shows no
//    password once scrubbed. libpq is asked, not imitated, and the
//    harness's reading of the password is checked against libpq's.
// Any of these failing aborts with the URL, the twin and the outputs.

#include "core/url.hpp"
#include "dialects/common/common.hpp"
#include "dialects/mysql/mysql_url.hpp"
#ifdef SQLOCK_FUZZ_SQLITE
#include "dialects/sqlite/sqlite_url.hpp"
#endif

#include <sqlock/errors.hpp>

#include <libpq-fe.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace {

using sqlock::config_error;

struct span {
    std::size_t begin, end;  // [begin, end) of the URL
    bool operator==(const span&) const = default;
};

std::string printable(std::string_view s) {
    std::string out;
    for (char c : s) {
        const auto u = static_cast<unsigned char>(c);
        if (u >= 0x20 && u < 0x7f && c != '\\') {
            out += c;
        } else {
            char buf[8];
            std::snprintf(buf, sizeof buf, "\\x%02x", u);
            out += buf;
        }
    }
    return out;
}

std::string_view g_url, g_twin;  // for messages

[[noreturn]] void fail(const std::string& what, const std::string& detail) {
    std::fprintf(stderr, "url_fuzz: %s\n  url:  %s\n  twin: %s\n  %s\n", what.c_str(), printable(g_url).c_str(),
                 printable(g_twin).c_str(), detail.c_str());
    std::abort();
}

int hex(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

// Percent-decoding that leaves a bad escape as it is (a spelling, not a check).
std::string decode(std::string_view s) {
    std::string out;
    for (std::size_t i = 0; i < s.size(); ++i) {
        if (s[i] == '%' && i + 2 < s.size() && hex(s[i + 1]) >= 0 && hex(s[i + 2]) >= 0) {
            out += static_cast<char>(hex(s[i + 1]) * 16 + hex(s[i + 2]));
            i += 2;
        } else {
            out += s[i];
        }
    }
    return out;
}

bool starts_with(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }

enum class kind { postgres, mysql, other_authority, no_authority };

// What the harness reads in a URL.
struct reading {
    kind k = kind::no_authority;
    std::vector<span> userinfo;          // the userinfo password as the driver reads it (0 or 1)
    std::vector<span> params;            // values of password parameters
    std::optional<span> greedy, user;    // a misreadable password, and the user name before it
    std::vector<span> keywords;          // what may be a parameter's keyword: never changed in the twin
    std::vector<std::size_t> word;       // where the literal word "password" starts
    bool operator==(const reading&) const = default;
};

// The parameters of a query starting at `from` (after its '?'), split on '&'.
void read_params(std::string_view u, std::size_t from, reading& r) {
    std::size_t at = from;
    while (at <= u.size()) {
        std::size_t end = u.find('&', at);
        if (end == std::string_view::npos) end = u.size();
        const std::string_view pair = u.substr(at, end - at);
        if (const auto eq = pair.find('='); eq != std::string_view::npos) {
            if (decode(pair.substr(0, eq)) == "password") r.params.push_back({at + eq + 1, end});
        }
        at = end + 1;
    }
}

// Where libpq's query starts in a postgresql:// URL (the byte after '?'),
// following conninfo_uri_parse_options: netlocs (bracketed IPv6 or up to
// ':' '/' '?' ','), ports, comma-separated, then /dbname up to '?'.
std::optional<std::size_t> libpq_query(std::string_view u, std::size_t p) {
    const auto stop = [&](std::string_view set) {
        while (p < u.size() && set.find(u[p]) == std::string_view::npos) ++p;
    };
    for (;;) {
        if (p < u.size() && u[p] == '[') {
            const auto close = u.find(']', p);
            if (close == std::string_view::npos) return std::nullopt;  // libpq refuses the URL
            p = close + 1;
        } else {
            stop(":/?,");
        }
        if (p < u.size() && u[p] == ':') {
            ++p;
            stop("/?,");
        }
        if (p < u.size() && u[p] == ',') {
            ++p;
            continue;
        }
        break;
    }
    if (p < u.size() && u[p] == '/') p = u.find('?', p);
    if (p < u.size() && u[p] == '?') return p + 1;
    return std::nullopt;
}

reading read(std::string_view u) {
    reading r;
    for (auto at = u.find("password"); at != std::string_view::npos; at = u.find("password", at + 1))
        r.word.push_back(at);
    // Anything that looks like a parameter's keyword, wherever it is: the
    // twin keeps them all, so that it has the same parameters for any reader.
    for (auto at = u.find_first_of("?&"); at != std::string_view::npos; at = u.find_first_of("?&", at + 1)) {
        const auto eq = u.find('=', at + 1);
        if (eq == std::string_view::npos) break;
        if (eq < u.find('&', at + 1)) r.keywords.push_back({at + 1, eq});
    }
    const auto colon = u.find(':');
    const auto authority = u.find("://");
    if (colon == std::string_view::npos || authority != colon) {
        // No "scheme://": user:password@host, keyword=value strings.
        const auto at = u.rfind('@');
        if (colon != std::string_view::npos && at != std::string_view::npos && colon < at)
            r.greedy = span{colon + 1, at};
        for (auto w : r.word) {
            if (u.substr(w + 8, 1) != "=") continue;
            auto end = u.find_first_of(" \t\n", w + 9);
            r.params.push_back({w + 9, end == std::string_view::npos ? u.size() : end});
        }
        return r;
    }
    const std::size_t start = authority + 3;
    if (const auto at = u.rfind('@'); at != std::string_view::npos && at >= start) {
        const auto c = u.find(':', start);
        if (c != std::string_view::npos && c < at) {
            r.greedy = span{c + 1, at};
            r.user = span{start, c};
        } else {
            r.user = span{start, at};
        }
    }
    if (starts_with(u, "postgresql://") || starts_with(u, "postgres://")) {
        r.k = kind::postgres;
        std::size_t p = start;
        while (p < u.size() && u[p] != '@' && u[p] != '/') ++p;
        if (p < u.size() && u[p] == '@') {
            const auto c = u.substr(start, p - start).find(':');
            if (c != std::string_view::npos) r.userinfo.push_back({start + c + 1, p});
            ++p;
        } else {
            p = start;
        }
        if (const auto q = libpq_query(u, p)) read_params(u, *q, r);
    } else if (starts_with(u, "mysql://") || starts_with(u, "mariadb://")) {
        r.k = kind::mysql;
        const auto q = u.find('?', start);
        const std::string_view before_query = u.substr(0, q);
        const auto slash = before_query.find('/', start);
        const auto at = before_query.substr(0, slash).rfind('@');
        if (at != std::string_view::npos && at >= start) {
            const auto c = u.substr(start, at - start).find(':');
            if (c != std::string_view::npos) r.userinfo.push_back({start + c + 1, at});
        }
        if (q != std::string_view::npos) read_params(u, q + 1, r);
    } else {
        r.k = kind::other_authority;
        if (const auto q = u.find('?', start); q != std::string_view::npos) read_params(u, q + 1, r);
    }
    return r;
}

// Another character of the same kind: '1'-'9', 'a'-'f', 'g'-'z' and their
// upper-case forms each rotate among themselves; everything else stays.
char other(char c) {
    auto rotate = [](char ch, char first, int count, int by) {
        return static_cast<char>(first + (ch - first + by) % count);
    };
    if (c >= '1' && c <= '9') return rotate(c, '1', 9, 4);
    if (c >= 'a' && c <= 'f') return rotate(c, 'a', 6, 3);
    if (c >= 'A' && c <= 'F') return rotate(c, 'A', 6, 3);
    if (c >= 'g' && c <= 'z') return rotate(c, 'g', 20, 7);
    if (c >= 'G' && c <= 'Z') return rotate(c, 'G', 20, 7);
    return c;
}

std::string twin_of(std::string_view u, const reading& r, const std::vector<span>& spans) {
    std::vector<bool> change(u.size(), false), keep(u.size(), false);
    for (const auto& s : spans)
        for (auto i = s.begin; i < s.end; ++i) change[i] = true;
    for (const auto& s : r.keywords)
        for (auto i = s.begin; i < s.end; ++i) keep[i] = true;
    for (auto w : r.word)
        for (auto i = w; i < w + 8; ++i) keep[i] = true;
    std::string out(u);
    for (std::size_t i = 0; i < out.size(); ++i)
        if (change[i] && !keep[i]) out[i] = other(out[i]);
    return out;
}

// parse_url's verdict: nullopt when accepted, else its message.
std::optional<std::string> refusal(std::string_view u, sqlock::detail::url_parts* parts = nullptr) {
    try {
        auto p = sqlock::detail::parse_url(u);
        if (parts) *parts = std::move(p);
        return std::nullopt;
    } catch (const config_error& e) {
        return std::string(e.what());
    }
}

std::string mysql_verdict(std::string_view u, std::string* password) {
    try {
        const auto m = sqlock::detail::parse_mysql_url(u);
        if (password) *password = m.password;
        return "user " + m.user + " host " + m.host + " port " + std::to_string(m.port) + " database " +
               m.database + " socket " + m.socket;
    } catch (const config_error& e) {
        return std::string("refused: ") + e.what();
    }
}

// The URL pg_dialect hands libpq: the URL with bounds added as parameters.
std::string libpq_conninfo(std::string u) {
    for (const char* key : {"connect_timeout", "tcp_user_timeout", "keepalives", "keepalives_idle",
                            "keepalives_interval", "keepalives_count", "application_name"}) {
        if (u.find(std::string(key) + "=") != std::string::npos) continue;
        u += (u.find('?') == std::string::npos ? "?" : "&") + std::string(key) + "=1";
    }
    return u;
}

void check_postgres(std::string_view u, const reading& r, const std::vector<std::string>& secrets) {
    // Every spelling of every password must be masked by scrub().
    std::vector<std::string> spellings;
    for (const auto* list : {&r.userinfo, &r.params})
        for (const auto& s : *list) {
            const std::string raw(u.substr(s.begin, s.end - s.begin));
            spellings.push_back(raw);
            spellings.push_back(decode(raw));
        }
    for (const auto& s : spellings) {
        if (s.empty() || s.find('*') != std::string::npos) continue;  // "***" may spell it
        const auto scrubbed = sqlock::detail::scrub(s, secrets);
        if (scrubbed.find(s) != std::string::npos)
            fail("a password is not among the secrets scrub() masks",
                 "password '" + printable(s) + "', scrubbed '" + printable(scrubbed) + "'");
    }
    if (u.find('\0') != std::string_view::npos) return;  // libpq would read a C string

    char* error = nullptr;
    PQconninfoOption* options = PQconninfoParse(libpq_conninfo(std::string(u)).c_str(), &error);
    if (options) {
        // The harness's reading against libpq's: the password it uses is
        // the last one written (parameters after the userinfo).
        // libpq ignores an empty userinfo password, not an empty parameter.
        auto text = [&](const span& s) { return decode(u.substr(s.begin, s.end - s.begin)); };
        std::optional<std::string> want;
        if (!r.params.empty()) want = text(r.params.back());
        else if (!r.userinfo.empty() && !text(r.userinfo.back()).empty()) want = text(r.userinfo.back());
        std::optional<std::string> got;
        for (auto* o = options; o->keyword; ++o)
            if (std::string_view(o->keyword) == "password" && o->val) got = o->val;
        PQconninfoFree(options);
        if (got != want)
            fail("the harness reads a different password than libpq",
                 "libpq: " + (got ? "'" + printable(*got) + "'" : std::string("none")) +
                     ", harness: " + (want ? "'" + printable(*want) + "'" : std::string("none")));
        return;
    }
    const std::string message = error ? error : "";
    if (error) PQfreemem(error);
    const auto scrubbed = sqlock::detail::scrub(message, secrets);
    for (const auto& s : spellings)
        if (!s.empty() && s.find('*') == std::string::npos && scrubbed.find(s) != std::string::npos)
            fail("libpq's error shows a password after scrub()",
                 "password '" + printable(s) + "' in '" + printable(scrubbed) + "'");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string_view u(reinterpret_cast<const char*>(data), size);
    g_url = u;
    g_twin = {};
    const reading r = read(u);

    std::vector<span> all = r.userinfo;  // what is secret: user names too for refusals
    all.insert(all.end(), r.params.begin(), r.params.end());
    if (r.greedy) all.push_back(*r.greedy);
    std::vector<span> with_user = all;
    if (r.user) with_user.push_back(*r.user);

    sqlock::detail::url_parts parts;
    const auto verdict = refusal(u, &parts);
    const std::string redacted = sqlock::detail::redact_url(u);

    // 1. parse_url's message, and 2. redact_url: the same for the twin.
    const std::string twin_a = twin_of(u, r, with_user);
    g_twin = twin_a;
    if (read(twin_a) == r) {
        const auto twin_verdict = refusal(twin_a);
        if (verdict.has_value() != twin_verdict.has_value())
            fail("parse_url accepts one of the twins only", verdict ? *verdict : *twin_verdict);
        if (verdict && *verdict != *twin_verdict)
            fail("parse_url's message depends on the password or user name",
                 "'" + printable(*verdict) + "' vs '" + printable(*twin_verdict) + "'");
    }
    // redact_url only ever sees URLs parse_url accepted (client_impl), and a
    // sqlite: path without "//" holds no password. For those URLs the
    // password is what the driver reads, no more: the rest of the URL
    // (postgresql://db:5432/app?user=me@corp, whose '@' ends no userinfo)
    // must show, since the redacted URL names the database in messages and
    // in dialect::tables(), which keys the process's wake-up queues.
    std::vector<span> real = r.userinfo;
    real.insert(real.end(), r.params.begin(), r.params.end());
    const std::string twin_b = twin_of(u, r, real);
    g_twin = twin_b;
    if (!verdict && r.k != kind::no_authority && read(twin_b) == r) {
        const std::string twin_redacted = sqlock::detail::redact_url(twin_b);
        if (redacted != twin_redacted)
            fail("redact_url shows some of a password",
                 "'" + printable(redacted) + "' vs '" + printable(twin_redacted) + "'");
    }
    if (verdict) return 0;  // refused: nothing further reaches a driver

    // 3. mysql://: what Connector/C++ is given, and parse_mysql_url's message.
    const std::string twin_c = twin_of(u, r, real);
    g_twin = twin_c;
    if (parts.scheme == "mysql") {
        std::string password;
        const auto mine = mysql_verdict(u, &password);
        if (read(twin_c) == r) {
            const auto theirs = mysql_verdict(twin_c, nullptr);
            if (mine != theirs)
                fail("parse_mysql_url depends on the password", "'" + printable(mine) + "' vs '" + printable(theirs) + "'");
        }
        if (!starts_with(mine, "refused: ")) {
            const std::string want =
                r.userinfo.empty() ? "" : decode(u.substr(r.userinfo[0].begin, r.userinfo[0].end - r.userinfo[0].begin));
            if (password != want)
                fail("parse_mysql_url reads a different password than the harness",
                     "'" + printable(password) + "' vs '" + printable(want) + "'");
        }
        // Its secrets cover the password Connector/C++ gets.
        if (!password.empty() && password.find('*') == std::string::npos &&
            sqlock::detail::scrub(password, parts.secrets).find(password) != std::string::npos)
            fail("the mysql password is not among the secrets", printable(password));
    } else if (parts.scheme == "postgres") {
        check_postgres(u, r, parts.secrets);
    } else if (parts.scheme == "sqlite") {
#ifdef SQLOCK_FUZZ_SQLITE
        try {
            (void)sqlock::detail::parse_sqlite_path(u);
        } catch (const config_error&) {
        }
#endif
    } else {
        fail("parse_url accepted an unknown scheme", parts.scheme);
    }
    return 0;
}
