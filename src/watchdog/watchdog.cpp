#include "watchdog/watchdog.hpp"

#include "core/client_impl.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>

namespace sqlock::detail {
namespace {

void watchdog_main(std::shared_ptr<watchdog_core> core, std::weak_ptr<client_impl> weak) {
    std::int64_t wake = lease_now_ns();
    for (;;) {
        std::vector<std::shared_ptr<grant>> leases;
        std::vector<std::shared_ptr<waiter>> waiters;
        // Let go after the mutex: a last reference to a grant may be the last
        // to the client, whose destruction stops this thread (taking the mutex).
        std::vector<std::shared_ptr<grant>> dropped;
        {
            std::unique_lock lock(core->mu);
            core->wake_ns = wake;
            // Deadlines are on lease_clock (CLOCK_BOOTTIME); the wait is on
            // steady_clock, so it is relative and at most a second: a suspend
            // is noticed within a second of resuming.
            const auto in = std::chrono::nanoseconds(std::clamp<std::int64_t>(wake - lease_now_ns(), 0, 1'000'000'000));
            core->cv.wait_for(lock, in, [&] { return core->stopping || core->dirty; });
            if (core->stopping) return;
            core->dirty = false;
            auto& watched = core->leases;
            for (std::size_t i = 0; i < watched.size();) {
                auto g = watched[i].lock();
                if (!g || g->released.load()) {
                    if (g) dropped.push_back(std::move(g));
                    watched[i] = std::move(watched.back());
                    watched.pop_back();
                } else {
                    leases.push_back(std::move(g));
                    ++i;
                }
            }
            auto& queued = core->waiters;
            for (std::size_t i = 0; i < queued.size();) {
                if (auto w = queued[i].lock()) {
                    waiters.push_back(std::move(w));
                    ++i;
                } else {
                    queued[i] = std::move(queued.back());
                    queued.pop_back();
                }
            }
            core->wake_ns = std::numeric_limits<std::int64_t>::max();  // busy: callers need not wake us
        }
        // Database work runs outside the mutex.
        auto client = weak.lock();
        if (!client) return;
        try {
            wake = client->background_round(leases, waiters);
        } catch (const std::exception& e) {
            client->log().error("watchdog round failed: {}", e.what());
            wake = lease_now_ns() + 100'000'000;
        }
        dropped.clear();
        leases.clear();
        waiters.clear();
        client.reset();  // may destroy the client here; it then asks us to stop
    }
}

void callback_main(std::shared_ptr<callback_queue> queue) {
    for (;;) {
        std::function<void()> fn;
        {
            std::unique_lock lock(queue->mu);
            queue->cv.wait(lock, [&] { return queue->stopping || !queue->pending.empty(); });
            if (queue->stopping) return;
            fn = std::move(queue->pending.front());
            queue->pending.pop_front();
        }
        fn();       // catches what the user's callback throws
        fn = nullptr;  // may destroy the client here; it then asks us to stop
    }
}

void stop_thread(std::mutex& mu, bool& stopping, std::condition_variable& cv, std::thread& thread) {
    {
        std::lock_guard lock(mu);
        stopping = true;
    }
    cv.notify_all();
    if (!thread.joinable()) return;
    if (thread.get_id() == std::this_thread::get_id()) thread.detach();
    else thread.join();
}

}  // namespace

void start_watchdog_thread(const std::shared_ptr<watchdog_core>& core, std::weak_ptr<client_impl> client) {
    core->thread = std::thread(watchdog_main, core, std::move(client));
}

void stop_watchdog_thread(watchdog_core& core) {
    stop_thread(core.mu, core.stopping, core.cv, core.thread);
}

void start_callback_thread(const std::shared_ptr<callback_queue>& queue) {
    queue->thread = std::thread(callback_main, queue);
}

void post_callback(callback_queue& queue, std::function<void()> fn) {
    {
        std::lock_guard lock(queue.mu);
        queue.pending.push_back(std::move(fn));
    }
    queue.cv.notify_one();
}

void stop_callback_thread(callback_queue& queue) {
    stop_thread(queue.mu, queue.stopping, queue.cv, queue.thread);
}

}  // namespace sqlock::detail
