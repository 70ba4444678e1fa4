#pragma once
// Fenced writes for applications that use MySQL or MariaDB through
// Connector/C++ 1.1 (the cppconn API). Optional: include it only if you link
// mysqlcppconn yourself.

#include <sqlock/errors.hpp>
#include <sqlock/lease.hpp>

#include <cppconn/connection.h>
#include <cppconn/exception.h>
#include <cppconn/prepared_statement.h>
#include <cppconn/resultset.h>

#include <memory>
#include <string>

namespace sqlock::mysql {

// Fences the transaction open on conn (autocommit off): call it first in a
// transaction that writes what the lease protects. It checks by database time
// that `held` still holds its key with its token, and share-locks the key's
// fence row, so no other owner can be granted the key until the transaction
// ends: what it writes commits while the lease is held, or not at all.
// Throws lease_lost_error when the lease is not held (then roll back),
// config_error when autocommit is on (a fence would end with its own
// statement). Other failures leave as sql::SQLException. Under REPEATABLE READ
// (MySQL's default), call it before the transaction's first query (the lease
// row is read from the transaction's snapshot). Thread-safety is conn's.
inline void fence(sql::Connection& conn, const lease& held) {
    // First what every fence refuses, as lease::fence_sql() says it: a
    // moved-from (or never granted) lease is lease_lost_error, a permit
    // config_error; only then a lease of another database.
    const std::string sql = held.fence_sql();
    if (held.dialect() != "mysql")
        throw config_error("sqlock::mysql::fence needs a lease from a MySQL client, not " +
                           std::string(held.dialect()));
    if (conn.getAutoCommit())
        throw config_error("sqlock::mysql::fence needs an open transaction: call setAutoCommit(false) first");
    std::unique_ptr<sql::PreparedStatement> ps(conn.prepareStatement(sql));
    ps->setString(1, held.key());
    ps->setInt64(2, held.token());
    try {
        std::unique_ptr<sql::ResultSet> rs(ps->executeQuery());
    } catch (const sql::SQLException& e) {
        const std::string msg = e.what();
        if (e.getErrorCode() == 1644 && msg.rfind("sqlock:", 0) == 0)
            throw lease_lost_error(msg + " (key '" + held.key() + "', token " + std::to_string(held.token()) + ")");
        throw;
    }
}

}  // namespace sqlock::mysql
