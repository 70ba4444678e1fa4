#pragma once
// Internals of sqlock::client: the connection pool, grants and counters.

#include "core/clock.hpp"
#include "core/sql_library.hpp"
#include "core/url.hpp"
#include "dialects/dialect.hpp"

#include <sqlock/client.hpp>
#include <sqlock/errors.hpp>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <stop_token>
#include <functional>
#include <string>
#include <thread>
#include <vector>

namespace spdlog {
class logger;
}

namespace sqlock::detail {

class client_impl;
class deadline_timer;

// One acquisition's state, shared by the reentrant leases that reuse it.
// Times are lease_clock nanoseconds (CLOCK_BOOTTIME).
struct grant : std::enable_shared_from_this<grant> {
    std::shared_ptr<client_impl> client;
    std::string key;
    std::string owner;
    std::int64_t token = 0;
    sqlock::mode mode = sqlock::mode::conditional_update;
    std::int64_t lease_ms = 0;
    std::int64_t margin_ms = 0;
    std::uint64_t thread = 0;  // thread_serial() of the acquiring thread, for reentrancy
    bool reentrant = false;
    bool auto_renew = true;
    std::int64_t interval_ns = 0;   // between automatic renewals
    std::int64_t hold_until_ns = 0; // no automatic renewal after this (max_hold)
    std::function<void(const std::string&, std::int64_t)> on_lost, on_renewed;
    std::stop_source stop;          // requested when lost

    // The local deadline: when the last confirmed grant or renewal was sent,
    // plus the lease, minus the safety margin. The database computed its
    // expiry after that send, so the deadline is never later than the expiry.
    std::atomic<std::int64_t> deadline_ns{0};
    std::atomic<std::int64_t> next_renew_ns{0};
    std::atomic<bool> lost{false};
    std::atomic<bool> released{false};      // set once, under mu
    std::atomic<bool> reentry_open{true};   // cleared when a lease of it is moved

    // A grant or renewal sent at `sent` (lease_now_ns()) was confirmed by the
    // database: the one place the deadline is computed.
    void confirmed(std::int64_t sent) noexcept {
        deadline_ns = saturating_add(sent, ms_to_ns(lease_ms - margin_ms));
        next_renew_ns = saturating_add(sent, interval_ns);
    }

    // Guards the fields below. Never held across a database round trip: the
    // pinned session is borrowed (pinned_busy) and used without the mutex.
    std::mutex mu;
    std::condition_variable pinned_idle;  // pinned_busy went false
    int depth = 1;
    bool pinned_busy = false;
    std::unique_ptr<session> pinned;  // select_for_update's open transaction
};

// A blocking acquire() waiting in the queue: its ticket, heartbeated by the
// watchdog like a lease.
struct waiter {
    std::int64_t ticket = 0;
    std::int64_t lease_ms = 0;
    std::int64_t interval_ns = 0;
    std::atomic<std::int64_t> next_beat_ns{0};
    std::atomic<bool> gone{false};  // its row expired or vanished: queue again
};

// What the optional per-backend helpers (sqlock/sqlite.hpp) need of a lease.
struct lease_access {
    static const client_impl& client(const lease& l);
};

// Random 128-bit owner id as 32 hex digits, from the kernel's CSPRNG.
std::string new_owner_id();
// "host:pid:tid" of the calling thread, for people reading the lock table.
std::string holder_description();

class client_impl : public std::enable_shared_from_this<client_impl> {
public:
    client_impl(const url_parts& url, client_options options);

    const client_options& options() const { return options_; }
    spdlog::logger& log() const { return *log_; }
    detail::dialect& dialect() { return *dialect_; }
    const detail::dialect& dialect() const { return *dialect_; }
    const sql_library& sql() const { return sql_; }

    struct attempt {
        std::shared_ptr<grant> granted;
        std::optional<std::int64_t> remaining_ms;
    };
    attempt try_grant(std::string_view key, const lock_options& options, bool want_remaining,
                      std::int64_t ticket = no_ticket);
    std::shared_ptr<grant> acquire(std::string_view key, std::chrono::milliseconds timeout,
                                   const lock_options& options);

    void release(grant& g);
    bool renew(grant& g);
    // Declares g lost (once) unless it was released: stop token, log, on_lost.
    void mark_lost(grant& g);
    // A lease of g was moved: no thread reenters g from now on.
    void end_reentry(grant& g) noexcept;

    // Watchdog work, run on the watchdog thread: renew what is due (batched),
    // declare lost what passed its deadline, sweep when due. Returns the
    // lease_clock time (ns) at which it wants to run again.
    std::int64_t background_round(std::vector<std::shared_ptr<grant>>& leases,
                                  std::vector<std::shared_ptr<waiter>>& waiters);
    std::size_t sweep_once();

    lock_info inspect(std::string_view key);
    std::vector<lock_info> locks(std::string_view prefix, std::size_t limit);
    std::vector<waiter_info> waiters(std::string_view prefix, std::size_t limit);
    std::int64_t force_release(std::string_view key, std::string_view by);
    void migrate();
    int schema_version();

