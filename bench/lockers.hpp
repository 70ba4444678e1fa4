#pragma once
// The contenders: every way of taking a named lock the bench compares, each
// behind one small interface, `locker`. A locker is one worker's handle with
// connections of its own; workers never share one (but sqlock's handles may
// share a client: locker::share).
//
//   sqlock      the library, one client per locker, in one mode (and
//               optionally with durability::relaxed); its other primitives
//               as sqlock-shared (a reader), sqlock-permit (a permit of a
//               semaphore of 1 named by the key) and sqlock-set3 (KEY#1,
//               KEY#2 and KEY#3 with acquire_all), for the primitives workload
//   raw         the statements sqlock sends for that mode, read from
//               sql/<dialect>/, sent straight through the driver: the floor
//               for the library's own overhead (select_for_update ends its
//               transaction with a bare ROLLBACK, waking no waiter)
//   native      the server's named locks: pg_try_advisory_lock/pg_advisory_lock
//               + pg_advisory_unlock, GET_LOCK + RELEASE_LOCK
//   shedlock    ShedLock's SQL: INSERT the lock row the first time a name is
//               used, then UPDATE … WHERE lock_until <= now; release sets
//               lock_until = now. Client clock, one statement per call.
//   spring      Spring Integration's DefaultLockRepository (JdbcLockRegistry):
//               in a READ COMMITTED transaction, UPDATE … WHERE client_id = me
//               OR created_date < now - ttl, else INSERT; release DELETEs.
//   redis       SET key owner NX PX lease; release and renewal by
//               compare-and-delete / compare-and-pexpire Lua scripts (EVALSHA)
//   ceiling     not a product: the shape sqlock's conditional_update grant
//               would have on PostgreSQL with the fencing counter kept in the
//               lock row (the uncontended workload only), on a table of its
//               own: one statement that checks the waiter table, takes the
//               row and bumps its counter, returning the token; released with
//               sqlock's own release statement (the wake-up probe included,
//               not waiting for the disk). It measures what moving the counter
//               would buy. (MariaDB's grant keeps its counter in the lock row
//               while nobody waits since schema 14: measured as sqlock there.)
//
// Contenders without a way to wait (raw, shedlock, spring, redis) wait by
// calling try_lock every millisecond; sqlock waits with acquire() (waiter
// rows, NOTIFY on PostgreSQL), the native locks block in the server.

#include "common.hpp"

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace bench {

// Where the contenders connect. Children get the same on their command line.
struct target {
    std::string postgres, mysql, sqlite, redis, redis_aof;  // URLs; SQLite: a file path; Redis: host:port
    std::string prefix;   // of sqlock's tables and of the bench's own (shedlock, int_lock)
    std::string sql_dir;  // the library's sql/ directory
};

enum class family { sqlock, raw, native, shedlock, spring, redis, ceiling };

struct contender {
    std::string id;       // "postgres.sqlock.conditional_update", "redis-aof.redis", ...
    std::string backend;  // "postgres", "mysql", "sqlite", "redis", "redis-aof"
    family kind = family::sqlock;
    std::string mode;     // sqlock and raw: the sqlock mode
    std::string primitive;  // sqlock: "" (an exclusive lock), "shared", "permit" or "set3"
    bool relaxed = false;  // sqlock and raw: durability::relaxed (or the same session setting)
    std::string label;    // for tables and charts

    // Parses an id; throws std::invalid_argument naming what is wrong.
    static contender parse(const std::string& id);
    bool waits_natively() const { return kind == family::sqlock || kind == family::native; }
};

// The backend's name in tables: "PostgreSQL", "MariaDB", "SQLite", "Redis".
std::string backend_title(const std::string& backend);

struct locker_settings {
    std::chrono::milliseconds lease{30'000};
    bool fair = false;  // sqlock: fair waiting in lock()
};

class locker {
public:
    virtual ~locker() = default;
    // One attempt: true when this locker now holds `key`.
    virtual bool try_lock(const std::string& key) = 0;
    // Waits for `key` until `deadline` (monotonic ns): false if it passed.
    virtual bool lock(const std::string& key, std::int64_t deadline);
    virtual void unlock(const std::string& key) = 0;
    // Extends the lease of a held key by the contender's own per-lease
    // statement; false when the key was not held any more.
    virtual bool renew(const std::string& key) = 0;
    // Whether held keys need renew() at all (native locks live with the session).
    virtual bool needs_renewal() const { return true; }
    // Statements (Redis: commands) sent so far.
    virtual std::uint64_t statements() const = 0;
    // Another worker's handle on this one's connections, for contenders an
    // application shares between its threads (sqlock: one client per
    // process); null for the others, whose workers each open their own.
    // Statements are counted by the first handle only.
    virtual std::unique_ptr<locker> share() { return nullptr; }
    // The fencing token of the last grant, or 0 for contenders without one.
    virtual std::int64_t token() const { return 0; }
};

// A hand-written contender: counts what it sends and keeps its last token.
class counted_locker : public locker {
public:
    std::uint64_t statements() const override { return statements_; }
    std::int64_t token() const override { return token_; }

protected:
    std::uint64_t statements_ = 0;
    std::int64_t token_ = 0;
};

std::unique_ptr<locker> open_locker(const contender& c, const target& t, const locker_settings& s);

// Every table a run creates under its prefix, dependents first: the order
// the drop at the end follows on every backend.
inline constexpr const char* bench_tables[] = {"ceiling", "shedlock", "int_lock", "waiters",
                                               "job_runs", "locks",    "fences",   "schema_version"};

// Creates the bench's own tables (ShedLock's, Spring's) beside sqlock's, and
// drops everything under the prefix at the end.
void create_tables(const std::string& backend, const target& t);
void drop_tables(const std::string& backend, const target& t);

// One markdown line per fact about the server (version, durability settings).
std::vector<std::string> server_facts(const std::string& backend, const target& t);

// Per backend, defined in lockers_<backend>.cpp (absent from builds without it).
std::unique_ptr<locker> open_sqlock_locker(const contender& c, const target& t, const locker_settings& s);
std::unique_ptr<locker> open_postgres_locker(const contender& c, const target& t, const locker_settings& s);
std::unique_ptr<locker> open_mysql_locker(const contender& c, const target& t, const locker_settings& s);
std::unique_ptr<locker> open_sqlite_locker(const contender& c, const target& t, const locker_settings& s);
std::unique_ptr<locker> open_redis_locker(const contender& c, const target& t, const locker_settings& s);
void postgres_tables(const target& t, bool create);
void mysql_tables(const target& t, bool create);
void sqlite_tables(const target& t, bool create);
void redis_flush(const target& t, const std::string& backend);
std::vector<std::string> postgres_facts(const target& t);
std::vector<std::string> mysql_facts(const target& t);
std::vector<std::string> sqlite_facts(const target& t);
std::vector<std::string> redis_facts(const target& t, const std::string& backend);

// The client's clock, UTC, plus `offset_ms`: "2026-11-21 10:00:00.123", the
// timestamps ShedLock and Spring bind (both read the application's clock).
std::string client_time(std::int64_t offset_ms);

// The spring contender's LOCK_KEY: Spring stores UUIDConverter's UUID of the key.
std::string uuid_of(const std::string& key);

// The grant statements' queue parameters for an acquisition that is not fair
// and holds no ticket (src/dialects/dialect.hpp).
constexpr std::int64_t no_ticket = INT64_MAX;
constexpr std::int64_t not_fair = INT64_MIN;

}  // namespace bench
