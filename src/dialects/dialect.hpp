#pragma once
// The backend contract. One implementation per database lives in
// src/dialects/<name>/; they are the only files that include a driver header.
// The core never asks which backend it talks to: differences are expressed here.

#include <sqlock/client.hpp>
#include <sqlock/options.hpp>

#include <atomic>
#include <chrono>
#include <limits>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace sqlock::detail {

struct url_parts;
class sql_library;

// Everything a dialect needs from the client.
struct dialect_context {
    std::string redacted_url;  // for messages: the URL with its password masked
    // The URL's password in every spelling: driver messages (which may quote
    // what they could not parse) pass through scrub() with these.
    std::vector<std::string> secrets;
    client_options options;
    const sql_library* sql = nullptr;  // statements and migrations, prefix applied
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

struct waiter_request {
    std::string_view key;
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

// A connection that waits for wake-up notifications (PostgreSQL LISTEN).
class notifier {
public:
    virtual ~notifier() = default;
    // Waits up to timeout; true when at least one notification arrived.
    // Throws connection_error when the connection is gone.
    virtual bool wait(std::chrono::milliseconds timeout) = 0;
};

struct grant_result {
    std::optional<std::int64_t> token;         // set when granted
    std::optional<std::int64_t> remaining_ms;  // holder's remaining lease, when known
};

struct renewal {
    std::string_view key;
    std::string_view owner;
    std::int64_t lease_ms;
};

// A row of the job ledger. Times are milliseconds since the Unix epoch by
// the database clock; 0 when unset.
struct job_row {
    std::string job, run_key;
    std::string status;  // "running", "succeeded" or "failed"
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

// Result of trying to lock a key's row for select_for_update.
enum class row_lock { locked, busy, missing };

// Result of an owner-checked renewal of one lease.
enum class renew_result {
    renewed,     // extended by its length, by database time
    not_held,    // the row is not this owner's live lease any more: lost
    row_locked,  // another transaction held the row past the lock wait: try again
};

// One connection. Not thread-safe: the pool lends it to one thread at a time.
// Driver failures leave as sqlock errors: connection_error when the connection
// is unusable (the pool then drops it), schema_error for missing tables,
// db_error otherwise. Lock-wait timeouts and NOWAIT refusals are contention,
// reported through results, never thrown.
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
    // Deletes up to `limit` expired unique_insert rows, skipping rows another
    // transaction has locked; the delete re-checks expiry. Returns the count.
    virtual std::size_t sweep(std::size_t limit) = 0;
    // Deletes up to `limit` dead waiter rows. Returns the count.
    virtual std::size_t sweep_waiters(std::size_t limit) = 0;

    // The waiter queue: take a ticket, leave the queue, heartbeat tickets
    // (returns, per entry, whether the row was still live and is renewed).
    virtual std::int64_t enqueue(const waiter_request& request) = 0;
    virtual void dequeue(std::int64_t ticket) = 0;
    virtual std::vector<bool> beat_waiters(const std::vector<heartbeat>& batch) = 0;

    // select_for_update: opens a transaction and locks the key's row without
    // waiting. `locked` means the row is ours and no lease holds it; the
    // transaction stays open until end_row_lock(), and the server ends it if
    // it stays idle for lease_ms (so a frozen holder cannot keep the key).
    // `busy` and `missing` leave no transaction open. remaining_ms is set for
    // a lease-held row when asked.
    // ticket/priority: the requester's queue position, as in grant_request.
    virtual row_lock lock_row(std::string_view key, std::int64_t lease_ms, std::int64_t ticket,
                              std::int64_t priority, std::optional<std::int64_t>* remaining_ms) = 0;
    // Ends the transaction opened by lock_row (rolling it back).
    virtual void end_row_lock() = 0;
    // Creates the key's row (free) if it does not exist yet.
    virtual void ensure_row(std::string_view key) = 0;
    // Bumps and returns the key's fencing counter. Only called while the
    // caller holds the key's row lock on another session. Empty when the
    // fence row stayed locked past the row lock timeout (an earlier holder's
    // fenced transaction is still open): contention, nothing bumped.
    virtual std::optional<std::int64_t> bump_token(std::string_view key) = 0;
    // The key's fencing counter as committed (0: never granted). A
    // select_for_update holder's ping: proves its connection alive, and a
    // token other than its own means the lock was broken (force_release).
    virtual std::int64_t fence_token(std::string_view key) = 0;

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
    // Ledger rows, newest first: of one job (exact), or of every job whose
    // name starts with `job` (not exact; "" for every job).
    virtual std::vector<job_row> job_list(std::string_view job, bool exact, std::size_t limit) = 0;
    // Deletes up to `limit` ledger rows started more than retention_ms ago.
    virtual std::size_t sweep_jobs(std::int64_t retention_ms, std::size_t limit) = 0;
    // The database clock, in milliseconds since the Unix epoch.
    virtual std::int64_t now_ms() = 0;

    virtual lock_info inspect(std::string_view key) = 0;
    virtual int schema_version() = 0;
    // Applies the dialect's migrations newer than the current version, under a
    // lock that serialises concurrent migrate() calls.
    virtual void migrate() = 0;
};

// Opens sessions to one database.
class dialect {
public:
    virtual ~dialect() = default;
    virtual std::string_view name() const = 0;
    virtual bool supports_row_locks() const = 0;
    virtual bool supports_notify() const = 0;
    virtual std::unique_ptr<session> connect() = 0;
    // A dedicated connection listening on `channel`, or null when the backend
    // has no notifications (waiters then poll).
    virtual std::unique_ptr<notifier> listen(const std::string& channel) = 0;
};

// The batch as a JSON array of {"k": key, "o": owner, "ms": lease}, for
// dialects that unpack it in SQL (jsonb_to_recordset, json_each).
std::string renewals_json(const std::vector<renewal>& batch);
// The heartbeat batch as a JSON array of {"t": ticket, "ms": lease}.
std::string heartbeats_json(const std::vector<heartbeat>& batch);

// Why a lease is not held, from what a fence read ("" when it is held):
// current is the key's last token (none: never granted), lease_token the
// token of its lease row, live whether that lease is unexpired.
std::string fence_reason(std::string_view key, std::int64_t token, std::optional<std::int64_t> current,
                         std::optional<std::int64_t> lease_token, bool live);

// Factories, one per backend; each throws config_error naming its CMake
// option when the backend was left out of the build.
std::unique_ptr<dialect> make_postgres(const url_parts& url, const dialect_context& ctx);
std::unique_ptr<dialect> make_mysql(const url_parts& url, const dialect_context& ctx);
std::unique_ptr<dialect> make_sqlite(const url_parts& url, const dialect_context& ctx);

}  // namespace sqlock::detail
