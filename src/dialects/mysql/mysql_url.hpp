#pragma once
// mysql:// URLs, parsed for Connector/C++ (which takes the parts, not a URL).

#include <string>
#include <string_view>

namespace sqlock::detail {

struct mysql_url {
    std::string user, password, host, database, socket;
    int port = 0;  // 0: the default, 3306
};

// mysql://[user[:password]@]host[:port]/database[?socket=/path] (also
// mariadb://), components percent-decoded. Throws config_error saying what to
// fix; the message never shows the user name or password.
mysql_url parse_mysql_url(std::string_view url);

}  // namespace sqlock::detail
