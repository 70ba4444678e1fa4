#pragma once
// The backend contract: operations on sqlock's tables, one implementation per
// database in src/dialects/<name>/ (the only files that include a driver
// header). The core never asks which backend it talks to: what differs is
// said here, as operations and capabilities. Dialects depend on nothing of
// the core; what they share is in src/dialects/common/.

#include "dialects/common/sql_library.hpp"

#include <sqlock/client.hpp>
#include <sqlock/options.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace sqlock::detail {

// Everything a dialect needs from the client. Outlives the dialect.
struct dialect_context {
    std::string url;           // as given; the dialect parses it (config_error when malformed)
    std::string redacted_url;  // for messages: the URL with its password masked
    // The URL's password in every spelling: driver messages (which may quote
    // what they could not parse) pass through scrub() with these.
    std::vector<std::string> secrets;
    client_options options;
    std::atomic<std::uint64_t>* statements = nullptr;  // bumped once per statement sent
};

inline constexpr std::int64_t no_ticket = std::numeric_limits<std::int64_t>::max();
inline constexpr std::int64_t not_fair = std::numeric_limits<std::int64_t>::min();

struct grant_request {
    std::string_view key;
    std::string_view owner;
    sqlock::mode mode;
    std::int64_t lease_ms;
    std::string_view holder;
    std::string_view note;
    bool want_remaining;  // on contention, also report the holder's remaining lease
    // Queue position: granted only if no live fair waiter is ahead (higher
    // priority, then lower ticket). A granted ticket leaves the queue in the
    // same transaction. Non-fair requests pass not_fair and no_ticket.
    std::int64_t ticket = no_ticket;
    std::int64_t priority = not_fair;
};

struct grant_result {
    std::optional<std::int64_t> token;         // set when granted
    std::optional<std::int64_t> remaining_ms;  // holder's remaining lease, when known
};

struct waiter_request {
    std::string_view key;
    char kind = 'X';  // what it waits for: 'X' exclusive, 'S' shared, 'P' a permit
    std::string_view owner;
    bool fair;
    int priority;
    std::int64_t lease_ms;
    std::string_view listener;  // NOTIFY channel ("" when the dialect has none)
    std::string_view holder;
};

struct heartbeat {
    std::int64_t ticket;
    std::int64_t lease_ms;
};

struct renewal {
    std::string_view key;
    std::string_view owner;
    std::int64_t lease_ms;
    char kind = 'X';  // 'X': a lease in sqlock_locks; 'S', 'P': a row of sqlock_holders
};

// A shared grant ('S': a reader of a lock key) or a semaphore permit ('P':
// key is the semaphore's name). Queue position as in grant_request.
struct holder_request {
    char kind;
    std::string_view key;
    std::string_view owner;
    std::int64_t permits;  // 'P': the limit when the semaphore is new
    std::int64_t lease_ms;
    std::string_view holder;
    std::string_view note;
    std::int64_t ticket = no_ticket;
    std::int64_t priority = not_fair;
};

// A live shared holder or permit (client::holders).
struct holder_row {
    char kind;
    std::string key, owner;
    std::int64_t token;
    std::int64_t remaining_ms;
    std::string holder, note;
    std::int64_t permits;  // 'P': the semaphore's limit; 0 for 'S'
};

// Result of an owner-checked renewal of one lease.
enum class renew_result {
    renewed,     // extended by its length, by database time
    not_held,    // the row is not this owner's live lease any more: lost
    row_locked,  // another transaction held the row past the lock wait: try again
};

// A row of the job ledger. Times are milliseconds since the Unix epoch by
// the database clock; 0 when unset.
struct job_row {
    std::string job, run_key;
    std::string status;  // "running", "succeeded" or "failed" ("" when there is no row)
    std::string owner, holder;
    std::int64_t token = 0;
    int attempts = 0;
    std::int64_t started_ms = 0, finished_ms = 0, retry_ms = 0;
    std::string result, last_error;
    std::int64_t now_ms = 0;  // the database clock when the row was read
};

// A ledger write. Strings left empty are stored as NULL.
struct job_write {
    std::string_view job, run_key, status, owner, holder;
    std::int64_t token = 0;
    int attempts = 0;
    bool starting = false;        // started_at := now, finished_at := NULL; else finished_at := now
    std::int64_t retry_in_ms = -1;  // retry_at := now + this; negative: NULL
    std::string_view result, last_error;
};

