#pragma once
// The workloads. Each measures one contender at a time; the caller
// interleaves contenders and repetitions.
//
//   uncontended  W worker threads, each on keys of its own: lock + unlock
//   hot key      W worker threads on one key: try_lock until it succeeds,
//                hold H ms, unlock, again (no pause between attempts)
//   waiters      W worker threads of one process on one key, each waiting
//                with lock() (sqlock: acquire() on one shared client;
//                native: a blocking call per connection), unlock, again
//   handoff      P processes on one key, each waiting with the contender's
//                own lock() (sqlock: acquire(); native: blocking call; the
//                others poll every ms): release → next grant latency
//   fairness     the same, with more processes, over a long window
//   renewal      N held leases kept alive: sqlock's watchdog (batched), or
//                each lease renewed by its own statement once a second
//   recovery     a holder process is killed with SIGKILL; how long until a
//                waiter gets the key

#include "lockers.hpp"

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace bench {

// One measured window of a thread workload.
struct thread_sample {
    double seconds = 0;
    std::uint64_t successes = 0;
    std::uint64_t attempts = 0;
    std::uint64_t statements = 0;
    std::vector<double> latency_us;  // per success: first attempt → acquired (uncontended: lock + unlock)
};

// hold_ms < 0: uncontended (distinct keys per worker); else one hot key,
// tried again at once until it is taken, or (wait) waited for with the
// contender's lock(), the workers sharing what locker::share() gives.
thread_sample run_threads(const contender& c, const target& t, int workers, int hold_ms, double warmup_s,
                          double seconds, const std::string& key, bool wait = false);

// One process-contention run (handoff, fairness).
struct grant_record {
    int process = 0;
    std::int64_t asked = 0, granted = 0, released = 0, token = 0;
    bool first = false;  // the process's first lock() call: all of those start together
};
struct contention_run {
    int processes = 0;
    double seconds = 0;
    std::int64_t start = 0, from = 0, to = 0;  // contention starts; measured window [from, to)
    std::vector<grant_record> grants;          // in grant order
    std::vector<grant_record> unfinished;      // lock() calls still waiting at the end
    std::uint64_t statements = 0;
};
struct contention_summary {
    std::size_t acquisitions = 0, handoffs = 0;
    std::vector<double> handoff_ms;  // previous holder calls unlock → next lock() returns
    std::vector<double> wait_ms;     // lock() called → returned
    std::vector<std::size_t> per_process;
    double jain = 0, max_wait_ms = 0;
    bool max_wait_unfinished = false;
    std::size_t overtakes = 0;        // grants that passed a caller waiting ≥ 10 ms longer
    std::size_t order_errors = 0;     // overlapping holders: must be 0
    double statements_per_acquisition = 0;
};
contention_run run_contention(const contender& c, const std::vector<std::string>& child_args,
                              int processes, double seconds, int hold_ms, bool fair, const std::string& key);
contention_summary summarize(const contention_run& run);
// The child side: `sqlock_bench --child waiter ...`.
int waiter_main(const contender& c, const target& t, const std::string& key, int hold_ms, bool fair,
                std::int64_t lease_ms);

// Renewal: one window of `rounds` seconds.
struct renewal_window {
    double seconds = 0, statements = 0, renewals = 0, troubles = 0, client_cpu = 0, worst_lag = 0;
    std::optional<double> server_cpu;  // seconds
};
// CPU time of a server: a process and (PostgreSQL) its children.
class server_cpu;
std::shared_ptr<server_cpu> open_server_cpu(int pid, bool with_children);
double server_idle_ms_per_s(server_cpu& probe, double seconds);
std::vector<renewal_window> run_renewal(const contender& c, const target& t, std::size_t leases, int reps, int rounds,
                                        server_cpu* probe);

// Recovery: milliseconds from SIGKILL of the holder to the waiter's grant.
double run_recovery(const contender& c, const target& t, const std::vector<std::string>& child_args,
                    std::chrono::milliseconds lease, std::chrono::milliseconds kill_after, const std::string& key);
// The child side: `sqlock_bench --child holder ...`: takes the key, says so, waits to be killed.
int holder_main(const contender& c, const target& t, const std::string& key, std::int64_t lease_ms);

}  // namespace bench
