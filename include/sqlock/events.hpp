#pragma once
// Lock events: what happens to a client's leases and waits, told to a
// listener the application sets in client_options::on_event (for logs,
// traces, audits). client::metrics_text() counts the same things with no
// listener set.

#include <sqlock/options.hpp>

#include <chrono>
#include <cstdint>
#include <string>

namespace sqlock {

enum class event_kind {
    // A grant: try_acquire() or acquire() got the key. A reentrant
    // acquisition reuses its thread's grant and is no event.
    acquired,
    // The key was given up: the grant's last lease was released (or destroyed).
    released,
    // A renewal, or a select_for_update holder's ping, confirmed the lease.
    renewed,
    // An automatic renewal failed for a passing reason (the database away,
    // slow, or the row locked by another transaction); the watchdog retries
    // until the lease's deadline. `error` says what failed.
    renewal_failed,
    // The lease is lost (said once per grant); `cause` says how.
    lost,
    // A blocking acquire() that found the key busy took a ticket (a row in
    // the wait queue); `ticket` is its place.
    queued,
    // A blocking acquire() that found the key busy at least once stopped
    // waiting; `outcome` says why and `wait` how long it waited. When it got
    // the key, this follows the grant's `acquired` event.
    waited,
};

// Why a lease was lost.
enum class loss_cause {
    none,  // not a `lost` event
    // A renewal or the release matched no row of this owner: the lease had
    // expired by database time and the key was taken over or swept, its row
    // was deleted, or an operator force-released it (for the lease modes a
    // forced release looks like this: the renewal only sees its row gone).
    not_held,
    // The local deadline passed without a confirmed renewal: the database
    // was unreachable or slow past the lease, the process was frozen or the
    // machine suspended, or a fixed lease (auto_renew = false) or max_hold
    // ran out.
    deadline,
    // select_for_update: the key's fencing token changed under the holder's
    // row lock, which only client::force_release (`sqlock release --force`) does.
    forced,
    // select_for_update: the connection holding the row lock died, or the
    // server ended its transaction (idle limit, killed backend).
    connection_lost,
};

// How a wait ended (`waited` events).
enum class wait_outcome {
    none,       // not a `waited` event
    acquired,   // the key was granted
    timed_out,  // acquire() threw timeout_error
    cancelled,  // lock_options::cancel was requested: cancelled_error
    failed,     // another error (connection_error, db_error, ...); `error` has its message
};

// Returns the enumerator's name, e.g. "renewal_failed", "not_held", "timed_out".
const char* to_string(event_kind k) noexcept;
const char* to_string(loss_cause c) noexcept;
const char* to_string(wait_outcome o) noexcept;

// One event. Durations are measured on lease_clock (CLOCK_BOOTTIME);
// a field an event kind does not use is zero or empty.
struct lock_event {
    event_kind kind = event_kind::acquired;
    std::string key;
    // The grant's fencing token; 0 for queued, and for a wait that ended without a grant.
    std::int64_t token = 0;
    // The grant's owner id. queued: the ticket's owner id, which is not the
    // owner id of the grant the wait may end with (each attempt has its own).
    std::string owner;
    sqlock::mode mode = mode::conditional_update;
    loss_cause cause = loss_cause::none;        // lost
    wait_outcome outcome = wait_outcome::none;  // waited
    std::int64_t ticket = 0;                    // queued: arrival order in the queue
    // acquired, waited: since the try_acquire() or acquire() call began.
    std::chrono::nanoseconds wait{0};
    // released, lost: since the grant.
    std::chrono::nanoseconds hold{0};
    // Time spent waiting for the database on the statements that did it, as
    // the client saw it (round trips, not the server's own time): acquired
    // (the granting attempt), released, renewed (the renewal statement, for a
    // batch the whole batch), renewal_failed (until it failed).
    std::chrono::nanoseconds db_time{0};
    // renewal_failed, and waited with outcome failed: the error's message.
    std::string error;
    // When the event happened, by the client's real-time clock (for logs).
    std::chrono::system_clock::time_point time;
};

}  // namespace sqlock
