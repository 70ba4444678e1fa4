// Which backend a URL opens: make_dialect, the one place where a backend's
// name picks code (the core and the CLI ask capabilities), and the factories
// for the backends this build leaves out: opening such a URL says which CMake
// option brings the backend in.

#include "dialects/dialect.hpp"

#include <sqlock/errors.hpp>

namespace sqlock::detail {

std::unique_ptr<dialect> make_dialect(std::string_view scheme, const dialect_context& ctx) {
    if (scheme == "postgres") return make_postgres(ctx);
    if (scheme == "mysql") return make_mysql(ctx);
    return make_sqlite(ctx);
}

#ifndef SQLOCK_HAVE_POSTGRES
std::unique_ptr<dialect> make_postgres(const dialect_context&) {
    throw config_error("this build of sqlock has no PostgreSQL support: rebuild with -DSQLOCK_WITH_POSTGRES=ON");
}
#endif

#ifndef SQLOCK_HAVE_MYSQL
std::unique_ptr<dialect> make_mysql(const dialect_context&) {
    throw config_error("this build of sqlock has no MySQL/MariaDB support: rebuild with -DSQLOCK_WITH_MYSQL=ON");
}
#endif

#ifndef SQLOCK_HAVE_SQLITE
std::unique_ptr<dialect> make_sqlite(const dialect_context&) {
    throw config_error("this build of sqlock has no SQLite support: rebuild with -DSQLOCK_WITH_SQLITE=ON");
}
#endif

}  // namespace sqlock::detail
