#pragma once
// The watchdog: one thread per client that renews leases (batched), pings
// select_for_update holders, heartbeats waiter tickets and runs the sweeper,
// by the policy in schedule.hpp. RAII, like spdlog's periodic worker: the
// constructor starts the thread, the destructor stops and joins it.
//
// Loss is not declared here (the deadline timer does that, on a thread that
// never waits on the database), and no lock is held across a round trip.

#include "watchdog/schedule.hpp"

#include <memory>
#include <thread>

namespace sqlock::detail {

class watchdog {
public:
    // The thread works through `k` while it can lock it; it keeps its own
    // reference to its state, so a client destroyed on the thread itself (its
    // last lease dropped there) leaves it valid state in which to stop.
    watchdog(std::weak_ptr<keeper> k, std::size_t batch_size);
    // Stops and joins the thread (detaches it when called on that thread).
    ~watchdog();
    watchdog(const watchdog&) = delete;
    watchdog& operator=(const watchdog&) = delete;

    // Watches a lease (weakly) until it is released or lost. Thread-safe.
    void watch(const std::shared_ptr<lease_timing>& lease);
    // Heartbeats a ticket (weakly) until it is dropped. Thread-safe.
    void watch(const std::shared_ptr<ticket_timing>& ticket);

    // Rounds that sent at least one renewal or ping.
    std::uint64_t ticks() const;

private:
    struct state;
    std::shared_ptr<state> state_;
    std::thread thread_;
};

}  // namespace sqlock::detail
