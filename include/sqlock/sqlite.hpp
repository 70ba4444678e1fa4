#pragma once
// Fenced writes for applications that use SQLite through its C API. Needs no
// SQLite header: the handle is the one your own code opened with sqlite3.h.

#include <sqlock/lease.hpp>

struct sqlite3;  // sqlite3.h: typedef struct sqlite3 sqlite3

namespace sqlock::sqlite {

// Fences the write transaction open on db (same database file as the lease's
// client): takes SQLite's write lock now, then checks by the database clock
// that `held` still holds its key with its token. SQLite has one writer, so
// no grant of the key can happen before this transaction commits or rolls
// back: what it writes commits while the lease is held, or not at all.
// Begin the transaction with BEGIN IMMEDIATE (a deferred transaction that has
// already read may fail here with SQLITE_BUSY).
// Throws lease_lost_error when the lease is not held (roll back then),
// config_error when no transaction is open, the lease is not a SQLite one or
// it is a semaphore permit (which fences nothing, as lease::fence_sql says),
// db_error when SQLite fails. Not thread-safe for one db handle, like SQLite.
void fence(::sqlite3* db, const lease& held);

}  // namespace sqlock::sqlite
