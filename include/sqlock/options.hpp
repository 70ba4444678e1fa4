#pragma once
// Options for a client and for one acquisition. Plain aggregates: use
// designated initializers, e.g. {.mode = sqlock::mode::unique_insert, .lease = 10s}.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <stop_token>
#include <string>

namespace spdlog {
class logger;
}

namespace sqlock {

struct lock_event;  // sqlock/events.hpp

// How a key is held. All three share one table and one fencing counter per key,
// so they exclude each other and tokens grow across modes.
enum class mode {
    // The key's row is inserted on acquire and deleted on release; an expired
    // row may be taken over. Simple to read, but every cycle inserts and
    // deletes a row (table churn, dead tuples on PostgreSQL).
    unique_insert,
    // The key's row stays; acquire sets its owner and expiry with one
    // conditional upsert, release clears the owner. Update-in-place (HOT on
    // PostgreSQL). The default.
    conditional_update,
    // The key's row is locked with SELECT ... FOR UPDATE in a transaction kept
    // open on a dedicated connection until release; the server frees it when
    // that connection dies. Pins one connection per held key; refused
    // (config_error) through a transaction-pooling proxy
    // (sqlock_pool_mode=transaction), on a Galera cluster and on SQLite.
    select_for_update,
};

// Returns "unique_insert", "conditional_update" or "select_for_update".
const char* to_string(mode m) noexcept;

// The longest duration sqlock sends to a database, the same on every backend:
// leases, renewal intervals, safety margins, the client's timeouts, and job
// retry backoffs must not exceed it (config_error names it). PostgreSQL keeps
// its time limits (lock_timeout, statement_timeout,
// idle_in_transaction_session_timeout) in 32-bit milliseconds, about 24.8 days.
// Waits (acquire timeouts, max_hold) may be longer: beyond what the clock can
// count they mean "forever".
inline constexpr std::chrono::milliseconds max_duration{std::chrono::hours(24 * 24)};

// What a commit of sqlock's own statements waits for: the one full account
// of it (README and docs link here). It applies to the connections the client
// opens, so to grants, releases, renewals, fence-counter bumps, waiter rows
// and job-ledger writes; the application's own connections (and the fenced
// transactions it runs on them) keep their own setting.
enum class durability {
    // A commit is on disk before the client hears of it, as far as the
    // database is configured to do so: sqlock changes no commit setting, and
    // one the server, role, database or URL sets stays in force (PostgreSQL's
    // synchronous_commit, say). The default.
    //
    // Except a release's (of a lease, a shared lease or a permit), which
    // never waits for the disk on PostgreSQL (synchronous_commit = off for
    // that one transaction) and SQLite (synchronous = NORMAL for that one
    // commit, in WAL mode): it saves one of the two flushes of every lock +
    // unlock. A release lost in a crash leaves the key held until its lease
    // runs out, as a crashed holder would: on PostgreSQL, a release in the
    // last 3 x wal_writer_delay (600 ms by default) before a server crash; on
    // SQLite, one before an OS crash or power loss. It never lets two parties in and
    // never lets a token be issued twice: a grant that saw the release
    // commits after it in the log and waits for its own flush, which covers
    // the release too. The wait queue's writes (a waiter taking its ticket,
    // its heartbeat, its leaving) do not wait either: a queue row orders
    // waiters and plays no part in exclusion or tokens, and one lost in a
    // crash costs its waiter its place (it queues again at the back).
    // MySQL/MariaDB have no per-transaction setting: their releases and queue
    // writes wait like every other commit.
    strict,
    // Commits are reported before they reach the disk, on the backends that
    // can do that per connection, for fewer disk flushes per grant, release
    // and renewal:
    // - PostgreSQL: synchronous_commit = off on sqlock's connections only
    //   (asynchronous commit). A PostgreSQL server crash or an OS crash can
    //   lose up to 3 x wal_writer_delay of commits (600 ms by default).
    // - SQLite: PRAGMA synchronous = NORMAL on sqlock's connections (in WAL
    //   mode the WAL is synced at checkpoints, not at every commit; strict
    //   keeps the build default, FULL). An OS crash or power loss can lose the
    //   last commits.
    // - MySQL/MariaDB: refused with config_error at client::open:
    //   innodb_flush_log_at_trx_commit and sync_binlog are global only (SET
    //   SESSION fails with error 1229). Set them on the server if relaxing
    //   every database on it is acceptable, or use strict.
    // The price: lost commits can be grants, releases and fence-counter
    // bumps, so after such a crash a fencing token can be issued a second
    // time, and a holder whose grant was lost may believe it holds the key
    // while another client acquires it (its watchdog reports the loss at its
    // next renewal). Job-ledger rows are relaxed too: a run recorded as
    // succeeded can be lost and run again, so give a job_runner a strict
    // client (a second client on the same database is fine) unless re-running
    // a job is harmless. Use relaxed only for locks that save work (duplicate
    // work is acceptable), never where fencing tokens guard correctness. A
    // crash of the client process itself loses nothing in either setting:
    // every commit the client heard of reached the database server (or, on
    // SQLite, the operating system).
    relaxed,
};

// Returns "strict" or "relaxed".
const char* to_string(durability d) noexcept;

// Options for one acquisition.
struct lock_options {
    sqlock::mode mode = mode::conditional_update;
    // Lease length, measured by the database clock. Positive, at most max_duration.
    // For select_for_update it bounds how long a holder that dies right after
    // acquiring can keep the key; afterwards the row lock alone holds it.
    std::chrono::milliseconds lease{std::chrono::seconds(30)};
    // Free text stored beside the lock for people to read (at most 1024 bytes of UTF-8).
    std::string note;
    // A thread that already holds the key through the same client gets the
    // same grant back (same owner and token) instead of contending with itself.
    // Reentry is by OS thread: for nested calls on one thread. Turn it off
    // where one thread runs independent tasks that may each lock the key
    // (coroutines or fibres on an event loop, a lease built in place and
    // handed to another task without a move): they would share one grant.
    bool reentrant = true;
    // How long before the database's expiry the client itself treats the lease
    // as lost (lease::lost()). Zero means a tenth of the lease. With
    // auto_renew it must be shorter than the lease minus the renewal interval,
    // or the lease would be lost before its first renewal.
    std::chrono::milliseconds safety_margin{0};
    // Renew the lease from the client's watchdog thread while it is held.
    // Off: a fixed lease that ends at its expiry unless renew() is called.
    bool auto_renew = true;
    // Time between renewals. Zero means a third of the lease.
    std::chrono::milliseconds renew_interval{0};
    // Stop renewing this long after the grant (zero: no cap); the lease then
    // runs out like a fixed one and is reported lost at its deadline.
    std::chrono::milliseconds max_hold{0};
    // Called exactly once when the lease is lost, on the client's callback
    // thread (one per client: callbacks run one at a time, in order, and a
    // slow one delays other callbacks but never a renewal), outside every
    // sqlock mutex; an exception it throws is caught and logged. It is told
    // whenever the loss is found, even after the lease (and the client) was
    // destroyed or after release() found the lease already gone: capture what
    // it uses by value or shared_ptr, not by reference to a scope that ends.
    std::function<void(const std::string& key, std::int64_t token)> on_lost;
    // Called on the callback thread after each successful renewal; never once
    // release() has returned (a release waits for a call under way).
    std::function<void(const std::string& key, std::int64_t token)> on_renewed;
    // Fair mode: a blocking acquire() queues as a waiter and the key goes to
    // the live waiter with the highest priority, then the earliest arrival.
    // Acquisitions that are not fair never pass a live fair waiter.
    bool fair = false;
    // Higher first; equal priorities are served in arrival order.
    int priority = 0;
    // acquire() stops waiting (throwing cancelled_error) once stop is requested.
    std::stop_token cancel;
};

// Options for a client. Defaults suit most applications.
struct client_options {
    // Prefix of every table and object sqlock creates; a lower-case SQL
    // identifier ([a-z_][a-z0-9_]*, at most 40 bytes). See docs/migrations.md
    // for hand-applied migrations with a custom prefix.
    std::string table_prefix = "sqlock_";
    // At most this many of the client's connections run statements for the
    // application at once (grants, releases, renew(), inspection, job
    // ledger writes); a thread that finds them all busy waits for one. Beyond
    // them the client opens one connection for its watchdog, one for
    // wake-ups (PostgreSQL, once something waits), and one per held
    // select_for_update lease.
    std::size_t pool_size = 4;
    // Bound on establishing a connection.
    std::chrono::milliseconds connect_timeout{std::chrono::seconds(5)};
    // Server-side bound on one statement; also the client-side network read bound.
    std::chrono::milliseconds statement_timeout{std::chrono::seconds(10)};
    // How long a lease statement waits for a row lock held by a concurrent
    // select_for_update holder before the attempt counts as contention.
    // MySQL/MariaDB round this up to whole seconds.
    std::chrono::milliseconds row_lock_timeout{std::chrono::milliseconds(200)};
    // Where sqlock logs. Null means the logger named "sqlock" (created if
    // absent). The background threads may still log for a moment after the
    // client's last handle is gone (a renewal round under way finishing):
    // keep the logger's sinks alive until then (spdlog's own sinks are
    // shared_ptrs, which sqlock holds).
    std::shared_ptr<spdlog::logger> logger;
    // Leases renewed by one watchdog statement (PostgreSQL, SQLite: a JSON
    // array of keys; MySQL: a multi-row join of placeholders).
    std::size_t renew_batch_size = 500;
    // Delete, in the background, expired unique_insert lock rows, dead
    // waiter rows and job-ledger rows older than job_retention (safe to run
    // in every process at once). Rows deleted per statement, and how often.
    bool sweep = true;
    std::chrono::milliseconds sweep_interval{std::chrono::seconds(30)};
    std::size_t sweep_batch_size = 500;
    // The sweeper also deletes job-ledger rows (see sqlock/jobs.hpp) started
    // longer ago than this. A run key whose row is gone may run again, so
    // keep it longer than callers may repeat a run key. Zero keeps them forever.
    std::chrono::milliseconds job_retention{std::chrono::hours(24 * 30)};
    // strict (the default) or relaxed: see durability above. Relaxed trades
    // durability after a database crash for speed; efficiency locks only.
    sqlock::durability durability = durability::strict;
    // Told every lock event of this client (sqlock/events.hpp): grants,
    // releases, renewals, renewal failures, losses and their cause, waits.
    // Called on a thread of its own, one event at a time in the order they
    // happened; never on the watchdog, the deadline timer or the on_lost
    // thread, so a slow listener delays later events, never a renewal or a
    // loss signal. An exception it throws is logged and the event dropped.
    // Events pile up behind a listener that blocks: past 65,536 waiting,
    // new ones are dropped and counted (sqlock_events_dropped_total in
    // client::metrics_text()). Once the application's last copy of the
    // client and last lease of it are destroyed, the listener is not called
    // again: that destructor waits for a call in progress, and events not yet
    // told are dropped (so the listener may capture objects that outlive the
    // client by reference). Do not capture a copy of the client, or a lease,
    // mutex or job_runner of it (the client keeps its options, so it would
    // never be destroyed). Empty (the default): no event is made and no
    // thread started.
    std::function<void(const lock_event& event)> on_event;
};

}  // namespace sqlock
