#pragma once
// sqlock::client: the entry point. One per database.

#include <sqlock/events.hpp>
#include <sqlock/lease.hpp>
#include <sqlock/multi_lease.hpp>
#include <sqlock/options.hpp>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace sqlock {

namespace detail {
class client_impl;
}

// Waiting "forever" for acquire(); any timeout at least this long never expires.
inline constexpr std::chrono::milliseconds wait_forever = std::chrono::milliseconds::max();

namespace detail {
// A std::chrono wait (try_lock_for, try_lock_until) in whole milliseconds,
// rounded up: one too long for them (hours::max()) waits for ever, and one
// not positive tries once, as std::timed_mutex's do. Compared in long double
// first, so that converting never overflows.
template <class Rep, class Period>
std::chrono::milliseconds wait_of(const std::chrono::duration<Rep, Period>& d) {
    using std::chrono::milliseconds;
    if (d <= d.zero()) return milliseconds::zero();
    using exact = std::chrono::duration<long double, std::milli>;
    if (exact(d) >= exact(wait_forever)) return wait_forever;
    return std::chrono::ceil<milliseconds>(d);
}
// The time left until t, subtracted in long double: t - now in their common
// type (nanoseconds against an hours-based t) overflowed for a t that is far
// off, such as time_point<system_clock, hours>::max().
template <class Clock, class Duration>
std::chrono::milliseconds wait_until(const std::chrono::time_point<Clock, Duration>& t) {
    using exact = std::chrono::duration<long double, std::milli>;
    return wait_of(exact(t.time_since_epoch()) - exact(Clock::now().time_since_epoch()));
}
}  // namespace detail

// Counters since the client was opened.
struct client_stats {
    std::uint64_t acquisitions = 0;       // grants, not counting reentrant ones
    std::uint64_t contention_misses = 0;  // attempts that found the key held
    std::uint64_t releases = 0;
    std::uint64_t renewals = 0;           // leases renewed (automatically or by renew())
    std::uint64_t renewal_failures = 0;   // renewal attempts that failed for a transient error
    std::uint64_t leases_lost = 0;
    std::uint64_t statements = 0;         // statements sent to the database
    std::uint64_t rows_swept = 0;         // expired rows deleted by this client's sweeper
    std::uint64_t watchdog_ticks = 0;     // watchdog rounds that renewed at least one lease
    std::uint64_t waits = 0;              // blocking acquisitions that took a place in the queue
    std::uint64_t wakeups = 0;            // wake-up notifications received by this client's listener
};

// What the database says about one key right now.
struct lock_info {
    std::string key;
    bool held = false;                 // a valid lease or a row lock holds it
    std::string owner;                 // lease owner ("" when free or held by select_for_update)
    std::string mode;                  // mode of the lease holder, "select_for_update", or ""
    std::int64_t token = 0;            // last token granted for the key (0: never granted)
    std::string holder;                // host:pid:thread of the lease holder
    std::string note;
    std::chrono::milliseconds expires_in{0};  // by database time; 0 when not a live lease
};

// A blocking acquire() waiting in a key's queue.
struct waiter_info {
    std::string key;
    std::int64_t ticket = 0;  // arrival order
    std::string owner;        // the waiting client's owner id
    std::string holder;       // host:pid:thread of the waiting client
    bool fair = false;
    int priority = 0;                          // fair waiters only
    std::chrono::milliseconds waited{0};       // since it queued, by database time
    std::chrono::milliseconds expires_in{0};   // until its row expires unless heartbeated
};

// A live shared holder of a key, or a live permit of a semaphore.
struct holder_info {
    std::string key;  // the lock's key, or the semaphore's name
    lease_kind kind = lease_kind::shared;
    std::string owner;
    std::int64_t token = 0;
    std::string holder;  // host:pid:thread
    std::string note;
    std::chrono::milliseconds expires_in{0};  // by database time
    std::int64_t permits = 0;                 // permits: the semaphore's limit now; 0 for shared holders
};

// What a client's backend offers; the same for every client of one backend.
struct client_capabilities {
    bool row_locks = false;           // mode::select_for_update is available (PostgreSQL, MySQL/MariaDB;
                                      // not through a transaction pool, not on Galera)
    bool wake_ups = false;            // a release wakes the head waiter in another process at once
                                      // (PostgreSQL LISTEN/NOTIFY, MariaDB's doorbell, SQLite's
                                      // datagram socket); without (Galera, a transaction pool)
                                      // waiters poll
    bool shared_locks = true;         // acquire_shared and shared_mutex are available; not on Galera,
                                      // which does not certify a reader joining a group
    bool sql_fence = false;           // lease::fence_sql() names an SQL function that fences writes
    bool relaxed_durability = false;  // client_options::durability = relaxed is accepted
    bool embedded = false;            // a file this process opens, no server (SQLite): created on first use
};

