// The fence helper the library carries (SQLite's: the others are header-only
// in sqlock/postgres.hpp and sqlock/mysql.hpp), and how it reaches a lease's
// dialect.

#include "core/client_impl.hpp"

#include <sqlock/errors.hpp>
#include <sqlock/sqlite.hpp>

namespace sqlock {

namespace detail {

const grant& lease_access::of(const lease& l) {
    if (!l.grant_) throw lease_lost_error("this lease was moved from: it holds nothing to fence with");
    return *l.grant_;
}

}  // namespace detail

namespace sqlite {

void fence(::sqlite3* db, const lease& held) {
    const auto& g = detail::lease_access::of(held);
    g.client->dialect().fence_native(db, g.key, g.token);
}

}  // namespace sqlite

}  // namespace sqlock
