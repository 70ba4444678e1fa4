#pragma once
// What the client tells about itself beyond client_stats: the metrics
// (counters, gauges and histograms kept with atomics, rendered by
// client::metrics_text() in metrics.cpp) and the event listener's dispatch
// (events made in acquire.cpp and leases.cpp, told on a thread of their own).

#include "watchdog/callbacks.hpp"

#include <sqlock/events.hpp>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace spdlog {
class logger;
}

namespace sqlock::detail {

// A histogram of durations over fixed bucket bounds (in seconds), with
// atomics: observe() is lock-free and never allocates.
class duration_histogram {
public:
    template <std::size_t N>
    explicit duration_histogram(const std::array<double, N>& bounds_s)
        : bounds_s_(bounds_s.begin(), bounds_s.end()), counts_(new std::atomic<std::uint64_t>[N + 1]) {
        for (double b : bounds_s_) bounds_ns_.push_back(static_cast<std::int64_t>(b * 1e9 + 0.5));
        for (std::size_t i = 0; i <= N; ++i) counts_[i] = 0;
    }

    // A negative duration (a clock replaced by a test) counts as zero.
    void observe(std::int64_t ns) noexcept {
        ns = std::max<std::int64_t>(ns, 0);
        const auto at = std::lower_bound(bounds_ns_.begin(), bounds_ns_.end(), ns) - bounds_ns_.begin();
        counts_[static_cast<std::size_t>(at)].fetch_add(1, std::memory_order_relaxed);
        sum_ns_.fetch_add(static_cast<std::uint64_t>(ns), std::memory_order_relaxed);
    }

    struct snapshot {
        std::vector<std::uint64_t> cumulative;  // per bound, then +Inf (which is the count)
        std::uint64_t sum_ns = 0;
    };
    // Cumulative counts: consistent with each other whatever runs meanwhile
    // (the count is the +Inf bucket); the sum may be a moment apart.
    snapshot read() const {
        snapshot s;
        std::uint64_t total = 0;
        for (std::size_t i = 0; i <= bounds_s_.size(); ++i) {
            total += counts_[i].load(std::memory_order_relaxed);
            s.cumulative.push_back(total);
        }
        s.sum_ns = sum_ns_.load(std::memory_order_relaxed);
        return s;
    }
    const std::vector<double>& bounds() const { return bounds_s_; }

private:
    std::vector<double> bounds_s_;
    std::vector<std::int64_t> bounds_ns_;
    std::unique_ptr<std::atomic<std::uint64_t>[]> counts_;
    std::atomic<std::uint64_t> sum_ns_{0};
};

// Bucket bounds, in seconds. Waits: from an uncontended grant (a
// millisecond or two) to a queue of long jobs. Holds: from a short critical
// section to a nightly job. Renewals: a round trip, healthy to stalled
// (past the default statement timeout of 10 s it has failed).
inline constexpr std::array<double, 15> wait_buckets{0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
                                                     1,     2.5,   5,    10,    30,   60,  300};
inline constexpr std::array<double, 16> hold_buckets{0.01, 0.05, 0.1,  0.5,  1,    5,     10,    30,
                                                     60,   300,  900,  1800, 3600, 7200, 21600, 86400};
inline constexpr std::array<double, 13> renewal_buckets{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
                                                        0.25,  0.5,    1,     2.5,  5,     10};

// How a try_acquire() or acquire() call ended (the outcome label).
enum class acquire_outcome : std::size_t { acquired, reentered, busy, timeout, cancelled, error, count_ };
inline constexpr std::array<const char*, 6> acquire_outcome_names{"acquired", "reentered", "busy",
                                                                  "timeout",  "cancelled", "error"};
// Lost leases by cause: loss_cause without `none`.
inline constexpr std::array<loss_cause, 4> loss_causes{loss_cause::not_held, loss_cause::deadline,
                                                       loss_cause::forced, loss_cause::connection_lost};

// The client's metrics beyond its counters (struct counters).
struct telemetry {
    duration_histogram wait{wait_buckets};        // acquire() calls, whatever their outcome
    duration_histogram hold{hold_buckets};        // grant to release or loss
    duration_histogram renewal{renewal_buckets};  // renewal statements and pings that answered
    std::array<std::atomic<std::uint64_t>, static_cast<std::size_t>(acquire_outcome::count_)> outcomes{};
    std::array<std::atomic<std::uint64_t>, loss_causes.size() + 1> lost{};  // by loss_cause
    std::atomic<std::int64_t> held{0};     // grants neither released nor lost
    std::atomic<std::int64_t> waiters{0};  // tickets this client holds in the wait queue
    std::atomic<std::uint64_t> events_dropped{0};

    void count(acquire_outcome o) noexcept { outcomes[static_cast<std::size_t>(o)].fetch_add(1); }
};

// Events past this many waiting for the listener are dropped (and counted).
inline constexpr std::size_t max_pending_events = 65536;

// Tells the application's listener its events, on a thread of its own. The
// closures it queues hold the listener and the logger, never the client.
class event_sink {
public:
    event_sink(std::function<void(const lock_event&)> listener, std::shared_ptr<spdlog::logger> log,
               std::atomic<std::uint64_t>& dropped);
    // Queues e (its `time` is set here). Never throws for the listener's sake.
    void post(lock_event e) noexcept;
    // No listener call after this returns (unless called from the listener
    // itself, whose call then ends the thread): events posted later, or not
    // yet told, are dropped.
    void close();

private:
    std::shared_ptr<const std::function<void(const lock_event&)>> listener_;
    std::shared_ptr<spdlog::logger> log_;
    std::atomic<std::uint64_t>& dropped_;
    std::atomic<bool> dropping_{false};  // logged the first drop of a run of them
    std::atomic<bool> closed_{false};
    callback_queue queue_;
};

// A label value as the text format wants it: backslash, double quote and
// line feed escaped.
inline std::string escape_label_value(std::string_view v) {
    std::string out;
    out.reserve(v.size());
    for (char c : v) {
        switch (c) {
            case '\\': out += "\\\\"; break;
            case '"': out += "\\\""; break;
            case '\n': out += "\\n"; break;
            default: out += c;
        }
    }
    return out;
}

}  // namespace sqlock::detail
