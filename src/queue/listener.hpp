#pragma once
// The client's wake-up listener: the dialect's notifier for the client's
// channel (a connection LISTENing on PostgreSQL, a connection in an
// interruptible SLEEP on MariaDB, a datagram socket for SQLite), on a thread
// of its own. A release rings the channel of the client whose waiter heads
// the key's queue; the listener then wakes the waiter heading each of this
// process's queues of the client's tables (wakeups::notify_heads), not
// knowing the key. It rebuilds a lost connection and, after a rebuild, wakes
// every waiter of those tables (notifications may have been missed).
// RAII: started by the constructor, stopped and joined by the destructor.

#include "dialects/dialect.hpp"

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>

namespace spdlog {
class logger;
}

namespace sqlock::detail {

class listener {
public:
    // LISTENs before returning when it can (so that the first release after
    // the first waiter row already finds it listening); else the thread keeps
    // trying, and waiters poll meanwhile.
    listener(dialect& d, std::string channel, spdlog::logger& log, std::atomic<std::uint64_t>& received);
    ~listener();
    listener(const listener&) = delete;
    listener& operator=(const listener&) = delete;

private:
    void main(std::unique_ptr<notifier> n);

    dialect& dialect_;
    std::string channel_;
    spdlog::logger& log_;
    std::atomic<std::uint64_t>& received_;
    std::atomic<bool> stop_{false};
    std::thread thread_;
};

}  // namespace sqlock::detail
