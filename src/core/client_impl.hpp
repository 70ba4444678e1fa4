#pragma once
// Inside sqlock::client. The client owns its connections (core/pool), its
// dialect, and its components, each in a folder of its own: the watchdog and
// the deadline timer (src/watchdog), the wait queue and wake-ups
// (src/queue), the sweeper (src/sweeper). What is here ties them together:
// acquisition (acquire.cpp), the leases' operations and the watchdog's work
// (leases.cpp), and the facade and admin operations (client.cpp).

#include "core/grant.hpp"
#include "core/lease_set.hpp"
#include "core/telemetry.hpp"
#include "pool/pool.hpp"
#include "core/url.hpp"
#include "dialects/dialect.hpp"
#include "watchdog/schedule.hpp"

#include <sqlock/client.hpp>
#include <sqlock/errors.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace spdlog {
class logger;
}

namespace sqlock::detail {

class callback_queue;
class deadline_timer;
class sql_library;
class sweeper;
class wait_queue;
class watchdog;

// What the optional per-backend helpers need of a lease.
struct lease_access {
    static client_impl& client(const lease& l);
    static const grant& of(const lease& l);
    // of(l), for fencing a write: config_error for a semaphore permit, which
    // fences nothing (a key has several at once).
    static const grant& fenceable(const lease& l);
};

// The client's counters (client_stats).
struct counters {
    std::atomic<std::uint64_t> statements{0}, acquisitions{0}, contention_misses{0}, releases{0}, renewals{0},
        renewal_failures{0}, leases_lost{0}, rows_swept{0}, waits{0}, wakeups{0};
};

// What an acquisition asks for: an exclusive lease ('X'), a shared one
// ('S'), or one of `permits` permits of a semaphore ('P').
struct hold_request {
    char kind = 'X';
    std::int64_t permits = 0;
};

class client_impl : public keeper, public std::enable_shared_from_this<client_impl> {
public:
    client_impl(const url_parts& url, client_options options);
    ~client_impl() override;
    // Connects once (a wrong URL or an unreachable server fails here) and
    // starts the background threads. Called once, after make_shared.
    void start();
    // The application let go of the client: its last copy and last lease are
    // gone. Ends the listener's calls now, on the caller's thread, although
    // a background thread may still hold this object for a moment.
    void close_events();

    const client_options& options() const { return ctx_.options; }
    spdlog::logger& log() const { return *log_; }
    detail::dialect& dialect() { return *dialect_; }
    const detail::dialect& dialect() const { return *dialect_; }
    const sql_library& sql() const;
    counters& stats() { return counters_; }
    const counters& stats() const { return counters_; }
    std::uint64_t watchdog_ticks() const;
    const detail::telemetry& telemetry() const { return telemetry_; }
    // client::metrics_text() (metrics.cpp).
    std::string metrics_text() const;

    // --- acquisition (acquire.cpp) ---
    struct attempt {
        std::shared_ptr<grant> granted;
        bool reentered = false;                    // granted is the calling thread's own grant, reused
        std::optional<std::int64_t> remaining_ms;  // contention: the holder's remaining lease, when known
    };
    // A grant through the pool; a refused repeat of it (the first run's
    // answer lost) releases what the first run may have taken.
    grant_result grant_once(std::string_view key, const std::function<grant_result(session&)>& grant,
                            const std::function<bool(session&)>& release);
    // One try. ticket: the requester's place in the wait queue, if it has one.
    // started: when the caller's try_acquire() or acquire() began (lease_clock ns).
    // what: an exclusive lease (the default), a shared one, or a permit.
    attempt try_grant(std::string_view key, const lock_options& options, bool want_remaining,
                      std::int64_t ticket, std::int64_t started, const hold_request& what = {});
    // client::try_acquire(): one try, counted by outcome. Null when busy.
    std::shared_ptr<grant> try_acquire(std::string_view key, const lock_options& options,
                                       const hold_request& what = {});
    // Tries until granted, timed out (timeout_error) or cancelled (cancelled_error).
    std::shared_ptr<grant> acquire(std::string_view key, std::chrono::milliseconds timeout,
                                   const lock_options& options, const hold_request& what = {});
    // --- multi-key locks (acquire.cpp) ---
    // A set's grants, in key order (empty when a key was busy), and the
    // signals of the round that granted them.
    struct granted_set {
        std::vector<std::shared_ptr<grant>> grants;
        std::shared_ptr<set_signals> signals;
    };
    // client::try_acquire_all() and acquire_all(); `keys` as canonical_keys()
    // returns them, options checked by check_set_options().
    granted_set try_acquire_set(const std::vector<std::string>& keys, const lock_options& options);
    granted_set acquire_set(const std::vector<std::string>& keys, std::chrono::milliseconds timeout,
                            const lock_options& options);
    // A granted set made a multi_lease's state: its leases, the watches that
    // make any key's stop the set's, and its signals armed (a key lost
    // already is told at once, on the callback thread).
    lease_set_ref hand_out(std::vector<std::string> keys, granted_set set, std::shared_ptr<const void> user);
    // Throws config_error for a shared or permit request the library cannot
    // serve (bad permits, select_for_update), before any SQL.
    void check_hold(const hold_request& what, const lock_options& options) const;
    // client::set_permits() and client::holders().
    void set_permits(std::string_view name, std::int64_t permits);
    std::vector<holder_info> holders(std::string_view prefix, std::size_t limit);

