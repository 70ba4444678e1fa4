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

const grant& lease_access::fenceable(const lease& l) {
    const auto& g = of(l);
    if (g.kind == 'P')
        throw config_error("a semaphore permit has no SQL fence: check lost() or the stop token, or guard the "
                           "resource with a lock");
    return g;
}

}  // namespace detail

namespace sqlite {

void fence(::sqlite3* db, const lease& held) {
    const auto& g = detail::lease_access::fenceable(held);
    g.client->dialect().fence_native(db, g.key, g.token);
}

}  // namespace sqlite

}  // namespace sqlock
