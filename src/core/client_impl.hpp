#pragma once
// Internals of sqlock::client: the connection pool, grants and counters.

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

// One acquisition's state, shared by the reentrant leases that reuse it.
struct grant : std::enable_shared_from_this<grant> {
    std::shared_ptr<client_impl> client;
    std::string key;
    std::string owner;
    std::int64_t token = 0;
    sqlock::mode mode = sqlock::mode::conditional_update;
    std::int64_t lease_ms = 0;
    std::int64_t margin_ms = 0;
    std::thread::id thread;  // where it was taken, for reentrancy
    bool reentrant = false;
    bool auto_renew = true;
    std::int64_t interval_ns = 0;   // between automatic renewals
    std::int64_t hold_until_ns = 0; // no automatic renewal after this (max_hold)
    std::function<void(const std::string&, std::int64_t)> on_lost, on_renewed;
    std::stop_source stop;          // requested when lost

    // Monotonic deadline in steady_clock nanoseconds: when the last confirmed
    // grant or renewal was sent, plus the lease, minus the safety margin.
    std::atomic<std::int64_t> deadline_ns{0};
    std::atomic<std::int64_t> next_renew_ns{0};
    std::atomic<bool> lost{false};

    // Guards the fields below. Also held while the pinned session is in use
    // (a ping by the watchdog, a rollback at release): that connection is
    // this lease's alone, so only this lease's own operations ever wait here.
    std::mutex mu;
    int depth = 1;
    bool released = false;
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

std::int64_t steady_now_ns() noexcept;

class client_impl : public std::enable_shared_from_this<client_impl> {
public:
    client_impl(const url_parts& url, client_options options);

    const client_options& options() const { return options_; }
    spdlog::logger& log() const { return *log_; }
    detail::dialect& dialect() { return *dialect_; }
    const detail::dialect& dialect() const { return *dialect_; }
    const sql_library& sql() const { return sql_; }

    struct attempt {
        std::optional<lease> granted;
        std::optional<std::int64_t> remaining_ms;
    };
    attempt try_grant(std::string_view key, const lock_options& options, bool want_remaining,
                      std::int64_t ticket = no_ticket);
    lease acquire(std::string_view key, std::chrono::milliseconds timeout, const lock_options& options);

    void release(grant& g);
    bool renew(grant& g);
    void mark_lost(grant& g);

    // Watchdog work, run on the watchdog thread: renew what is due (batched),
    // declare lost what passed its deadline, sweep when due. Returns the
    // steady time (ns) at which it wants to run again.
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

    client_options options_;
    std::shared_ptr<spdlog::logger> log_;
    sql_library sql_;
    dialect_context ctx_;
    std::unique_ptr<detail::dialect> dialect_;
    std::atomic<bool> schema_checked_{false};

    std::mutex pool_mu_;
    std::vector<std::unique_ptr<session>> idle_;

    void renew_batch(std::vector<std::shared_ptr<grant>>& batch);
    void beat_waiters(std::vector<std::shared_ptr<waiter>>& batch);
    std::shared_ptr<waiter> enqueue(std::string_view key, const lock_options& options);
    void leave_queue(std::shared_ptr<waiter>& w) noexcept;
    void start_listener();
    void listener_main(std::unique_ptr<notifier> n);
    void ping_pinned(grant& g);
    void end_pinned(grant& g) noexcept;
    void renewed_at(grant& g, std::int64_t sent);
    void watch(const std::shared_ptr<grant>& g);
    void post(grant& g, std::function<void(const std::string&, std::int64_t)> grant::*which, const char* name);

    std::shared_ptr<struct watchdog_core> watchdog_;
    std::shared_ptr<struct callback_queue> callbacks_;
    std::int64_t next_sweep_ns_ = 0;  // watchdog thread only

    std::mutex held_mu_;
    std::map<std::pair<std::thread::id, std::string>, std::weak_ptr<grant>, std::less<>> held_;

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
