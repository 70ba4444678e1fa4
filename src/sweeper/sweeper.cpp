#include "sweeper/sweeper.hpp"

#include "watchdog/clock.hpp"
#include "watchdog/schedule.hpp"

#include <spdlog/spdlog.h>

#include <random>

namespace sqlock::detail {

sweeper::sweeper(const client_options& options, spdlog::logger& log, const std::atomic<bool>& ready,
                 std::atomic<std::uint64_t>& swept)
    : options_(options), log_(log), ready_(ready), swept_(swept) {}

std::size_t sweeper::sweep_once(session_pool& pool) {
    const std::size_t n = pool.with_session([&](session& s) {
        std::size_t rows = s.sweep(options_.sweep_batch_size) + s.sweep_waiters(options_.sweep_batch_size) +
                           s.sweep_holders(options_.sweep_batch_size);
        if (options_.job_retention.count() > 0)
            rows += s.sweep_jobs(options_.job_retention.count(), options_.sweep_batch_size);
        return rows;
    });
    swept_ += n;
    if (n > 0) log_.debug("swept {} expired row(s)", n);
    return n;
}

std::int64_t sweeper::run_due(std::int64_t now, session_pool& pool) {
    if (!options_.sweep || !ready_.load()) return never_ns;
    const std::int64_t interval = ms_to_ns(options_.sweep_interval.count());
    if (next_ns_ == 0) {
        thread_local std::minstd_rand spread(std::random_device{}());
        next_ns_ = now + std::uniform_int_distribution<std::int64_t>(0, interval)(spread);
    }
    if (now < next_ns_) return next_ns_;
    std::int64_t again = interval;
    try {
        // A full batch means more may be waiting: continue soon.
        if (sweep_once(pool) >= options_.sweep_batch_size) again = 100'000'000;
    } catch (const std::exception& e) {
        log_.warn("sweep failed: {}", e.what());
    }
    next_ns_ = lease_now_ns() + again;
    return next_ns_;
}

}  // namespace sqlock::detail
