#pragma once
// Database URL parsing. Only the pieces each dialect needs; the PostgreSQL URL
// is handed to libpq untouched so that every libpq URI rule applies.

#include <map>
#include <string>
#include <string_view>

namespace sqlock::detail {

struct url_parts {
    std::string scheme;  // "postgres", "mysql" or "sqlite" (aliases folded)
    std::string raw;     // the URL as given
    std::string user, password, host, database, socket;  // mysql
    int port = 0;                                         // mysql; 0: default
    std::map<std::string, std::string> params;            // mysql query parameters
    std::string path;                                     // sqlite file path
};

// Throws config_error with a message that says what to fix.
url_parts parse_url(std::string_view url);

// The URL with any password replaced by "***", for messages and logs.
std::string redact_url(std::string_view url);

// Percent-decodes a URL component; throws config_error on a bad escape.
std::string percent_decode(std::string_view s);

}  // namespace sqlock::detail
