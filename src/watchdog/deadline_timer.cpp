#include "watchdog/deadline_timer.hpp"

#include "watchdog/clock.hpp"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <algorithm>
#include <limits>
#include <mutex>
#include <stdexcept>
#include <string>
#include <system_error>
#include <vector>

namespace sqlock::detail {

constexpr std::int64_t never = never_ns;

// Shared by the client side and the thread, so that a client destroyed on
// the timer's own thread (its last lease dropped there) leaves the thread
// valid state in which to see `stopping`.
struct deadline_timer::state {
    std::function<void(lease_timing&)> expire;
    int timer = -1;  // CLOCK_BOOTTIME timerfd
    int event = -1;  // eventfd: stop
    std::mutex mu;
    std::vector<std::weak_ptr<lease_timing>> watched;
    std::int64_t armed = never;  // the deadline the timerfd is set for (lease_clock ns)
    std::size_t compact_at = 64;  // watch() drops finished grants when the list reaches this
    bool stopping = false;

    ~state() {
        if (timer >= 0) ::close(timer);
        if (event >= 0) ::close(event);
    }

    // Sets the timer to fire at lease_clock time `at`. Called with mu held.
    void arm(std::int64_t at) {
        armed = at;
        itimerspec spec{};
        if (at != never) {
            // lease_now_ns() is CLOCK_BOOTTIME unless a test replaced it; a
            // relative time keeps a replaced clock's deadlines right too.
            const std::int64_t in = std::max<std::int64_t>(at - lease_now_ns(), 1);
            spec.it_value.tv_sec = static_cast<time_t>(in / 1'000'000'000);
            spec.it_value.tv_nsec = static_cast<long>(in % 1'000'000'000);
        }
        ::timerfd_settime(timer, 0, &spec, nullptr);
    }

    void main() {
        for (;;) {
            pollfd fds[2] = {{timer, POLLIN, 0}, {event, POLLIN, 0}};
            if (::poll(fds, 2, -1) < 0) continue;  // EINTR
            std::uint64_t drained;
            if (fds[0].revents & POLLIN) [[maybe_unused]] auto n = ::read(timer, &drained, sizeof drained);
            // Grants locked here are let go after the mutex: the last
            // reference to a grant may be the last to its client, whose
            // destruction stops this timer (and takes the mutex).
            std::vector<std::shared_ptr<lease_timing>> due, seen;
            {
                std::lock_guard lock(mu);
                if (stopping) return;
                const std::int64_t now = lease_now_ns();
                std::int64_t next = never;
                for (std::size_t i = 0; i < watched.size();) {
                    auto g = watched[i].lock();
                    const bool done = !g || g->lost.load() || g->released.load();
                    const std::int64_t deadline = g ? g->deadline_ns.load() : never;
                    if (!done && now < deadline) {
                        next = std::min(next, deadline);
                        seen.push_back(std::move(g));
                        ++i;
                        continue;
                    }
                    if (!done) due.push_back(std::move(g));
                    else if (g) seen.push_back(std::move(g));
                    watched[i] = std::move(watched.back());
                    watched.pop_back();
                }
                arm(next);
            }
            seen.clear();
            // Outside the mutex: expire() logs and requests stop, whose
            // callbacks are the application's.
            for (auto& g : due) expire(*g);
            due.clear();  // may destroy the client, which then stops us
        }
    }
};

deadline_timer::deadline_timer(std::function<void(lease_timing&)> expire) : state_(std::make_shared<state>()) {
    state_->expire = std::move(expire);
    state_->timer = ::timerfd_create(CLOCK_BOOTTIME, TFD_CLOEXEC | TFD_NONBLOCK);
    state_->event = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (state_->timer < 0 || state_->event < 0)
        throw std::system_error(errno, std::generic_category(), "sqlock: cannot create the deadline timer");
    thread_ = std::thread([s = state_] { s->main(); });
}

deadline_timer::~deadline_timer() {
    {
        std::lock_guard lock(state_->mu);
        state_->stopping = true;
    }
    const std::uint64_t one = 1;
    [[maybe_unused]] auto n = ::write(state_->event, &one, sizeof one);
    if (thread_.get_id() == std::this_thread::get_id()) thread_.detach();
    else thread_.join();
}

void deadline_timer::watch(const std::shared_ptr<lease_timing>& g) {
    std::vector<std::shared_ptr<lease_timing>> seen;  // let go after the mutex (see main)
    std::lock_guard lock(state_->mu);
    auto& watched = state_->watched;
    if (watched.size() >= state_->compact_at) {
        // Released grants leave the list when the timer next fires; with many
        // short holds and long leases, that can be a while.
        std::erase_if(watched, [&](const std::weak_ptr<lease_timing>& w) {
            auto x = w.lock();
            const bool done = !x || x->lost.load() || x->released.load();
            if (x) seen.push_back(std::move(x));
            return done;
        });
        state_->compact_at = std::max<std::size_t>(64, 2 * watched.size());
    }
    watched.push_back(g);
    const std::int64_t deadline = g->deadline_ns.load();
    if (deadline < state_->armed) state_->arm(deadline);
}

}  // namespace sqlock::detail