// Figures for every key under the client's table prefix, read in one
// statement (and one more for `queues`) at one reading of the database clock:
// what `sqlock status --metrics` exports.
struct database_gauges {
    std::chrono::sys_time<std::chrono::milliseconds> now;  // the database clock they were read at
    // Holders right now, by mode: live leases, and keys whose latest grant was
    // select_for_update and whose row is locked (0 without row locks).
    std::int64_t held_unique_insert = 0, held_conditional_update = 0, held_select_for_update = 0;
    std::int64_t waiters = 0, fair_waiters = 0;    // live waiter rows
    std::chrono::milliseconds oldest_wait{0};      // the longest a live waiter has waited; 0 when none
    // Rows past their lease that the sweeper deletes and has not yet:
    // unique_insert lock rows, and waiter rows whose client stopped heartbeating.
    std::int64_t expired_locks = 0, dead_waiters = 0;
    std::int64_t runs_running = 0, runs_succeeded = 0, runs_failed = 0;  // job-ledger rows by status

    // A key with live waiters.
    struct queue {
        std::string key;
        std::int64_t waiters = 0;
        std::chrono::milliseconds oldest_wait{0};
    };
    std::vector<queue> queues;  // the longest queues first, at most as many as asked for

    std::int64_t keys_held() const { return held_unique_insert + held_conditional_update + held_select_for_update; }
};

// A connection to one database holding sqlock's tables. Safe for concurrent
// use from many threads; copies share the same connections and state.
class client {
public:
    // Opens a client and connects at once, so that a wrong URL or an
    // unreachable server fails here. URL forms (see docs/urls.md):
    //   postgresql://user:pass@host:port/db?params  (libpq URI rules; also postgres://)
    //   mysql://user:pass@host:port/db, mysql://user:pass@localhost/db?socket=/path (also mariadb://)
    //   sqlite:relative/path.db, sqlite:/abs/path.db, sqlite:///abs/path.db
    // Throws config_error for a malformed URL or a backend left out of this build,
    // connection_error when the database cannot be reached.
    static client open(std::string_view url, client_options options = {});

    // Creates or upgrades sqlock's tables. Idempotent; safe when several
    // processes run it at once.
    void migrate();
    // Version of the schema in the database (0 when absent).
    int schema_version();
    // Version this library needs; migrate() brings the database to it.
    int required_schema_version() const;
    // The SQL migrate() applies for this client's dialect and table prefix,
    // every migration in order, for users who apply it with their own tool.
    std::string migration_sql() const;

    // Takes the key if it is free (or expired); an empty optional when it is
    // held. [[nodiscard]]: a lease that is not kept is released at once.
    [[nodiscard]] std::optional<lease> try_acquire(std::string_view key, const lock_options& options = {});
    // Waits up to timeout (wait_forever: no limit) for the key, backing off
    // with jitter bounded by the holder's remaining lease. Throws timeout_error.
    [[nodiscard]] lease acquire(std::string_view key, std::chrono::milliseconds timeout,
                                const lock_options& options = {});

    // --- Multi-key locks (docs/design.md, "Multi-key locks") ---
    // Takes every key of `keys` exclusively, or none of them: in a lease mode
    // (select_for_update is a config_error), one lease per key under one
    // multi_lease. The keys are taken in the order of their bytes, whatever
    // order they are given in, and a set that finds a key busy gives back
    // the keys it took before it returns or waits: callers that list the
    // same keys in different orders never deadlock. (acquire_all(), once it
    // has waited 200 ms, keeps the keys before the busy one while it waits:
    // README, "Multi-key locks".) `keys`: 1 to max_keys_per_set valid keys, no key
    // twice (config_error, before any SQL). options apply to every key;
    // options.reentrant is ignored (each key is a grant of its own). Empty
    // when a key is held now.
    [[nodiscard]] std::optional<multi_lease> try_acquire_all(const std::vector<std::string>& keys,
                                                             const lock_options& options = {});
    // Waits up to timeout for the whole set, in the queue of the first key it
    // found busy (woken by that key's releases); fair and priority as for
    // acquire(). After 200 ms it holds the keys it got, in key order, while
    // it waits for the next, so that steady traffic on each key cannot
    // starve it. Throws timeout_error, holding none of the keys.
    [[nodiscard]] multi_lease acquire_all(const std::vector<std::string>& keys, std::chrono::milliseconds timeout,
                                          const lock_options& options = {});

    // --- Reader-writer locks (docs/design.md, "Shared locks and semaphores") ---
    // Takes the key shared: any number of shared holders coexist; an
    // exclusive holder (acquire, try_acquire, any mode) excludes them all
    // and they exclude it. Each shared lease is a lease of its own (own
    // owner, renewed by the watchdog with the others, lost, on_lost, stop
    // token); its token() is its group's: readers that hold the key together
    // share the token the first of them drew from the key's counter. A
    // reader that is not fair is refused while a writer waits for the key
    // (writers are not starved); a fair one waits its turn among fair
    // waiters. options.mode
    // must not be select_for_update (config_error); options.reentrant is
    // ignored (each call is a grant of its own). Empty when not granted now.
    [[nodiscard]] std::optional<lease> try_acquire_shared(std::string_view key, const lock_options& options = {});
    // Waits up to timeout for a shared grant, as acquire() does. Throws timeout_error.
    [[nodiscard]] lease acquire_shared(std::string_view key, std::chrono::milliseconds timeout,
                                       const lock_options& options = {});

