#pragma once
// The client's background threads: the watchdog renews leases (batched),
// declares lost the ones that passed their deadline, and sweeps; the callback
// thread runs the user's on_lost/on_renewed callbacks.

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
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
    std::thread thread;
};

// User callbacks, run one at a time in the order they were posted, on a thread
// of their own: a slow or blocking callback must never hold up the renewal of
// the client's other leases. A callback may drop the last reference to its
// client; the thread then detaches itself and exits, like the watchdog.
struct callback_queue {
    std::mutex mu;
    std::condition_variable cv;
    bool stopping = false;
    std::deque<std::function<void()>> pending;
    std::thread thread;
};

// Starts the thread. It works through `client` only while it can lock it.
void start_watchdog_thread(const std::shared_ptr<watchdog_core>& core, std::weak_ptr<client_impl> client);

// Stops the thread: joins it, or detaches it when called on the thread itself.
void stop_watchdog_thread(watchdog_core& core);

void start_callback_thread(const std::shared_ptr<callback_queue>& queue);
void post_callback(callback_queue& queue, std::function<void()> fn);
// Like stop_watchdog_thread. Callbacks still pending are dropped.
void stop_callback_thread(callback_queue& queue);

}  // namespace sqlock::detail
