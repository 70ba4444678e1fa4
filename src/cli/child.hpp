#pragma once
// `sqlock run`'s side of PROGRAM: start it with the lease in its environment,
// pass on the signals sqlock receives, and stop it when the lease is lost.

#include <sqlock/lease.hpp>
#include <sqlock/multi_lease.hpp>

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <mutex>
#include <set>
#include <stdexcept>
#include <stop_token>
#include <string>
#include <thread>
#include <vector>

namespace sqlock::cli {

// PROGRAM could not be started. status is what a shell would exit with:
// 127 when it was not found, 126 when it could not be executed.
struct spawn_error : std::runtime_error {
    spawn_error(int exit_status, const std::string& what) : std::runtime_error(what), status(exit_status) {}
    int status;
};

// Throws spawn_error when PROGRAM `name` cannot be run (not found on PATH, a
// path that is missing or not an executable file), with the status run_child
// would give: called before any lock is taken or ledger run claimed.
void check_program(const std::string& name);

// Takes SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2 and SIGALRM (those
// sqlock was not started with ignored) away from every thread (construct it
// before any other thread starts) and handles them on a thread of its own:
// while a child runs they go to its process group; before that, the first
// one requests stop on interrupted() so that a wait for the lock ends.
class signal_relay {
public:
    signal_relay();
    ~signal_relay();
    signal_relay(const signal_relay&) = delete;
    signal_relay& operator=(const signal_relay&) = delete;

    std::stop_token interrupted() const { return interrupted_.get_token(); }
    int last_signal() const { return last_.load(); }
    // From now on signals go to process group `pgid` (0: to nobody), and to
    // PROGRAM (`program`) if it has left that group. A signal that arrived
    // since the last call is delivered at once.
    void forward_to(pid_t pgid, pid_t program = 0);

private:
    void main();

    std::stop_source interrupted_;
    std::atomic<int> last_{0};
    std::atomic<bool> stopping_{false};
    std::mutex mu_;
    pid_t target_ = 0;
    pid_t program_ = 0;
    int pending_ = 0;
    std::thread thread_;
};

struct child_result {
    int status = 0;          // its exit code, or 128 + the signal that ended it
    bool lost = false;       // the lease was lost while it ran
    bool killed = false;     // it outlived the grace period and got SIGKILL
};

// The file descriptors sqlock started with (recorded by startup()). Only
// these are passed on to PROGRAM; the guardian keeps none of them.
const std::set<int>& startup_fds();

// Call first thing in main(), before anything opens a file or changes a
// signal's disposition: records what sqlock was started with (its fds, the
// signals its parent ignored), sets SIGCHLD to SIG_DFL, so that PROGRAM is
// not reaped by the kernel before sqlock can wait for it, and opens
// /dev/null on a closed fd 0, 1 or 2, so that no connection takes its place.
void startup();

// What PROGRAM runs under: a lease, or a multi-key lease. `stop` is
// requested when it is lost; deadline() is its local deadline, which moves
// with each renewal.
struct held_by {
    std::stop_token stop;
    std::function<sqlock::lease_clock::time_point()> deadline;
};
inline held_by held_by_lease(const sqlock::lease& l) {
    return {l.stop_token(), [&l] { return l.deadline(); }};
}
inline held_by held_by_set(const sqlock::multi_lease& m) {
    return {m.stop_token(), [&m] { return m.deadline(); }};
}

// Runs argv[0] (looked up on PATH unless it contains '/') with extra_env added
// to sqlock's environment, in a process group of its own, with the signal
// dispositions sqlock was started with (startup()). A guardian process
// in that group stops it when the lease is lost, when the lease's deadline
// passes while sqlock cannot renew it (frozen), or when sqlock dies: SIGTERM,
// then SIGKILL after `kill_after` (at once if sqlock died). Returns when the
// child has exited.
// `lease_length` sets how often the guardian hears of the moving deadline.
child_result run_child(const std::vector<std::string>& argv, const std::vector<std::string>& extra_env,
                       const held_by& lease, std::chrono::milliseconds lease_length,
                       std::chrono::milliseconds kill_after, signal_relay& relay);

}  // namespace sqlock::cli
