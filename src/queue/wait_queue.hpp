#pragma once
// The waiter table from the client's side: a blocking acquisition that must
// wait takes a ticket (a row in <prefix>waiters), which the watchdog
// heartbeats like a lease until the acquisition is granted, gives up, or
// dies. Fair acquisitions are served by priority, then ticket; a crashed
// waiter's row expires and stops counting. Every blocking acquisition queues,
// fair or not (those that are not fair cannot be passed by a releaser once
// they have waited 2 ms). Where the dialect has wake-ups (PostgreSQL NOTIFY,
// MariaDB's doorbell, SQLite's datagram socket), a listener wakes this
// process's waiters when a release names this client's channel.

#include "pool/pool.hpp"
#include "dialects/dialect.hpp"
#include "queue/listener.hpp"
#include "watchdog/schedule.hpp"
#include "watchdog/watchdog.hpp"

#include <sqlock/options.hpp>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

namespace spdlog {
class logger;
}

namespace sqlock::detail {

// The longest lease of a waiter's row (see wait_queue::enqueue).
inline constexpr std::int64_t max_ticket_lease_ms = 5000;

class wait_queue {
public:
    struct counters {
        std::atomic<std::uint64_t>& waits;     // tickets taken
        std::atomic<std::uint64_t>& wakeups;   // notifications received
    };
    // channel: what this client's waiter rows name for wake-ups (used only
    // where the dialect has them).
    wait_queue(dialect& d, session_pool& pool, watchdog& dog, spdlog::logger& log, counters c, std::string channel);

    // Takes a ticket for key, heartbeated from now on. owner and holder are
    // stored with it, for people reading the queue.
    // kind: what it waits for ('X' exclusive, 'S' shared, 'P' a permit).
    std::shared_ptr<ticket_timing> enqueue(std::string_view key, const lock_options& options, std::string_view owner,
                                           std::string_view holder, char kind = 'X');
    // Gives the ticket up (timed out, cancelled, failed); never throws: a row
    // that cannot be deleted expires unheartbeated. Resets w.
    void leave(std::shared_ptr<ticket_timing>& w) noexcept;
    // The watchdog's heartbeat of tickets (see keeper::heartbeat), on a
    // session of `pool` (the watchdog's own).
    std::vector<bool> heartbeat(session_pool& pool, const std::vector<ticket_timing*>& batch);

private:
    dialect& dialect_;
    session_pool& pool_;
    watchdog& watchdog_;
    spdlog::logger& log_;
    counters counters_;
    const std::string channel_;
    std::once_flag listen_once_;
    std::unique_ptr<listener> listener_;
};

}  // namespace sqlock::detail
