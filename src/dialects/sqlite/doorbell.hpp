#pragma once
// Wake-ups across processes for SQLite, which has no server to carry them.
// A waiting client binds a Unix datagram socket in the abstract namespace
// named after its channel (the name its waiter rows store in `listener`); a
// release reads the channel of the waiter heading the key's queue and, once
// its transaction committed, sends that socket one byte. The bell is only a
// hint: the grant decides from the tables, and a datagram that is lost (no
// such socket, a full buffer, another network namespace) leaves the waiter
// to its next poll. No file is created, and the name disappears with the
// process.

#include "dialects/dialect.hpp"

#include <chrono>
#include <string>
#include <string_view>

namespace sqlock::detail {

class sqlite_doorbell final : public notifier {
public:
    // Binds the channel's socket; connection_error when it cannot.
    explicit sqlite_doorbell(const std::string& channel);
    ~sqlite_doorbell() override;
    sqlite_doorbell(const sqlite_doorbell&) = delete;
    sqlite_doorbell& operator=(const sqlite_doorbell&) = delete;

    // Waits up to timeout for a ring; a ring when at least one arrived (all
    // pending ones are consumed), never a hint.
    heard wait(std::chrono::milliseconds timeout) override;

private:
    int fd_ = -1;
};

// Rings the channel's bell without blocking; never fails (see above).
void ring_sqlite_doorbell(std::string_view channel) noexcept;

}  // namespace sqlock::detail
