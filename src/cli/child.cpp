#include "cli/child.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string_view>

extern char** environ;

namespace sqlock::cli {
namespace {

sigset_t relayed_signals() {
    sigset_t set;
    sigemptyset(&set);
    for (int s : {SIGINT, SIGTERM, SIGHUP}) sigaddset(&set, s);
    return set;
}

// A file descriptor closed on scope exit.
struct fd {
    int value = -1;
    explicit fd(int v) : value(v) {}
    fd(const fd&) = delete;
    fd& operator=(const fd&) = delete;
    ~fd() {
        if (value >= 0) ::close(value);
    }
};

bool executable(const std::string& path) {
    struct stat st {};
    return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(path.c_str(), X_OK) == 0;
}

// Like execvp's search, done before fork: the child then only calls execve.
std::string find_program(const std::string& name) {
    if (name.empty()) throw spawn_error(127, "PROGRAM is empty");
    if (name.find('/') != std::string::npos) return name;
    const char* path = std::getenv("PATH");
    std::string_view dirs = path && *path ? path : "/usr/local/bin:/usr/bin:/bin";
    bool seen = false;
    while (true) {
        const auto colon = dirs.find(':');
        const std::string_view dir = dirs.substr(0, colon);
        std::string candidate(dir.empty() ? std::string_view(".") : dir);
        candidate += '/';
        candidate += name;
        if (executable(candidate)) return candidate;
        if (::access(candidate.c_str(), F_OK) == 0) seen = true;
        if (colon == std::string_view::npos) break;
        dirs.remove_prefix(colon + 1);
    }
    if (seen) throw spawn_error(126, "'" + name + "' is on PATH but not executable");
    throw spawn_error(127, "'" + name + "': command not found on PATH");
}

std::vector<std::string> child_environment(const std::vector<std::string>& extra) {
    std::vector<std::string> out;
    for (char** e = environ; *e; ++e) {
        std::string_view entry(*e);
        bool replaced = false;
        for (const auto& x : extra)
            if (entry.substr(0, x.find('=') + 1) == std::string_view(x).substr(0, x.find('=') + 1)) replaced = true;
        if (!replaced) out.emplace_back(entry);
    }
    out.insert(out.end(), extra.begin(), extra.end());
    return out;
}

std::vector<char*> pointers(std::vector<std::string>& strings) {
    std::vector<char*> out;
    for (auto& s : strings) out.push_back(s.data());
    out.push_back(nullptr);
    return out;
}

int exit_status(int wstatus) {
    if (WIFEXITED(wstatus)) return WEXITSTATUS(wstatus);
    if (WIFSIGNALED(wstatus)) return 128 + WTERMSIG(wstatus);
    return 1;
}

}  // namespace

signal_relay::signal_relay() {
    const sigset_t set = relayed_signals();
    pthread_sigmask(SIG_BLOCK, &set, nullptr);  // inherited by every thread started from here on
    thread_ = std::thread([this] { main(); });
}

signal_relay::~signal_relay() {
    stopping_ = true;
    thread_.join();
}

void signal_relay::main() {
    const sigset_t set = relayed_signals();
    const timespec tick{0, 50'000'000};
    while (!stopping_) {
        const int sig = sigtimedwait(&set, nullptr, &tick);
        if (sig <= 0) continue;
        last_ = sig;
        std::lock_guard lock(mu_);
        if (target_ > 0) {
            ::kill(-target_, sig);
        } else {
            pending_ = sig;
            interrupted_.request_stop();
        }
    }
}

void signal_relay::forward_to(pid_t pgid) {
    std::lock_guard lock(mu_);
    target_ = pgid;
    if (pgid > 0 && pending_ != 0) ::kill(-pgid, pending_);
    pending_ = 0;
}

child_result run_child(const std::vector<std::string>& argv, const std::vector<std::string>& extra_env,
                       std::stop_token lost, std::chrono::milliseconds kill_after, signal_relay& relay) {
    // Everything the child needs is prepared before fork: between fork and
    // exec a child of a threaded process may only make async-signal-safe calls.
    const std::string path = find_program(argv.at(0));
    auto args = argv;
    auto env = child_environment(extra_env);
    auto arg_ptrs = pointers(args);
    auto env_ptrs = pointers(env);
    int pipe_fds[2];
    if (::pipe2(pipe_fds, O_CLOEXEC) != 0) throw std::runtime_error(std::string("pipe: ") + std::strerror(errno));
    fd exec_error_read(pipe_fds[0]);
    fd exec_error_write(pipe_fds[1]);
    const pid_t parent = ::getpid();

    const pid_t pid = ::fork();
    if (pid < 0) throw std::runtime_error(std::string("fork: ") + std::strerror(errno));
    if (pid == 0) {
        ::setpgid(0, 0);
        ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // no PROGRAM outlives sqlock, and with it the lease
        if (::getppid() != parent) ::_exit(127);
        sigset_t none;
        sigemptyset(&none);
        pthread_sigmask(SIG_SETMASK, &none, nullptr);
        ::execve(path.c_str(), arg_ptrs.data(), env_ptrs.data());
        const int e = errno;
        [[maybe_unused]] auto n = ::write(exec_error_write.value, &e, sizeof e);
        ::_exit(127);
    }
    ::setpgid(pid, pid);  // also here, so signals can reach the group before the child runs
    ::close(exec_error_write.value);
    exec_error_write.value = -1;
    int exec_errno = 0;
    if (::read(exec_error_read.value, &exec_errno, sizeof exec_errno) == static_cast<ssize_t>(sizeof exec_errno)) {
        int ignored;
        ::waitpid(pid, &ignored, 0);
        throw spawn_error(exec_errno == ENOENT ? 127 : 126,
                          "cannot run '" + path + "': " + std::strerror(exec_errno));
    }
    relay.forward_to(pid);

    fd child(static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)));
    fd lost_event(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
    std::stop_callback on_lost(lost, [&] {
        const std::uint64_t one = 1;
        [[maybe_unused]] auto n = ::write(lost_event.value, &one, sizeof one);
    });

    child_result result;
    std::chrono::steady_clock::time_point kill_at{};
    for (;;) {
        // Without a pidfd (kernels before 5.3) look for the exit a tick at a time.
        int timeout_ms = child.value >= 0 ? -1 : 50;
        if (result.lost && !result.killed) {
            const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                kill_at - std::chrono::steady_clock::now());
            const int grace = static_cast<int>(std::clamp<std::int64_t>(left.count(), 0, 60'000));
            timeout_ms = timeout_ms < 0 ? grace : std::min(timeout_ms, grace);
        }
        pollfd fds[2] = {{lost_event.value, POLLIN, 0}, {child.value, POLLIN, 0}};
        if (::poll(fds, child.value >= 0 ? 2 : 1, timeout_ms) < 0 && errno != EINTR)
            throw std::runtime_error(std::string("poll: ") + std::strerror(errno));
        if (fds[0].revents & POLLIN) {
            std::uint64_t drained;
            [[maybe_unused]] auto n = ::read(lost_event.value, &drained, sizeof drained);
        }

        int wstatus = 0;
        const pid_t done = ::waitpid(pid, &wstatus, WNOHANG);
        if (done == pid) {
            result.status = exit_status(wstatus);
            break;
        }
        if (lost.stop_requested() && !result.lost) {
            result.lost = true;
            ::kill(-pid, SIGTERM);
            kill_at = std::chrono::steady_clock::now() + kill_after;
        } else if (result.lost && !result.killed && std::chrono::steady_clock::now() >= kill_at) {
            result.killed = true;
            ::kill(-pid, SIGKILL);
        }
    }
    relay.forward_to(0);
    return result;
}

}  // namespace sqlock::cli
