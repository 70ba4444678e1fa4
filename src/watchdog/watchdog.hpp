#pragma once
// The client's background thread: renews leases (batched), declares lost the
// ones that passed their deadline, runs on_lost callbacks, and sweeps.

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace sqlock::detail {

struct grant;
struct waiter;
class client_impl;

// State shared by a client and its watchdog thread. The thread owns a
// reference too, so that a client destroyed on the watchdog thread itself
// (its last lease dropped inside a callback) leaves the thread valid state to
// notice `stopping` and exit.
struct watchdog_core {
    std::mutex mu;
    std::condition_variable cv;
    bool stopping = false;
    bool dirty = false;                                // a new lease wants an earlier wake-up
    std::int64_t wake_ns = 0;                          // when the thread will next run by itself
    std::vector<std::weak_ptr<grant>> leases;          // watched for renewal and deadline
    std::vector<std::weak_ptr<waiter>> waiters;        // queued acquisitions to heartbeat
    std::vector<std::shared_ptr<grant>> lost_queue;    // on_lost callbacks to run
    std::thread thread;
};

// Starts the thread. It works through `client` only while it can lock it.
void start_watchdog_thread(const std::shared_ptr<watchdog_core>& core, std::weak_ptr<client_impl> client);

// Stops the thread: joins it, or detaches it when called on the thread itself.
void stop_watchdog_thread(watchdog_core& core);

}  // namespace sqlock::detail
