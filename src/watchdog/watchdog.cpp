#include "watchdog/watchdog.hpp"

#include "core/client_impl.hpp"

#include <spdlog/spdlog.h>

#include <chrono>

namespace sqlock::detail {
namespace {

std::chrono::steady_clock::time_point as_time_point(std::int64_t ns) {
    return std::chrono::steady_clock::time_point(std::chrono::nanoseconds(ns));
}

void run_on_lost(grant& g, spdlog::logger& log) {
    try {
        g.on_lost(g.key, g.token);
    } catch (const std::exception& e) {
        log.error("on_lost callback for '{}' threw: {}", g.key, e.what());
    } catch (...) {
        log.error("on_lost callback for '{}' threw a non-standard exception", g.key);
    }
}

void watchdog_main(std::shared_ptr<watchdog_core> core, std::weak_ptr<client_impl> weak) {
    std::int64_t wake = steady_now_ns();
    for (;;) {
        std::vector<std::shared_ptr<grant>> callbacks, leases;
        std::vector<std::shared_ptr<waiter>> waiters;
        {
            std::unique_lock lock(core->mu);
            core->wake_ns = wake;
            core->cv.wait_until(lock, as_time_point(wake),
                                [&] { return core->stopping || core->dirty || !core->lost_queue.empty(); });
            if (core->stopping) return;
            core->dirty = false;
            callbacks.swap(core->lost_queue);
            auto& watched = core->leases;
            for (std::size_t i = 0; i < watched.size();) {
                auto g = watched[i].lock();
                bool drop = !g;
                if (g) {
                    std::lock_guard glock(g->mu);
                    drop = g->released;
                }
                if (drop) {
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
        // Callbacks and database work run outside the mutex.
        for (auto& g : callbacks) run_on_lost(*g, g->client->log());
        callbacks.clear();
        auto client = weak.lock();
        if (!client) return;
        try {
            wake = client->background_round(leases, waiters);
        } catch (const std::exception& e) {
            client->log().error("watchdog round failed: {}", e.what());
            wake = steady_now_ns() + 100'000'000;
        }
        leases.clear();
        waiters.clear();
        client.reset();  // may destroy the client here; it then asks us to stop
    }
}

}  // namespace

void start_watchdog_thread(const std::shared_ptr<watchdog_core>& core, std::weak_ptr<client_impl> client) {
    core->thread = std::thread(watchdog_main, core, std::move(client));
}

void stop_watchdog_thread(watchdog_core& core) {
    {
        std::lock_guard lock(core.mu);
        core.stopping = true;
    }
    core.cv.notify_all();
    if (!core.thread.joinable()) return;
    if (core.thread.get_id() == std::this_thread::get_id()) core.thread.detach();
    else core.thread.join();
}

}  // namespace sqlock::detail