// The ledger statements available inside a fenced transaction.
class ledger {
public:
    virtual ~ledger() = default;
    // The run's row, locked until the transaction ends.
    virtual std::optional<job_row> read(std::string_view job, std::string_view run_key) = 0;
    // Inserts or overwrites the run's row.
    virtual void write(const job_write& w) = 0;
};

// Whether a fence found the lease held; when not, why.
struct fence_result {
    bool held = false;
    std::string reason;
};

// What select_for_update needs of a backend with row locks. The row lock
// itself is held in a transaction on a session of its own (the pinned one);
// ensure_row and bump_token run on another, so that they commit at once.
class row_lock_ops {
public:
    virtual ~row_lock_ops() = default;

    enum class state { locked, busy, missing };
    struct attempt {
        row_lock_ops::state state = state::busy;
        std::optional<std::int64_t> remaining_ms;  // busy: the lease holder's remaining lease, when known
        // locked: the key's fencing counter as the transaction read it once
        // the row was locked (0: never granted), for bump_token.
        std::int64_t counter = 0;
    };
    // Opens a transaction and locks the key's row without waiting, but only
    // when no live lease holds it and no live fair waiter is ahead (ticket and
    // priority as in grant_request). `locked`: the transaction stays open
    // until end_row_lock(), and the server ends it if it stays idle for
    // lease_ms (so a frozen holder cannot keep the key). `busy` and `missing`
    // leave no transaction open.
    virtual attempt lock_row(std::string_view key, std::int64_t lease_ms, std::int64_t ticket,
                             std::int64_t priority) = 0;
    // Ends the transaction opened by lock_row (rolling it back).
    virtual void end_row_lock() = 0;
    // A holder's release: ends the transaction as end_row_lock() does, and
    // wakes the client whose live waiter heads the key's queue, as a release
    // of a lease does: as the row lock ends where the dialect can, else at
    // once after it in the same round trip; never before (a waiter that is a
    // select_for_update request takes no lock wait, and would find the row
    // still locked). Throws only when ending the transaction failed; the
    // wake-up is a hint (its waiter polls without it).
    virtual void release_row_lock(std::string_view key) = 0;
    // Creates the key's row (free) if it does not exist yet.
    virtual void ensure_row(std::string_view key) = 0;
    // Bumps and returns the key's fencing counter, marking it as held by a row
    // lock. Called after lock_row locked the key's row on another session,
    // with the counter it read: only that counter is bumped, since the row
    // lock may have ended meanwhile and another client been granted the key
    // (its token must stay the latest). Empty, nothing bumped, when the
    // counter moved, or when the fence row stayed locked past the row lock
    // timeout (an earlier holder's fenced transaction is still open):
    // contention either way.
    virtual std::optional<std::int64_t> bump_token(std::string_view key, std::int64_t counter) = 0;
    // The key's fencing counter as committed (0: never granted). A holder's
    // ping: it proves the connection alive, and a token other than its own
    // means the lock was broken (force_release).
    virtual std::int64_t fence_token(std::string_view key) = 0;
};

// One connection. Not thread-safe: the pool lends it to one thread at a time.
// Driver failures leave as sqlock errors: connection_error when the connection
// is unusable (the pool then drops it), schema_error for missing tables,
// db_error otherwise. Lock-wait timeouts and NOWAIT refusals are contention,
// reported through results, never thrown. A dialect's session class declares
// its overrides by including session_operations.inc (and, with row locks,
// row_lock_operations.inc): an operation added here is added there too.
class session {
public:
    virtual ~session() = default;

    // Grants the key in a lease mode, bumping its fencing counter in the same
    // transaction. Admits a free row, an expired row, or a row of this owner.
    virtual grant_result grant(const grant_request& request) = 0;
    // Owner-checked release: deletes the row (unique_insert) or clears its owner.
    virtual bool release(std::string_view key, std::string_view owner, sqlock::mode mode) = 0;
    // Owner-checked renewal of an unexpired lease, by database time. wait:
    // wait for a locked row up to the row lock timeout (the application's
    // renew()); otherwise a locked row is row_locked at once (the watchdog).
    virtual renew_result renew(std::string_view key, std::string_view owner, std::int64_t lease_ms, bool wait) = 0;
    // The watchdog's renewal: every lease of the batch in one statement.
    // Returns, per entry, whether it was renewed in that statement. An entry
    // that was not is either not held any more or its row was locked by
    // another transaction (skipped, or the statement gave up on it): the
    // caller renews it alone to find out, so one locked row never costs the
    // other leases of the batch.
    virtual std::vector<bool> renew_batch(const std::vector<renewal>& batch) = 0;
    // Bounds the client-side waits of the statements that follow (a silent
    // network, a busy SQLite file) by `bound`, where the driver allows it;
    // zero restores the client's statement timeout. The watchdog lowers it
    // when a later answer would come after a lease's deadline anyway.
    virtual void bound_waits(std::chrono::milliseconds bound) = 0;

