#pragma once
// Database URLs as the core sees them: which backend, the text for the
// dialect to parse, and the secrets it holds. Each dialect parses its own URL
// further (the PostgreSQL one is handed to libpq as it is).

#include <string>
#include <string_view>
#include <vector>

namespace sqlock::detail {

struct url_parts {
    std::string scheme;  // "postgres", "mysql" or "sqlite" (aliases folded)
    std::string raw;     // the URL as given
    // Every spelling of a password the URL holds (as written and decoded, in
    // the userinfo or a password= parameter), for scrubbing driver messages.
    std::vector<std::string> secrets;
};

// Throws config_error with a message that says what to fix and that never
// contains the URL's user name or password.
url_parts parse_url(std::string_view url);

// The URL with any password replaced by "***", for messages and logs; the
// rest (host, port, database, other parameters) as given. Errs on the side of
// masking too much when parse_url would refuse the URL.
std::string redact_url(std::string_view url);


}  // namespace sqlock::detail