    // --- Counting semaphores ---
    // Takes one permit of the semaphore `name` (a namespace of its own, apart
    // from lock keys, but sharing the wait queue's: give semaphores names no
    // lock uses). At most `permits` permits are live at any instant of
    // database time; each is a lease (renewed, lost, freed by its expiry
    // when its holder dies). `permits` (1 to 1,000,000, else config_error)
    // creates the semaphore with that limit if it does not exist; an
    // existing semaphore keeps its limit until set_permits changes it.
    // options as for try_acquire_shared. Empty when no permit is free now.
    [[nodiscard]] std::optional<lease> try_acquire_permit(std::string_view name, std::int64_t permits,
                                                          const lock_options& options = {});
    // Waits up to timeout for a permit; fair waiters are served by priority,
    // then arrival. Throws timeout_error.
    [[nodiscard]] lease acquire_permit(std::string_view name, std::int64_t permits, std::chrono::milliseconds timeout,
                                       const lock_options& options = {});
    // Creates the semaphore or changes its limit, at once for every client.
    // Lowering it revokes nothing: holders above the new limit keep their
    // permits until they release or lose them, and no permit is granted
    // until fewer than the new limit are live.
    void set_permits(std::string_view name, std::int64_t permits);
    // Live shared holders and permits whose key (or semaphore name) starts
    // with `prefix`: permits first, then shared holders, each by key.
    std::vector<holder_info> holders(std::string_view prefix = {}, std::size_t limit = 1000);

    // Reads the key's state without changing it.
    lock_info inspect(std::string_view key);
    // Throws config_error, saying what is wrong, unless `key` is a valid lock
    // key (1 to 255 bytes of UTF-8 without NUL). For checking input early;
    // every call that takes a key checks it too.
    static void check_key(std::string_view key);
    // Throws config_error, saying what is wrong, unless `keys` is a set
    // acquire_all() takes: 1 to max_keys_per_set valid keys, none twice.
    static void check_keys(const std::vector<std::string>& keys);

    // Keys starting with `prefix` ("" for all) held right now, sorted by key;
    // at most `limit` of them.
    std::vector<lock_info> locks(std::string_view prefix = {}, std::size_t limit = 1000);
    // Live waiters of keys starting with `prefix`, per key in the order the
    // queue grants them (fair waiters by priority, then arrival; then the rest).
    std::vector<waiter_info> waiters(std::string_view prefix = {}, std::size_t limit = 1000);
    // Break-glass release for an operator, whoever holds the key: bumps the
    // key's fencing token at once, so the holder's fences fail from now on,
    // and ends its lease (every reader's, for a key held shared), so the key
    // can be granted again. A lease holder learns of it at its next renewal;
    // a select_for_update holder at its next ping (within a second), when it
    // also gives up its row lock. Logged as a warning naming `by` (who did
    // it) and the previous holder. Returns the new token, or 0 when the key
    // was never granted (nothing to release).
    std::int64_t force_release(std::string_view key, std::string_view by);
    // Counts over the whole database (keys held by mode, waiters, unswept
    // rows, ledger rows by status) and the `queue_limit` longest queues (0:
    // none). Scans the lock, waiter and ledger tables: for monitoring, not
    // for a hot path.
    database_gauges gauges(std::size_t queue_limit = 20);

    // Deletes one batch of expired rows now: unique_insert lock rows, dead
    // waiters, and job-ledger rows older than job_retention (the background
    // sweeper does the same every sweep_interval). Returns the rows deleted.
    std::size_t sweep();

    // The database's clock (the one every lease is measured by), as UTC.
    std::chrono::sys_time<std::chrono::milliseconds> database_time();

    client_stats stats() const;
    // This client's counters, gauges and histograms in the Prometheus text
    // exposition format (version 0.0.4), for an HTTP handler to serve as is
    // (Content-Type: text/plain; version=0.0.4). Every name starts with
    // sqlock_; times are in seconds. Cheap (atomic reads, no SQL); kept
    // whether or not client_options::on_event is set. Give each client of a
    // process an endpoint (or a job label) of its own: two clients report
    // the same names. See the README, "Events and metrics".
    std::string metrics_text() const;
    // The dialect in use: "postgres", "mysql" or "sqlite" (for people: decide
    // on capabilities(), not on the name).
    std::string_view dialect() const;
    client_capabilities capabilities() const;

private:
    friend class job_runner;
    explicit client(std::shared_ptr<detail::client_impl> impl);
    std::shared_ptr<detail::client_impl> impl_;
};

}  // namespace sqlock
