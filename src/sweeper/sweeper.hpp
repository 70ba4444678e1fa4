#pragma once
// The sweeper: deletes expired unique_insert lock rows, dead waiter rows and
// job-ledger rows older than job_retention, in bounded batches, by database
// time, with SKIP LOCKED where the backend has it, so that every instance can
// sweep at once. It runs on the watchdog's thread, every sweep_interval (the
// first time at a random point of it, so that a fleet started together does
// not sweep in lockstep), and again soon after a full batch.

#include "pool/pool.hpp"

#include <sqlock/options.hpp>

#include <atomic>
#include <cstdint>

namespace spdlog {
class logger;
}

namespace sqlock::detail {

class sweeper {
public:
    // ready: sweep only once the client has seen a current schema (no noise
    // from a client opened before migrate()). swept counts rows deleted.
    sweeper(const client_options& options, spdlog::logger& log, const std::atomic<bool>& ready,
            std::atomic<std::uint64_t>& swept);

    // One batch of each kind now, on a session of `pool`. Returns the rows deleted.
    std::size_t sweep_once(session_pool& pool);
    // Sweeps if due at `now` (lease_clock ns); returns when it is next due
    // (never, when sweeping is off).
    std::int64_t run_due(std::int64_t now, session_pool& pool);

private:
    const client_options& options_;
    spdlog::logger& log_;
    const std::atomic<bool>& ready_;
    std::atomic<std::uint64_t>& swept_;
    std::int64_t next_ns_ = 0;  // 0: not scheduled yet
};

}  // namespace sqlock::detail