    // The sweeper: deletes up to `limit` expired unique_insert rows (skipping
    // rows another transaction has locked; the delete re-checks expiry), dead
    // waiter rows, and ledger rows started more than retention_ms ago.
    // Each returns the count.
    virtual std::size_t sweep(std::size_t limit) = 0;
    virtual std::size_t sweep_waiters(std::size_t limit) = 0;
    virtual std::size_t sweep_jobs(std::int64_t retention_ms, std::size_t limit) = 0;

    // The waiter queue: take a ticket, leave the queue, heartbeat tickets
    // (returns, per entry, whether the row was still live and is renewed).
    virtual std::int64_t enqueue(const waiter_request& request) = 0;
    virtual void dequeue(std::int64_t ticket) = 0;
    virtual std::vector<bool> beat_waiters(const std::vector<heartbeat>& batch) = 0;

    // Shared holders and semaphore permits (migration 0006; docs/design.md,
    // "Shared locks and semaphores"). A grant takes the key's row for the
    // readers ('S') or counts live permits under the semaphore's row lock
    // ('P'), both in one transaction; the token when granted, else the
    // remaining lease that bounds the caller's backoff.
    virtual grant_result grant_holder(const holder_request& request) = 0;
    // Owner-checked release; true when the holder's lease was still live.
    virtual bool release_holder(char kind, std::string_view key, std::string_view owner) = 0;
    // The watchdog's renewal of holders (every entry's kind 'S' or 'P'), as
    // renew_batch: per entry, whether it was renewed by this call.
    virtual std::vector<bool> renew_holders(const std::vector<renewal>& batch) = 0;
    // Whether the holder's lease is live by database time.
    virtual bool holder_live(char kind, std::string_view key, std::string_view owner) = 0;
    // Creates the semaphore or changes its limit.
    virtual void set_permits(std::string_view name, std::int64_t permits) = 0;
    virtual std::vector<holder_row> holders(std::string_view prefix, std::size_t limit) = 0;
    // Deletes up to `limit` expired holder rows.
    virtual std::size_t sweep_holders(std::size_t limit) = 0;

    // select_for_update on this session; null when the backend has no row
    // locks (then the dialect's capabilities say so too).
    virtual row_lock_ops* row_locks() { return nullptr; }

    // Keys starting with `prefix`, sorted and after `after`, that may be held
    // right now (a live lease, or a latest grant by select_for_update, which
    // may have ended since); inspect() tells.
    virtual std::vector<std::string> held_keys(std::string_view prefix, std::string_view after,
                                               std::size_t limit) = 0;
    // Live waiters of keys starting with `prefix`, per key in grant order.
    virtual std::vector<waiter_info> waiters(std::string_view prefix, std::size_t limit) = 0;
    // Break-glass release in one transaction: bumps the key's fencing counter
    // and ends its live lease row. The new token; empty when never granted.
    virtual std::optional<std::int64_t> force_release(std::string_view key) = 0;
    virtual lock_info inspect(std::string_view key) = 0;
    // Counts over every key (sql/<dialect>/gauges.sql) and, when queue_limit
    // is not 0, the longest queues (gauge_queues.sql).
    virtual database_gauges gauges(std::size_t queue_limit) = 0;

    // Runs body in one transaction that first fences (key, token): it checks
    // by database time that the lease with that token holds the key, and
    // share-locks the key's fence row so that no grant of the key can happen
    // before the transaction ends. body returns true to commit, false to roll
    // back. When the lease is not held, body does not run.
    virtual fence_result fenced(std::string_view key, std::int64_t token,
                                const std::function<bool(ledger&)>& body) = 0;
    // The run's ledger row, unlocked; its now_ms is set even when absent
    // (then the row is empty with status "").
    virtual job_row job_read(std::string_view job, std::string_view run_key) = 0;
    // Gives a lost attempt back, without a fence (the lease is gone): when the
    // run's row is still the running claim of this owner and token, it becomes
    // failed with a retry at once and one attempt fewer, and last_error. A row
    // claimed or recorded since is left alone. True when the row changed.
    virtual bool job_abandon(std::string_view job, std::string_view run_key, std::string_view owner,
                             std::int64_t token, std::string_view error) = 0;
    // Ledger rows, newest first: of one job (exact), or of every job whose
    // name starts with `job` (not exact; "" for every job).
    virtual std::vector<job_row> job_list(std::string_view job, bool exact, std::size_t limit) = 0;

