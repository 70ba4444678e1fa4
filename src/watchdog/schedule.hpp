#pragma once
// The watchdog's policy, apart from its thread and from the database: which
// leases to renew in a round and in what batches, which to ping alone, which
// waiter tickets to heartbeat, when to retry after a failure, and when to look
// again. The work itself goes through `keeper`, which the client implements
// over the database and tests implement without one.

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <limits>
#include <memory>
#include <vector>

namespace sqlock::detail {

inline constexpr std::int64_t never_ns = std::numeric_limits<std::int64_t>::max();

// a + b, clamped to the range of int64 instead of overflowing.
std::int64_t saturating_add(std::int64_t a, std::int64_t b) noexcept;
// ms as nanoseconds, clamped instead of overflowing.
std::int64_t ms_to_ns(std::int64_t ms) noexcept;

// A lease as the watchdog and the deadline timer see it. Times are
// lease_clock nanoseconds (CLOCK_BOOTTIME). The client's grant is one.
struct lease_timing {
    std::int64_t lease_ms = 0;
    std::int64_t margin_ms = 0;         // the local deadline comes this long before the database's expiry
    std::int64_t interval_ns = 0;       // between automatic renewals
    std::int64_t hold_until_ns = never_ns;  // no automatic renewal after this (max_hold)
    bool auto_renew = true;
    bool pinged = false;  // renewed one by one by a ping of its own connection (select_for_update)

    // The local deadline: when the last confirmed grant or renewal was sent,
    // plus the lease, minus the safety margin. The database computed its
    // expiry after that send, so the deadline is never later than the expiry.
    std::atomic<std::int64_t> deadline_ns{0};
    std::atomic<std::int64_t> next_renew_ns{0};
    std::atomic<bool> lost{false};
    std::atomic<bool> released{false};

    // A grant or renewal sent at `sent` (lease_clock ns) was confirmed by the
    // database: the one place the deadline is computed.
    void confirmed(std::int64_t sent) noexcept {
        deadline_ns = saturating_add(sent, ms_to_ns(lease_ms - margin_ms));
        next_renew_ns = saturating_add(sent, interval_ns);
    }
    // A renewal sent at `sent` failed for a passing reason: try again soon,
    // well before the deadline.
    void retry_soon(std::int64_t sent) noexcept {
        next_renew_ns = sent + std::min<std::int64_t>(interval_ns / 4, 500'000'000);
    }
};

// A queued acquisition's ticket row, heartbeated like a lease.
struct ticket_timing {
    std::int64_t ticket = 0;
    std::int64_t lease_ms = 0;
    std::int64_t interval_ns = 0;
    std::atomic<std::int64_t> next_beat_ns{0};
    std::atomic<bool> gone{false};  // its row expired or vanished: its waiter queues again
};

// The watchdog's work, done by the client over the database.
class keeper {
public:
    virtual ~keeper() = default;

    enum class result { renewed, lost, retry };
    struct outcome {
        keeper::result result = result::retry;
        std::int64_t sent = 0;  // when the statement that answered was sent
    };
    // Renews a batch of leases: one outcome per lease, in order.
    virtual std::vector<outcome> renew(const std::vector<lease_timing*>& batch) = 0;
    // Renews one pinged lease.
    virtual outcome ping(lease_timing& lease) = 0;
    // Heartbeats tickets: per ticket, whether its row was live (and now
    // renewed). Throws when the database could not be asked.
    virtual std::vector<bool> heartbeat(const std::vector<ticket_timing*>& batch) = 0;

    // Told after the schedule applied an outcome: a confirmed renewal (the
    // deadline has moved), a lost lease, tickets that lost their place.
    virtual void renewed(lease_timing& lease) = 0;
    virtual void lost(lease_timing& lease) = 0;
    virtual void tickets_gone() = 0;
    // Other work of the watchdog's thread (the sweeper), run when due;
    // returns when it is next due.
    virtual std::int64_t periodic(std::int64_t now) = 0;
};

// One round of the watchdog. Stateless but for the batch size: the leases'
// and tickets' own timing says what is due.
class renewal_schedule {
public:
    explicit renewal_schedule(std::size_t batch_size) : batch_size_(std::max<std::size_t>(batch_size, 1)) {}

    struct round_result {
        std::int64_t next = 0;        // lease_clock time of the next round (at most a second on)
        std::size_t statements = 0;   // renewal batches and pings sent (0: nothing was due)
    };
    // Does what is due at `now` through `k`. Leases that are lost, released,
    // past their deadline, fixed (no auto-renew) or past max_hold are left
    // alone (the deadline timer declares the lost ones).
    round_result round(std::int64_t now, keeper& k, const std::vector<std::shared_ptr<lease_timing>>& leases,
                       const std::vector<std::shared_ptr<ticket_timing>>& tickets) const;

private:
    std::size_t batch_size_;
};

}  // namespace sqlock::detail
