#include "watchdog/watchdog.hpp"

#include "watchdog/clock.hpp"
#include "watchdog/threads.hpp"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <vector>

namespace sqlock::detail {

struct watchdog::state {
    std::weak_ptr<keeper> work;
    renewal_schedule schedule;
    std::mutex mu;
    std::condition_variable cv;
    bool stopping = false;
    bool dirty = false;           // a new item wants an earlier round
    std::int64_t wake_ns = 0;     // when the thread will next run by itself
    std::vector<std::weak_ptr<lease_timing>> leases;
    std::vector<std::weak_ptr<ticket_timing>> tickets;
    std::atomic<std::uint64_t> ticks{0};

    state(std::weak_ptr<keeper> k, std::size_t batch_size) : work(std::move(k)), schedule(batch_size) {}

    void wake_if_before(std::int64_t due) {
        {
            std::lock_guard lock(mu);
            if (due >= wake_ns) return;
            dirty = true;
        }
        cv.notify_one();
    }

    void main() {
        std::int64_t wake = lease_now_ns();
        for (;;) {
            std::vector<std::shared_ptr<lease_timing>> live_leases, finished;
            std::vector<std::shared_ptr<ticket_timing>> live_tickets;
            {
                std::unique_lock lock(mu);
                wake_ns = wake;
                // Deadlines are on lease_clock (CLOCK_BOOTTIME); the wait is on
                // steady_clock, so it is relative and at most a second: a
                // suspend is noticed within a second of resuming.
                const auto in = std::chrono::nanoseconds(std::clamp<std::int64_t>(wake - lease_now_ns(), 0, 1'000'000'000));
                cv.wait_for(lock, in, [&] { return stopping || dirty; });
                if (stopping) return;
                dirty = false;
                collect(leases, live_leases, finished,
                        [](const lease_timing& l) { return l.released.load() || l.lost.load(); });
                std::vector<std::shared_ptr<ticket_timing>> unused;
                collect(tickets, live_tickets, unused, [](const ticket_timing&) { return false; });
                wake_ns = never_ns;  // busy: callers need not wake us
            }
            // Database work runs outside the mutex, holding the client: it
            // cannot be destroyed in the middle of a round.
            auto k = work.lock();
            if (!k) return;
            try {
                const auto r = schedule.round(lease_now_ns(), *k, live_leases, live_tickets);
                if (r.statements > 0) ++ticks;
                wake = r.next;
            } catch (...) {
                wake = lease_now_ns() + 100'000'000;  // a keeper that throws is logged by it; look again soon
            }
            // Let go of the leases before the client: the last reference to
            // a lease may be the last to the client, whose destruction (on
            // this thread, then) asks us to stop.
            finished.clear();
            live_leases.clear();
            live_tickets.clear();
            k.reset();
        }
    }

    // Moves the live entries of `watched` into `out` and stops watching
    // finished ones, which go to `dropped`: they are let go after the mutex
    // (see main), as a dropped one may hold a last reference too.
    template <class T, class Done>
    static void collect(std::vector<std::weak_ptr<T>>& watched, std::vector<std::shared_ptr<T>>& out,
                        std::vector<std::shared_ptr<T>>& dropped, Done done) {
        for (std::size_t i = 0; i < watched.size();) {
            auto x = watched[i].lock();
            if (x && !done(*x)) {
                out.push_back(std::move(x));
                ++i;
                continue;
            }
            if (x) dropped.push_back(std::move(x));
            watched[i] = std::move(watched.back());
            watched.pop_back();
        }
    }
};

watchdog::watchdog(std::weak_ptr<keeper> k, std::size_t batch_size)
    : state_(std::make_shared<state>(std::move(k), batch_size)) {
    thread_ = std::thread([s = state_] { s->main(); });
}

watchdog::~watchdog() { stop_thread(state_->mu, state_->stopping, state_->cv, thread_); }

void watchdog::watch(const std::shared_ptr<lease_timing>& lease) {
    {
        std::lock_guard lock(state_->mu);
        state_->leases.push_back(lease);
    }
    const std::int64_t first = lease->auto_renew ? std::min(lease->next_renew_ns.load(), lease->deadline_ns.load())
                                                 : lease->deadline_ns.load();
    state_->wake_if_before(first);
}

void watchdog::watch(const std::shared_ptr<ticket_timing>& ticket) {
    {
        std::lock_guard lock(state_->mu);
        state_->tickets.push_back(ticket);
    }
    state_->wake_if_before(ticket->next_beat_ns.load());
}

std::uint64_t watchdog::ticks() const { return state_->ticks.load(); }

}  // namespace sqlock::detail