    // The database clock, in milliseconds since the Unix epoch.
    virtual std::int64_t now_ms() = 0;
    virtual int schema_version() = 0;
    // Applies the dialect's migrations newer than the current version, under a
    // lock that serialises concurrent migrate() calls.
    virtual void migrate() = 0;
};

// What a notifier's wait heard.
enum class heard {
    nothing,  // no notification before the timeout
    ring,     // at least one notification arrived
    // Probably one: worth waking the waiters at once, before it is confirmed.
    // The next wait confirms it (ring, at once) or finds nothing new.
    hint,
};

// A connection that waits for wake-up notifications (PostgreSQL LISTEN).
class notifier {
public:
    virtual ~notifier() = default;
    // Waits up to timeout. Throws connection_error when the connection is gone.
    virtual heard wait(std::chrono::milliseconds timeout) = 0;
};

// Opens sessions to one database, and says what the backend can do.
class dialect {
public:
    virtual ~dialect() = default;
    // "postgres", "mysql" or "sqlite": also the folder of its SQL.
    std::string_view name() const { return name_; }
    // Statements and migrations, the table prefix applied.
    const sql_library& sql() const { return sql_; }
    // Which tables this dialect works on, told apart from other clients' in
    // this process: the backend, the table prefix, and where the database is
    // (the SQLite file's absolute path; a server's URL, its password
    // masked). Clients with the same string share one waiter table, and so
    // one local queue per key (src/queue/wakeups.hpp). Two spellings of one
    // server make two strings: their waiters then wake each other as
    // waiters in two processes do, through the database.
    const std::string& tables() const { return tables_; }
    virtual client_capabilities capabilities() const = 0;
    // Why select_for_update is refused when capabilities().row_locks is
    // false: what is missing and what to do instead.
    virtual std::string no_row_locks_reason() const {
        return std::string(name()) + " has no row locks (it locks the whole database file)";
    }
    virtual std::unique_ptr<session> connect() = 0;
    // The calling thread is about to sleep, waiting for a key: a turn it kept
    // for its next statement (SQLite's in-process write turn) goes to the
    // next in line now rather than when it times out.
    virtual void idle() noexcept {}
    // A dedicated connection listening on `channel`; only when
    // capabilities().wake_ups.
    virtual std::unique_ptr<notifier> listen(const std::string& channel) = 0;
    // The statement an application runs to fence a write (lease::fence_sql);
    // throws config_error when the backend has no such SQL function.
    virtual std::string fence_sql() const = 0;
    // Fences the transaction open on the application's own connection
    // (`native`: the driver's handle), for backends whose fence helper lives
    // in the library (sqlock::sqlite::fence). Throws lease_lost_error when the
    // lease (key, token) is not held; config_error on other backends.
    virtual void fence_native(void* native, std::string_view key, std::int64_t token) const;

protected:
    dialect(std::string_view name, std::string_view table_prefix, std::string_view where)
        : name_(name), sql_(name, table_prefix) {
        // The name and the prefix hold no newline (the prefix is an SQL
        // identifier): `where`, last, may hold anything.
        tables_.append(name).append("\n").append(table_prefix).append("\n").append(where);
    }

private:
    std::string name_;
    sql_library sql_;
    std::string tables_;
};

// Factories, one per backend; each throws config_error naming its CMake
// option when the backend was left out of the build, and config_error for a
// URL it cannot parse.
std::unique_ptr<dialect> make_postgres(const dialect_context& ctx);
std::unique_ptr<dialect> make_mysql(const dialect_context& ctx);
std::unique_ptr<dialect> make_sqlite(const dialect_context& ctx);
// The dialect of a URL scheme as the URL parser folds it (core/url.hpp):
// "postgres", "mysql", else SQLite.
std::unique_ptr<dialect> make_dialect(std::string_view scheme, const dialect_context& ctx);

}  // namespace sqlock::detail
