// Acquisition: one try (try_grant), and the wait for a busy key (acquire):
// jittered exponential backoff bounded by the holder's remaining lease, a
// ticket in the wait queue for fair waiters (and for every waiter where the
// database can wake them), and wake-ups from releases in this process.

#include "core/client_impl.hpp"
#include "core/row_lock.hpp"
#include "core/validate.hpp"
#include "queue/wait_queue.hpp"
#include "queue/wakeups.hpp"
#include "watchdog/clock.hpp"
#include "watchdog/deadline_timer.hpp"
#include "watchdog/watchdog.hpp"

#include <spdlog/spdlog.h>

#include <random>

namespace sqlock::detail {

std::shared_ptr<grant> client_impl::new_grant(std::string_view key, const lock_options& options) {
    auto g = std::make_shared<grant>();
    g->client = shared_from_this();
    g->key = std::string(key);
    g->owner = new_owner_id();
    g->mode = options.mode;
    g->lease_ms = options.lease.count();
    g->margin_ms = effective_margin(options).count();
    g->thread = thread_serial();
    g->reentrant = options.reentrant;
    g->auto_renew = options.auto_renew;
    g->pinged = options.mode == mode::select_for_update;
    g->interval_ns = ms_to_ns(effective_renew_interval(options).count());
    g->on_lost = options.on_lost;
    g->on_renewed = options.on_renewed;
    return g;
}

void client_impl::watch(const std::shared_ptr<grant>& g, const lock_options& options, std::int64_t sent) {
    // The database's expiry is its clock at the statement + lease (for
    // select_for_update: the server's idle limit after the last statement);
    // that statement ran after `sent`, so this deadline is never later.
    g->confirmed(sent);
    g->hold_until_ns = options.max_hold.count() > 0 ? saturating_add(sent, ms_to_ns(options.max_hold.count()))
                                                      : never_ns;
    ++counters_.acquisitions;
    if (options.reentrant) reentry_.add(g);
    deadlines_->watch(g);
    watchdog_->watch(g);
    log_->debug("acquired '{}' token {} mode {} owner {}", g->key, g->token, to_string(g->mode), g->owner);
}

client_impl::attempt client_impl::try_grant(std::string_view key, const lock_options& options,
                                            bool want_remaining, std::int64_t ticket) {
    validate_key(key);
    validate_lock_options(options);
    if (options.mode == mode::select_for_update && !dialect_->capabilities().row_locks)
        throw config_error(std::string("select_for_update needs row locks, which ") + std::string(dialect_->name()) +
                           " does not have (it locks the whole database file): use conditional_update or "
                           "unique_insert");
    check_schema();
    if (options.reentrant) {
        if (auto g = reentry_.find(key)) return {std::move(g), std::nullopt};
    }
    auto g = new_grant(key, options);
    attempt out;
    const std::int64_t sent = lease_now_ns();
    // Not fair: every live fair waiter is ahead. Fair without a ticket yet:
    // waiters of the same or higher priority are ahead.
    const std::int64_t priority = options.fair ? options.priority : not_fair;
    if (options.mode == mode::select_for_update) {
        auto taken = row_lock_holder::try_take(pool_, key, g->lease_ms, ticket, priority);
        if (!taken.holder) {
            ++counters_.contention_misses;
            if (want_remaining) out.remaining_ms = taken.remaining_ms;
            return out;
        }
        g->token = taken.token;
        g->row_lock = std::move(taken.holder);
    } else {
        const std::string holder = holder_description();
        const grant_request request{key,           g->owner,       options.mode, g->lease_ms, holder,
                                    options.note, want_remaining, ticket,       priority};
        const grant_result r = pool_.with_session([&](session& s) { return s.grant(request); });
        if (!r.token) {
            ++counters_.contention_misses;
            out.remaining_ms = r.remaining_ms;
            return out;
        }
        g->token = *r.token;
    }
    watch(g, options, sent);
    out.granted = std::move(g);
    return out;
}

std::shared_ptr<grant> client_impl::acquire(std::string_view key, std::chrono::milliseconds timeout,
                                            const lock_options& options) {
    validate_timeout(timeout);
    // A timeout too long to add to the clock (~292 years and more) waits forever.
    const auto start = std::chrono::steady_clock::now();
    const bool forever =
        timeout >= std::chrono::floor<std::chrono::milliseconds>(std::chrono::steady_clock::time_point::max() - start);
    const auto deadline = forever ? std::chrono::steady_clock::time_point::max() : start + timeout;
    // Fair waiters queue. Where releases wake waiters through the database,
    // every waiter does, so that the head of the queue is woken.
    const bool wake_ups = dialect_->capabilities().wake_ups;
    const bool queues = options.fair || wake_ups;
    // Without notifications a queued waiter polls; its backoff stays short so
    // that handoffs to it stay prompt.
    const std::int64_t max_backoff_ms = queues && !wake_ups ? 250 : 1000;
    std::stop_callback on_cancel(options.cancel, [] { wakeups::notify(); });
    thread_local std::minstd_rand jitter(std::random_device{}());
    std::shared_ptr<ticket_timing> queued;
    std::int64_t backoff_ms = 4;
    try {
        for (;;) {
            const std::uint64_t epoch = wakeups::epoch();
            auto tried = try_grant(key, options, true, queued ? queued->ticket : no_ticket);
            if (tried.granted) {
                queued.reset();  // the grant removed its row
                return std::move(tried.granted);
            }
            const auto now = std::chrono::steady_clock::now();
            if (now >= deadline)
                throw timeout_error("timed out after " + std::to_string(timeout.count()) + " ms waiting for lock '" +
                                    std::string(key) + "'");
            if (options.cancel.stop_requested())
                throw cancelled_error("acquire of '" + std::string(key) + "' was cancelled");
            if (queues && (!queued || queued->gone.load())) {
                // Take a ticket (again, if our row expired: others may have
                // passed it) and try at once: the key may have been freed
                // while we queued.
                queue_->leave(queued);
                queued = queue_->enqueue(key, options, new_owner_id(), holder_description());
                continue;
            }
            // Exponential backoff with jitter, but never sleep past the moment
            // the holder's lease runs out: that is when the key can next be free.
            std::int64_t sleep_ms = std::uniform_int_distribution<std::int64_t>(backoff_ms / 2, backoff_ms)(jitter);
            if (tried.remaining_ms) sleep_ms = std::min(sleep_ms, *tried.remaining_ms + 1);
            sleep_ms = std::max<std::int64_t>(sleep_ms, 1);
            backoff_ms = std::min(backoff_ms * 2, max_backoff_ms);
            const auto wake_at = std::min(now + std::chrono::milliseconds(sleep_ms), deadline);
            wakeups::wait(epoch, wake_at,
                          [&] { return options.cancel.stop_requested() || (queued && queued->gone.load()); });
        }
    } catch (...) {
        queue_->leave(queued);
        throw;
    }
}

}  // namespace sqlock::detail
