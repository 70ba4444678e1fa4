#pragma once
// Fenced writes for applications that use PostgreSQL through libpqxx 6.4.
// Optional: include it only if you link libpqxx yourself.

#include <sqlock/errors.hpp>
#include <sqlock/lease.hpp>

#include <pqxx/pqxx>

#include <string>

namespace sqlock::postgres {

// Fences tx: call it first in a transaction that writes what the lease
// protects. It checks by database time that `held` still holds its key with
// its token, and share-locks the key's fence row, so no other owner can be
// granted the key until tx ends: what tx writes commits while the lease is
// held, or not at all. Throws lease_lost_error when the lease is not held;
// PostgreSQL has then aborted tx, so let it roll back. Other failures leave
// as pqxx exceptions, as for any statement of tx. Under REPEATABLE READ or
// SERIALIZABLE, call it before tx's first query (the lease row is read from
// tx's snapshot). Thread-safety is tx's.
inline void fence(pqxx::transaction_base& tx, const lease& held) {
    // First what every fence refuses, as lease::fence_sql() says it: a
    // moved-from (or never granted) lease is lease_lost_error, a permit
    // config_error; only then a lease of another database.
    const std::string sql = held.fence_sql();
    if (held.dialect() != "postgres")
        throw config_error("sqlock::postgres::fence needs a lease from a PostgreSQL client, not " +
                           std::string(held.dialect()));
    try {
        tx.exec_params(sql, held.key(), held.token());
    } catch (const pqxx::sql_error& e) {
        if (e.sqlstate() != "SQ001") throw;
        std::string msg = e.what();
        if (auto at = msg.find("sqlock: "); at != std::string::npos) msg.erase(0, at);
        while (!msg.empty() && (msg.back() == '\n' || msg.back() == ' ')) msg.pop_back();
        throw lease_lost_error(msg);
    }
}

}  // namespace sqlock::postgres
