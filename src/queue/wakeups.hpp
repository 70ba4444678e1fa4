#pragma once
// Local wake-ups: every blocking acquire of this process that holds a ticket,
// whatever its client, has a spot here, in its key's local queue, one per
// waiter table (dialect::tables(): the clients of one database and table
// prefix share it; a key of another database is another queue, whose tickets
// are not comparable and whose releases are not this one's), in the
// order the grant statements serve the waiter table (fair waiters by priority
// then ticket, then the others by ticket). Something that may free a key
// rings only the spot at the head of that key's local queue, and every spot
// waiting to share the key (readers): the others could not pass the head at
// the database anyway, so waking them would only cost a statement each (with
// 16 waiting threads, one release woke 15 for nothing). A spot that leaves
// its queue without the key passes its turn to the next head; a spot that
// leaves with it rings the next head when it releases the key.
//
// Rings are hints, like the database's: a spot that is not rung still polls,
// the head on its backoff, the others at the slowest poll, so a missed ring
// costs time and never a grant. A spot reads its ring count before it tries
// and sleeps only while the count has not moved, so no ring between its try
// and its sleep is missed.

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

namespace sqlock::detail::wakeups {

class spot {
public:
    spot() = default;
    ~spot() { leave(false); }
    spot(const spot&) = delete;
    spot& operator=(const spot&) = delete;

    // Takes (or moves to) a place in the local queue of key in `tables`:
    // permit waiters ('P') queue apart from the lock's waiters, as in the
    // waiter table.
    void place(std::string_view tables, std::string_view key, char kind, bool fair, int priority,
               std::int64_t ticket);
    // Leaves its queue; without the key (granted false), rings the spot that
    // heads it now, if this one headed it.
    void leave(bool granted) noexcept;

    std::uint64_t rings() const;
    // Whether it heads its local queue (true when not placed).
    bool heads() const;
    // Sleeps until the ring count is no longer `seen`, stop() is true
    // (checked at every wake-up), or head_until passes (other_until when
    // another spot of this process heads the queue).
    void wait(std::uint64_t seen, std::chrono::steady_clock::time_point head_until,
              std::chrono::steady_clock::time_point other_until, const std::function<bool()>& stop);
    void ring();  // this spot alone (its wait was cancelled)

private:
    friend struct registry;
    bool heads_locked() const;  // under the registry's mutex
    std::string queue_;  // empty: not placed
    bool shares_ = false;  // a reader or a permit: rung with the head
    bool fair_ = false;
    int priority_ = 0;
    std::int64_t ticket_ = 0;
    std::uint64_t rings_ = 0;
    std::condition_variable cv_;
};

// A release (or a break-glass) of key in `tables`: rings the head of each of
// its local queues, and their readers and permit waiters.
void notify(std::string_view tables, std::string_view key);
// The database of `tables` rang this process without naming a key: rings the
// head of every local queue of those tables.
void notify_heads(std::string_view tables);
// Anything may have changed in `tables` (tickets expired, a listener
// reconnected): rings every spot of them.
void notify_all(std::string_view tables);

}  // namespace sqlock::detail::wakeups
