#pragma once
// Database URL parsing. Only the pieces each dialect needs; the PostgreSQL URL
// is handed to libpq untouched so that every libpq URI rule applies.

#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace sqlock::detail {

struct url_parts {
    std::string scheme;  // "postgres", "mysql" or "sqlite" (aliases folded)
    std::string raw;     // the URL as given
    std::string user, password, host, database, socket;  // mysql
    int port = 0;                                         // mysql; 0: default
    std::map<std::string, std::string> params;            // mysql query parameters
    std::string path;                                     // sqlite file path
    // Every spelling of a password the URL holds (as written and decoded, in
    // the userinfo or a password= parameter), for scrubbing driver messages.
    std::vector<std::string> secrets;
};

// Throws config_error with a message that says what to fix and that never
// contains the URL's user name or password.
url_parts parse_url(std::string_view url);

// The URL with any password replaced by "***", for messages and logs. Errs on
// the side of masking too much when the URL is malformed.
std::string redact_url(std::string_view url);

// text with every occurrence of every secret replaced by "***": for messages
// that carry a driver's own words, which may quote parts of a URL.
std::string scrub(std::string text, const std::vector<std::string>& secrets);

// Percent-decodes a URL component; throws config_error on a bad escape.
std::string percent_decode(std::string_view s);

}  // namespace sqlock::detail