    // --- a lease's operations (leases.cpp) ---
    void release(grant& g);
    bool renew(grant& g);
    // Declares g lost (once) unless it was released: stop token, log, on_lost, event.
    void mark_lost(grant& g, loss_cause cause);
    // A select_for_update hold found forced or gone: marks g lost, then ends
    // its row lock.
    void end_broken_hold(grant& g, loss_cause cause);
    // A lease of g was moved: no thread reenters g from now on.
    void end_reentry(grant& g) noexcept;

    // --- administration (client.cpp) ---
    lock_info inspect(std::string_view key);
    std::vector<lock_info> locks(std::string_view prefix, std::size_t limit);
    std::vector<waiter_info> waiters(std::string_view prefix, std::size_t limit);
    std::int64_t force_release(std::string_view key, std::string_view by);
    std::size_t sweep();
    void migrate();
    int schema_version();
    // Throws schema_error unless the database is at the library's schema version.
    void check_schema();

    // Runs f(session&) on a pooled session (see session_pool::with_session).
    template <class F>
    auto with_session(F&& f) -> decltype(f(std::declval<session&>())) {
        return pool_.with_session(std::forward<F>(f));
    }

    // --- the watchdog's work (keeper; leases.cpp) ---
    std::vector<outcome> renew(const std::vector<lease_timing*>& batch) override;
    outcome ping(lease_timing& lease) override;
    std::vector<bool> heartbeat(const std::vector<ticket_timing*>& batch) override;
    void renewed(lease_timing& lease) override;
    void lost(lease_timing& lease) override;
    void tickets_gone() override;
    std::int64_t periodic(std::int64_t now) override;

private:
    // One try of a waiting acquisition: granted (got.granted set), or the
    // key whose queue to wait in and what the holder's lease has left.
    struct wait_step {
        attempt got;
        std::string_view queue_key;
    };
    // The wait shared by acquire() and acquire_set(): try_once(ticket,
    // queued key, started) until it grants, the timeout passes
    // (timeout_error) or options.cancel stops it (cancelled_error), holding
    // a ticket in the queue of the key try_once last found busy. `what`
    // names the wait in messages ("lock 'k'"); `event_key` in events.
    std::shared_ptr<grant> wait_for(
        std::string_view what, std::string_view event_key, std::chrono::milliseconds timeout,
        const lock_options& options, char kind,
        const std::function<wait_step(std::int64_t ticket, std::string_view queued, std::int64_t started)>& try_once);
    // One round of a set: each key with a try-grant (the queued key first,
    // then key order); on a miss the keys taken in this round are given back
    // and `missing` names the busy one. With `held` (a set that has waited
    // long): strictly in key order after the keys held already, and on a
    // miss the keys taken are kept in `held` too, with its signals.
    struct set_attempt {
        granted_set granted;
        std::size_t missing = 0;
        std::optional<std::int64_t> remaining_ms;
    };
    set_attempt try_grant_set(const std::vector<std::string>& keys, const lock_options& options,
                              std::int64_t ticket, std::string_view ticket_key, std::int64_t started,
                              granted_set* held = nullptr);
    // Releases grants of an unfinished set, last first; never throws.
    void give_back(std::vector<std::shared_ptr<grant>>& grants) noexcept;
    std::shared_ptr<grant> new_grant(std::string_view key, const lock_options& options, char kind = 'X');
    // A grant made: register it for reentrancy and with the watchdog and the
    // timer. sent: when the granting attempt was sent; answered: when it
    // answered; started: when the caller's call began (lease_clock ns).
    void watch(const std::shared_ptr<grant>& g, const lock_options& options, std::int64_t sent,
               std::int64_t answered, std::int64_t started);
    // mark_lost without the released check: a release that finds the lease gone.
    void signal_lost(grant& g, loss_cause cause);
    // A renewal sent at `sent` was confirmed; false when g was lost meanwhile.
    bool confirm_renewal(grant& g, std::int64_t sent, std::int64_t db_ns);
    // The grant's hold is over (released or lost): counted once.
    void end_hold(grant& g, std::int64_t now) noexcept;
    // Events (only when a listener is set: check events_ first).
    lock_event event_of(const grant& g, event_kind kind) const;
    // Posts an event about g unless its released event was posted already.
    void post_event(grant& g, lock_event e);
    // An automatic renewal of g failed for a passing reason.
    void renewal_failed(grant& g, std::int64_t sent, const std::string& why);
    outcome renew_alone(grant& g);
    // renew_alone for a shared holder or permit.
    renew_result renew_holder_alone(session& s, const grant& g);
    // Runs `which` of g's callbacks on the callback thread.
    void post(grant& g, std::function<void(const std::string&, std::int64_t)> grant::*which, const char* name);
    // The bound on a watchdog statement's client-side waits: the statement
    // timeout, or less when an earlier deadline makes a later answer useless.
    std::chrono::milliseconds wait_bound(std::int64_t earliest_deadline_ns) const;

    dialect_context ctx_;
    std::shared_ptr<spdlog::logger> log_;
    counters counters_;
    detail::telemetry telemetry_;
    std::unique_ptr<detail::dialect> dialect_;
    session_pool pool_;           // the application's operations: at most pool_size at once
    session_pool watchdog_pool_;  // the watchdog's own connection
    std::atomic<bool> schema_checked_{false};
    reentry_registry reentry_;
    // Background components: started by start(), stopped (in this order) by
    // the destructor, before anything they use goes.
    std::unique_ptr<deadline_timer> deadlines_;
    std::unique_ptr<watchdog> watchdog_;
    std::unique_ptr<wait_queue> queue_;
    std::unique_ptr<sweeper> sweeper_;
    std::unique_ptr<callback_queue> callbacks_;
    std::unique_ptr<event_sink> events_;  // null without a listener: no event is made
};

}  // namespace sqlock::detail
