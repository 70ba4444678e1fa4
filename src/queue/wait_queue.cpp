#include "queue/wait_queue.hpp"

#include "watchdog/clock.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>

namespace sqlock::detail {

wait_queue::wait_queue(dialect& d, session_pool& pool, watchdog& dog, spdlog::logger& log, counters c,
                       std::string channel)
    : dialect_(d), pool_(pool), watchdog_(dog), log_(log), counters_(c), channel_(std::move(channel)) {}

std::shared_ptr<ticket_timing> wait_queue::enqueue(std::string_view key, const lock_options& options,
                                                   std::string_view owner, std::string_view holder, char kind) {
    const bool wake_ups = dialect_.capabilities().wake_ups;
    if (wake_ups)
        std::call_once(listen_once_, [this] {
            // Listen before the first waiter row names the channel, so that
            // the first release already finds someone listening.
            listener_ = std::make_unique<listener>(dialect_, channel_, log_, counters_.wakeups);
        });
    auto w = std::make_shared<ticket_timing>();
    // A ticket is a lease of its own, heartbeated like one, but no longer
    // than 5 s whatever the lock's lease: a frozen or partitioned waiter
    // holds up the waiters behind it (and, since nobody may barge past it,
    // the key) only until its row expires.
    w->lease_ms = std::min<std::int64_t>(options.lease.count(), max_ticket_lease_ms);
    w->interval_ns = std::max<std::int64_t>(w->lease_ms / 3, 1) * 1'000'000;
    const waiter_request request{key,
                                 kind,
                                 owner,
                                 options.fair,
                                 options.fair ? options.priority : 0,
                                 w->lease_ms,
                                 wake_ups ? std::string_view(channel_) : std::string_view(),
                                 holder};
    const std::int64_t sent = lease_now_ns();
    w->ticket = pool_.with_session([&](session& s) { return s.enqueue(request); });
    w->next_beat_ns = sent + w->interval_ns;
    ++counters_.waits;
    watchdog_.watch(w);
    return w;
}

void wait_queue::leave(std::shared_ptr<ticket_timing>& w) noexcept {
    if (!w) return;
    const std::int64_t ticket = w->ticket;
    w.reset();  // the watchdog holds it weakly: it stops heartbeating now
    try {
        pool_.with_session([&](session& s) { s.dequeue(ticket); });
    } catch (const std::exception& e) {
        log_.warn("leaving the wait queue failed (the ticket will expire): {}", e.what());
    }
}

std::vector<bool> wait_queue::heartbeat(session_pool& pool, const std::vector<ticket_timing*>& batch) {
    std::vector<detail::heartbeat> items;  // the struct, not this function
    items.reserve(batch.size());
    for (auto* w : batch) items.push_back({w->ticket, w->lease_ms});
    try {
        return pool.with_session([&](session& s) { return s.beat_waiters(items); });
    } catch (const std::exception& e) {
        log_.warn("heartbeating {} waiter(s) failed, retrying: {}", batch.size(), e.what());
        throw;
    }
}

}  // namespace sqlock::detail