    // Runs f(session&) on a pooled session. A connection_error on a session
    // that had been idle in the pool is retried once on a fresh connection:
    // the server may have restarted meanwhile. Every operation run this way is
    // safe to repeat (grants re-admit their own owner).
    template <class F>
    auto with_session(F&& f) -> decltype(f(std::declval<session&>()));

    // A session for select_for_update to pin; put_back() returns it.
    // fresh: always open a new connection.
    std::unique_ptr<session> take_session(bool fresh, bool* reused);
    void put_back(std::unique_ptr<session> s);
    void drop_idle();

    std::atomic<std::uint64_t> statements{0};
    std::atomic<std::uint64_t> acquisitions{0};
    std::atomic<std::uint64_t> contention_misses{0};
    std::atomic<std::uint64_t> releases{0};
    std::atomic<std::uint64_t> renewals{0};
    std::atomic<std::uint64_t> renewal_failures{0};
    std::atomic<std::uint64_t> leases_lost{0};
    std::atomic<std::uint64_t> rows_swept{0};
    std::atomic<std::uint64_t> watchdog_ticks{0};
    std::atomic<std::uint64_t> waits{0};       // acquisitions that queued
    std::atomic<std::uint64_t> wakeups{0};     // notifications received

    ~client_impl();
    void start_watchdog();

    // Throws schema_error unless the database is at required_schema_version().
    void check_schema();

private:
    std::shared_ptr<grant> find_reentrant(std::string_view key);
    void notify_release();
    // mark_lost without the released check: a release that finds the lease gone.
    void signal_lost(grant& g);

    client_options options_;
    std::shared_ptr<spdlog::logger> log_;
    sql_library sql_;
    dialect_context ctx_;
    std::unique_ptr<detail::dialect> dialect_;
    std::atomic<bool> schema_checked_{false};

    std::mutex pool_mu_;
    std::vector<std::unique_ptr<session>> idle_;

    void renew_batch(std::vector<std::shared_ptr<grant>>& batch);
    void renew_alone(grant& g);
    void beat_waiters(std::vector<std::shared_ptr<waiter>>& batch);
    std::shared_ptr<waiter> enqueue(std::string_view key, const lock_options& options);
    void leave_queue(std::shared_ptr<waiter>& w) noexcept;
    void start_listener();
    void listener_main(std::unique_ptr<notifier> n);
    // select_for_update: checks the pinned connection. wait: wait for a
    // ping in progress (user renew) instead of skipping (watchdog).
    void ping_pinned(grant& g, bool wait);
    void renewed_at(grant& g, std::int64_t sent);
    void watch(const std::shared_ptr<grant>& g);
    void post(grant& g, std::function<void(const std::string&, std::int64_t)> grant::*which, const char* name);
    // The bound on a watchdog statement's client-side waits: the statement
    // timeout, or less when an earlier deadline makes a later answer useless.
    std::chrono::milliseconds wait_bound(std::int64_t earliest_deadline_ns) const;

    std::shared_ptr<struct watchdog_core> watchdog_;
    std::shared_ptr<struct callback_queue> callbacks_;
    std::unique_ptr<deadline_timer> deadlines_;
    std::int64_t next_sweep_ns_ = 0;  // watchdog thread only

    std::mutex held_mu_;
    std::map<std::pair<std::uint64_t, std::string>, std::weak_ptr<grant>, std::less<>> held_;

    // PostgreSQL wake-ups: one LISTEN connection per client, on its own
    // thread, started by the first waiter. channel_ is what waiter rows name.
    std::string channel_;
    std::once_flag listener_once_;
    std::thread listener_;
    std::atomic<bool> listener_stop_{false};

    // Local waiters sleep on one process-wide condition variable: a release
    // by any client of this process wakes them at once.
    struct wake_state {
        std::mutex mu;
        std::condition_variable cv;
        std::uint64_t epoch = 0;
    };
    static wake_state& wake();
};

template <class F>
auto client_impl::with_session(F&& f) -> decltype(f(std::declval<session&>())) {
    auto run = [&](std::unique_ptr<session> s) -> decltype(f(*s)) {
        try {
            if constexpr (std::is_void_v<decltype(f(*s))>) {
                f(*s);
                put_back(std::move(s));
            } else {
                auto result = f(*s);
                put_back(std::move(s));
                return result;
            }
        } catch (const connection_error&) {
            throw;  // the session is dropped with s
        } catch (...) {
            put_back(std::move(s));  // dialects leave no transaction open when they throw
            throw;
        }
    };
    bool reused = false;
    auto s = take_session(false, &reused);
    if (!reused) return run(std::move(s));
    try {
        return run(std::move(s));
    } catch (const connection_error&) {
        drop_idle();  // its siblings are likely dead too (server restart)
    }
    return run(take_session(true, &reused));
}

}  // namespace sqlock::detail
