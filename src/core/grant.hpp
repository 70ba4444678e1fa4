#pragma once
// A grant: one acquisition's state, shared by the leases that reuse it
// (reentrancy), with its timing (watchdog/schedule.hpp: the deadline formula
// lives there, once), its loss signals, and — for select_for_update — the
// row lock it holds. And the registry that hands a grant back to the thread
// that holds it.

#include "watchdog/schedule.hpp"

#include <sqlock/events.hpp>
#include <sqlock/options.hpp>

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <stop_token>
#include <string>
#include <string_view>

namespace sqlock::detail {

class client_impl;
class row_lock_holder;

struct grant : lease_timing, std::enable_shared_from_this<grant> {
    grant();
    ~grant();

    std::shared_ptr<client_impl> client;  // a lease keeps its client alive
    std::string key;
    std::string owner;
    std::int64_t token = 0;
    sqlock::mode mode = sqlock::mode::conditional_update;
    // 'X' an exclusive lease (sqlock_locks); 'S' a shared holder, 'P' a
    // semaphore permit (sqlock_holders; never reentrant).
    char kind = 'X';
    std::uint64_t thread = 0;  // thread_serial() of the acquiring thread, for reentrancy
    bool reentrant = false;
    std::function<void(const std::string&, std::int64_t)> on_lost, on_renewed;
    std::stop_source stop;  // requested when lost
    std::atomic<bool> reentry_open{true};  // cleared when a lease of it is moved

    std::mutex mu;  // guards depth and events_closed; never held across a database round trip
    // Held while on_renewed runs, so that a release waits out a call under
    // way: no on_renewed call is in progress or to come once release() returns.
    std::mutex renewed_mu;
    int depth = 1;  // leases sharing this grant
    // Telemetry (core/telemetry.hpp). granted_ns: when the grant was
    // confirmed (lease_clock ns), for hold times; hold_ended: the hold was
    // counted (at release or loss, whichever came first); events_closed: the
    // released event was posted, so nothing about this grant follows it.
    std::int64_t granted_ns = 0;
    std::atomic<bool> hold_ended{false};
    bool events_closed = false;
    // What the watchdog's last statement for this lease learnt, for the
    // renewed()/lost() that follow it: its round trip, and why it found the
    // lease lost.
    std::atomic<std::int64_t> renew_db_ns{0};
    std::atomic<loss_cause> loss_hint{loss_cause::not_held};
    // select_for_update: the pinned connection holding the key's row lock.
    std::unique_ptr<row_lock_holder> row_lock;
};

// The grants registered for reentrancy, by (thread serial, key). A grant is
// handed back only to the thread that acquired it, only while none of its
// leases has been moved, and only while it is live.
class reentry_registry {
public:
    // The calling thread's live grant of key with its depth raised, or null.
    std::shared_ptr<grant> find(std::string_view key);
    void add(const std::shared_ptr<grant>& g);
    // Drops g's entry (released, or a lease of it moved).
    void remove(const grant& g);

private:
    std::mutex mu_;
    std::map<std::pair<std::uint64_t, std::string>, std::weak_ptr<grant>, std::less<>> held_;
};

// Random 128-bit owner id as 32 hex digits, from the kernel's CSPRNG.
std::string new_owner_id();
// "host:pid:tid" of the calling thread, for people reading the lock table.
std::string holder_description();
// This thread's serial number: 1, 2, 3... in the order threads first ask,
// never reused within the process. std::thread::id values are reused as soon
// as a thread exits, so they cannot tell a new thread from a dead one.
std::uint64_t thread_serial() noexcept;

}  // namespace sqlock::detail
