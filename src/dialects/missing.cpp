// Factories for the backends this build leaves out: opening such a URL says
// which CMake option brings the backend in.

#include "core/url.hpp"
#include "dialects/dialect.hpp"

#include <sqlock/errors.hpp>
#include <sqlock/lease.hpp>

namespace sqlock::detail {

#ifndef SQLOCK_HAVE_POSTGRES
std::unique_ptr<dialect> make_postgres(const url_parts&, const dialect_context&) {
    throw config_error("this build of sqlock has no PostgreSQL support: rebuild with -DSQLOCK_WITH_POSTGRES=ON");
}
#endif

#ifndef SQLOCK_HAVE_MYSQL
std::unique_ptr<dialect> make_mysql(const url_parts&, const dialect_context&) {
    throw config_error("this build of sqlock has no MySQL/MariaDB support: rebuild with -DSQLOCK_WITH_MYSQL=ON");
}
#endif

#ifndef SQLOCK_HAVE_SQLITE
std::unique_ptr<dialect> make_sqlite(const url_parts&, const dialect_context&) {
    throw config_error("this build of sqlock has no SQLite support: rebuild with -DSQLOCK_WITH_SQLITE=ON");
}
#endif

}  // namespace sqlock::detail

#ifndef SQLOCK_HAVE_SQLITE
struct sqlite3;  // sqlite3.h: typedef struct sqlite3 sqlite3
namespace sqlock::sqlite {
void fence(sqlite3*, const lease&) {
    throw config_error("this build of sqlock has no SQLite support: rebuild with -DSQLOCK_WITH_SQLITE=ON");
}
}  // namespace sqlock::sqlite
#endif
