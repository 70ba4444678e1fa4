#include "cli/child.hpp"

#include "cli/exit_status.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <termios.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <utility>
#include <ctime>
#include <limits>
#include <set>
#include <string_view>

extern char** environ;

namespace sqlock::cli {
namespace {

// The signals sqlock's parent had set to SIG_IGN (recorded by startup()): it
// survives exec, and libraries change dispositions later (libmariadb ignores
// SIGPIPE).
sigset_t& ignored_at_start() {
    static sigset_t set;
    return set;
}

// The signals that would end sqlock and are PROGRAM's to act on (SIGKILL
// aside, which the guardian answers). Not SIGWINCH: the terminal's
// foreground group gets it from the kernel. Those ignored at start stay
// ignored, as they would for PROGRAM run by a shell or flock(1): `nohup
// sqlock run ...` is not ended by a SIGHUP.
sigset_t relayed_signals() {
    sigset_t set;
    sigemptyset(&set);
    for (int s : {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGALRM})
        if (!sigismember(&ignored_at_start(), s)) sigaddset(&set, s);
    return set;
}

// In a forked child before exec: every signal's disposition as sqlock was
// started with it, SIG_IGN where its parent ignored it and SIG_DFL
// elsewhere, whatever sqlock or its libraries set since (SIG_IGN survives
// exec). Async-signal-safe; glibc refuses its own two signals, which stay.
void restore_start_dispositions() {
    for (int sig = 1; sig < NSIG; ++sig) {
        if (sig == SIGKILL || sig == SIGSTOP) continue;
        struct sigaction sa {};
        sigemptyset(&sa.sa_mask);
        sa.sa_handler = sigismember(&ignored_at_start(), sig) ? SIG_IGN : SIG_DFL;
        ::sigaction(sig, &sa, nullptr);
    }
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
    if (name.empty()) throw spawn_error(exit_status::not_found, "PROGRAM is empty");
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
    if (seen) throw spawn_error(exit_status::cannot_execute, "'" + name + "' is on PATH but not executable");
    throw spawn_error(exit_status::not_found, "'" + name + "': command not found on PATH");
}

// What an outer `sqlock run` set for its PROGRAM (see run.cpp): a nested
// run's PROGRAM sees only its own lease, where the outer --also keys
// (SQLOCK_KEY_COUNT, SQLOCK_KEY_n) or ledger run would read as its own.
// Configuration (SQLOCK_URL, SQLOCK_TABLE_PREFIX, ...) is passed on.
bool outer_lease_variable(std::string_view entry) {
    const std::string_view name = entry.substr(0, entry.find('='));
    for (std::string_view set_by_run :
         {"SQLOCK_KEY", "SQLOCK_TOKEN", "SQLOCK_OWNER", "SQLOCK_JOB", "SQLOCK_RUN_KEY", "SQLOCK_ATTEMPT"})
        if (name == set_by_run) return true;
    return name.starts_with("SQLOCK_KEY_") || name.starts_with("SQLOCK_TOKEN_");  // _COUNT, _n
}

std::vector<std::string> child_environment(const std::vector<std::string>& extra) {
    std::vector<std::string> out;
    for (char** e = environ; *e; ++e) {
        std::string_view entry(*e);
        if (outer_lease_variable(entry)) continue;
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

int status_of(int wstatus) {
    if (WIFEXITED(wstatus)) return WEXITSTATUS(wstatus);
    if (WIFSIGNALED(wstatus)) return exit_status::signal_base + WTERMSIG(wstatus);
    return exit_status::failure;
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

namespace {

// Signals PROGRAM's process group `pgid` (the guardian's) and, if PROGRAM
// (`program`, 0: unknown) has moved to a group of its own since (setpgid:
// GNU timeout does, as do shells with job control), that group too: it is
// still PROGRAM's to stop. A PROGRAM still in `pgid` is signalled once.
// `pgid` last: the guardian's group holds the guardian, which a SIGKILL ends.
// Only async-signal-safe calls: the guardian uses it too.
void signal_group(pid_t pgid, pid_t program, int sig) {
    if (program > 0) {
        const pid_t now_in = ::getpgid(program);
        if (now_in > 0 && now_in != pgid) ::kill(now_in == program ? -program : program, sig);
    }
    ::kill(-pgid, sig);
}

// A signal asking PROGRAM to end: a stopped process (SIGSTOP, or SIGTTIN from
// a read in the background) acts on none until it is continued, so SIGCONT
// follows, as a shell's `kill` of a stopped job does. A running group
// ignores the SIGCONT. Async-signal-safe too.
void ask_to_end(pid_t pgid, pid_t program, int sig) {
    signal_group(pgid, program, sig);
    signal_group(pgid, program, SIGCONT);
}

// A relayed signal: one asking to end (not SIGUSR1, SIGUSR2 or SIGALRM, which
// a stopped PROGRAM may wait to act on) is followed by SIGCONT.
void relay_signal(pid_t pgid, pid_t program, int sig) {
    if (sig == SIGINT || sig == SIGTERM || sig == SIGHUP || sig == SIGQUIT)
        ask_to_end(pgid, program, sig);
    else
        signal_group(pgid, program, sig);
}

}  // namespace

void check_program(const std::string& name) {
    const std::string path = find_program(name);
    if (name.find('/') == std::string::npos) return;  // found on PATH, as an executable file
    // A path is taken as given by find_program and tried by execve: look
    // now, so that it fails as execve would (127 missing, 126 not runnable).
    if (::access(path.c_str(), F_OK) != 0)
        throw spawn_error(exit_status::not_found, "cannot run '" + path + "': " + std::strerror(errno));
    if (!executable(path))
        throw spawn_error(exit_status::cannot_execute, "cannot run '" + path + "': " + std::strerror(EACCES));
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
            relay_signal(target_, program_, sig);
        } else {
            pending_ = sig;
            interrupted_.request_stop();
        }
    }
}

void signal_relay::forward_to(pid_t pgid, pid_t program) {
    std::lock_guard lock(mu_);
    target_ = pgid;
    program_ = pgid > 0 ? program : 0;
    if (pgid > 0 && pending_ != 0) relay_signal(pgid, program_, pending_);
    pending_ = 0;
}

namespace {

// The lease's clock (sqlock::lease_clock): CLOCK_BOOTTIME, which counts a
// suspend, so a PROGRAM that slept through its lease is stopped on resume.
// clock_gettime is async-signal-safe.
std::int64_t lease_clock_ns() {
    timespec ts{};
    ::clock_gettime(CLOCK_BOOTTIME, &ts);
    return static_cast<std::int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

// The guardian: the first process of PROGRAM's process group, forked before
// PROGRAM, needing nothing from sqlock but a socket on which sqlock writes
// the lease's local deadline (lease_clock ns) whenever it moves. It kills the
// group when
// - the socket closes: sqlock died (kill -9), so nobody holds the lease for
//   PROGRAM and everything PROGRAM started goes with it, grandchildren too;
// - the last deadline passes with no newer one: sqlock is frozen (SIGSTOP,
//   starved) and cannot renew, or it wrote 0 because it found the lease lost.
//   The group gets SIGTERM, and SIGKILL `grace_ns` later; sqlock is told
//   (one byte back), so that it reports the loss even if it was merely late.
// sqlock also writes PROGRAM's pid, negated, once PROGRAM runs: a PROGRAM
// that moved to a group of its own is stopped there too (signal_group).
// Only async-signal-safe calls: it is a fork of a threaded process.
[[noreturn]] void guardian_main(int control, pid_t parent, std::int64_t grace_ns) {
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, nullptr);  // the group's signals are for PROGRAM; SIGKILL still ends us
    const pid_t group = ::getpid();
    pid_t program = 0;
    auto stop = [&](int sig) { signal_group(group, program, sig); };
    if (::getppid() != parent) stop(SIGKILL);
    constexpr std::int64_t never = std::numeric_limits<std::int64_t>::max();
    std::int64_t deadline = never;
    std::int64_t kill_at = never;
    for (;;) {
        const std::int64_t now = lease_clock_ns();
        if (kill_at == never && now >= deadline) {
            const char stopped = 'S';
            ::send(control, &stopped, 1, MSG_NOSIGNAL);
            stop(SIGTERM);
            stop(SIGCONT);  // a stopped PROGRAM could act on no SIGTERM (ask_to_end)
            kill_at = grace_ns < never - 1 - now ? now + grace_ns : never - 1;  // a huge grace never overflows
        }
        if (now >= kill_at) stop(SIGKILL);
        // Once the group was told to stop, only the SIGKILL is due: the
        // deadline has passed (with the grace a poll that never waited).
        const std::int64_t next = kill_at != never ? kill_at : deadline;
        // poll() waits on CLOCK_MONOTONIC, which stops during a suspend: wake
        // at least once a second to look at the lease's clock.
        const int timeout_ms =
            next == never ? -1 : static_cast<int>(std::clamp<std::int64_t>((next - now) / 1'000'000 + 1, 0, 1'000));
        pollfd p{control, POLLIN, 0};
        if (::poll(&p, 1, timeout_ms) <= 0) continue;
        std::int64_t news[64];
        const ssize_t n = ::read(control, news, sizeof news);
        if (n == 0) stop(SIGKILL);  // sqlock is gone
        // 8-byte writes to a local stream socket arrive whole in practice; a
        // torn read only delays the new deadline to the next write.
        for (ssize_t i = 0; i < n / static_cast<ssize_t>(sizeof(std::int64_t)); ++i) {
            if (news[i] < 0)
                program = static_cast<pid_t>(-news[i]);
            else if (kill_at == never)
                deadline = news[i];
        }
    }
}

int fd_limit() {
    const long max = ::sysconf(_SC_OPEN_MAX);
    return static_cast<int>(std::clamp<long>(max, 256, 65536));
}

// The fds open in this process, from /proc/self/fd (without the directory's own).
std::set<int> open_fds() {
    std::set<int> out;
    DIR* dir = ::opendir("/proc/self/fd");
    if (!dir) return {0, 1, 2};
    while (const dirent* e = ::readdir(dir)) {
        if (e->d_name[0] == '.') continue;
        const int f = std::atoi(e->d_name);
        if (f != ::dirfd(dir)) out.insert(f);
    }
    ::closedir(dir);
    return out;
}

// Ranges [first, last] of fds that are not in `keep`, for the child to mark
// close-on-exec without allocating.
std::vector<std::pair<unsigned, unsigned>> gaps(const std::set<int>& keep) {
    std::vector<std::pair<unsigned, unsigned>> out;
    unsigned next = 0;
    for (int f : keep) {
        if (static_cast<unsigned>(f) > next) out.emplace_back(next, static_cast<unsigned>(f) - 1);
        next = static_cast<unsigned>(f) + 1;
    }
    out.emplace_back(next, ~0U);
    return out;
}

// In a forked child: close-on-exec for every fd in `ranges` (async-signal-safe).
void cloexec_ranges(const std::vector<std::pair<unsigned, unsigned>>& ranges, int limit) {
    for (auto [first, last] : ranges) {
        if (::close_range(first, last, CLOSE_RANGE_CLOEXEC) == 0) continue;
        for (unsigned f = first; f <= last && f < static_cast<unsigned>(limit); ++f) {
            const int flags = ::fcntl(static_cast<int>(f), F_GETFD);
            if (flags >= 0) ::fcntl(static_cast<int>(f), F_SETFD, flags | FD_CLOEXEC);
        }
    }
}

// The terminal, when sqlock runs in the foreground of one: PROGRAM's group
// gets it (so PROGRAM can read a prompt's answer and gets the keyboard's
// Ctrl-C), and sqlock takes it back afterwards.
class terminal {
public:
    terminal() : ours_(::isatty(0) && ::tcgetpgrp(0) == ::getpgrp()) {}
    terminal(const terminal&) = delete;
    terminal& operator=(const terminal&) = delete;
    ~terminal() { take_back(); }
    bool foreground() const { return ours_; }
    void take_back() const {
        if (ours_) hand_to(::getpgrp());
    }
    // Called from a background group it would stop us with SIGTTOU unless blocked.
    static void hand_to(pid_t pgid) {
        sigset_t ttou, old;
        sigemptyset(&ttou);
        sigaddset(&ttou, SIGTTOU);
        pthread_sigmask(SIG_BLOCK, &ttou, &old);
        ::tcsetpgrp(0, pgid);
        pthread_sigmask(SIG_SETMASK, &old, nullptr);
    }

private:
    bool ours_;
};

}  // namespace

const std::set<int>& startup_fds() {
    static const std::set<int> fds = open_fds();
    return fds;
}

void startup() {
    sigset_t& ignored = ignored_at_start();
    sigemptyset(&ignored);
    for (int sig = 1; sig < NSIG; ++sig) {
        struct sigaction old {};
        if (::sigaction(sig, nullptr, &old) == 0 && !(old.sa_flags & SA_SIGINFO) && old.sa_handler == SIG_IGN)
            sigaddset(&ignored, sig);
    }
    // With SIGCHLD ignored the kernel reaps PROGRAM itself: its status is
    // gone, and waitpid() fails with ECHILD.
    ::signal(SIGCHLD, SIG_DFL);
    // cron and some daemons start programs with fd 0, 1 or 2 closed: the
    // next file opened, a database connection, would take its number, and
    // sqlock's messages to stderr would go into it. /dev/null takes the
    // place, for sqlock and PROGRAM alike (which gets it as if given).
    for (int f = 0; f < 3; ++f) {
        if (::fcntl(f, F_GETFD) >= 0 || errno != EBADF) continue;
        const int null = ::open("/dev/null", O_RDWR);  // the lowest free fd: f
        if (null > 2) ::close(null);
    }
    startup_fds();
}

child_result run_child(const std::vector<std::string>& argv, const std::vector<std::string>& extra_env,
                       const held_by& lease, std::chrono::milliseconds lease_length,
                       std::chrono::milliseconds kill_after, signal_relay& relay) {
    // Everything the children need is prepared before fork: between fork and
    // exec a child of a threaded process may only make async-signal-safe calls.
    const std::string path = find_program(argv.at(0));
    auto args = argv;
    auto env = child_environment(extra_env);
    auto arg_ptrs = pointers(args);
    // execvp's fallback, which flock(1) and shells have too: a file that
    // execve() refuses as no executable format (ENOEXEC: a script without
    // "#!") is run by /bin/sh, with PROGRAM's path and arguments.
    std::vector<std::string> sh_args{"/bin/sh", path};
    sh_args.insert(sh_args.end(), argv.begin() + 1, argv.end());
    auto sh_arg_ptrs = pointers(sh_args);
    auto env_ptrs = pointers(env);
    // Only the fds sqlock was started with go to PROGRAM (its stdin, `3>file`);
    // the database connections and files sqlock opened itself do not.
    const auto not_inherited = gaps(startup_fds());
    const int limit = fd_limit();
    const pid_t parent = ::getpid();
    // Saturated: a --kill-after too long to count in nanoseconds means never.
    const std::int64_t grace_ns =
        kill_after >= std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::nanoseconds::max())
            ? std::numeric_limits<std::int64_t>::max()
            : std::chrono::nanoseconds(kill_after).count();
    terminal tty;

    int sockets[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sockets) != 0)
        throw std::runtime_error(std::string("socketpair: ") + std::strerror(errno));
    fd to_guardian(sockets[0]);
    fd guardian_end(sockets[1]);
    const pid_t guardian = ::fork();
    if (guardian < 0) throw std::runtime_error(std::string("fork: ") + std::strerror(errno));
    if (guardian == 0) {
        ::setpgid(0, 0);
        // Nothing but the socket, as fd 3: no copy of a database connection
        // (or of sqlock's end of the socket) may live on in here.
        const int null = ::open("/dev/null", O_RDWR);
        for (int f = 0; f < 3; ++f) ::dup2(null, f);
        ::dup2(guardian_end.value, 3);
        if (::close_range(4, ~0U, 0) != 0)
            for (int f = 4; f < limit; ++f) ::close(f);
        guardian_main(3, parent, grace_ns);
    }
    ::setpgid(guardian, guardian);  // also here, so PROGRAM can join the group at once
    ::close(guardian_end.value);
    guardian_end.value = -1;
    // Ends the guardian on every way out, before the socket closes (which it
    // would take for sqlock's death).
    struct guardian_stop {
        pid_t pid;
        ~guardian_stop() {
            ::kill(pid, SIGKILL);
            int ignored;
            ::waitpid(pid, &ignored, 0);
        }
    } stop_guardian{guardian};
    auto tell_guardian = [&](std::int64_t deadline_ns) {
        return ::send(to_guardian.value, &deadline_ns, sizeof deadline_ns, MSG_NOSIGNAL) ==
               static_cast<ssize_t>(sizeof deadline_ns);
    };
    std::int64_t told = std::chrono::nanoseconds(lease.deadline().time_since_epoch()).count();
    tell_guardian(told);

    // A lease already lost (its grant answered after its deadline, or sqlock
    // was stopped since) must not start PROGRAM: another owner may hold the
    // key by now. From here on the guardian watches the deadline.
    if (lease.stop.stop_requested() || lease.deadline() <= sqlock::lease_clock::now())
        throw spawn_error(exit_status::lease_lost,
                          "the lease was lost before '" + path + "' started; it was not run");

    int pipe_fds[2];
    if (::pipe2(pipe_fds, O_CLOEXEC) != 0) throw std::runtime_error(std::string("pipe: ") + std::strerror(errno));
    fd exec_error_read(pipe_fds[0]);
    fd exec_error_write(pipe_fds[1]);
    const pid_t pid = ::fork();
    if (pid < 0) throw std::runtime_error(std::string("fork: ") + std::strerror(errno));
    if (pid == 0) {
        ::setpgid(0, guardian);
        ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // belt and braces: the guardian does this for the whole group
        if (::getppid() != parent) ::_exit(exit_status::not_found);
        if (tty.foreground()) terminal::hand_to(guardian);
        cloexec_ranges(not_inherited, limit);
        restore_start_dispositions();  // before the mask lets a signal in
        sigset_t none;
        sigemptyset(&none);
        pthread_sigmask(SIG_SETMASK, &none, nullptr);
        ::execve(path.c_str(), arg_ptrs.data(), env_ptrs.data());
        const int e = errno;  // reported, even if /bin/sh cannot be run either
        if (e == ENOEXEC) ::execve(sh_args[0].c_str(), sh_arg_ptrs.data(), env_ptrs.data());
        [[maybe_unused]] auto n = ::write(exec_error_write.value, &e, sizeof e);
        ::_exit(exit_status::not_found);
    }
    ::setpgid(pid, guardian);
    ::close(exec_error_write.value);
    exec_error_write.value = -1;
    int exec_errno = 0;
    if (::read(exec_error_read.value, &exec_errno, sizeof exec_errno) == static_cast<ssize_t>(sizeof exec_errno)) {
        int ignored;
        ::waitpid(pid, &ignored, 0);
        throw spawn_error(exec_errno == ENOENT ? exit_status::not_found : exit_status::cannot_execute,
                          "cannot run '" + path + "': " + std::strerror(exec_errno));
    }
    tell_guardian(-static_cast<std::int64_t>(pid));  // PROGRAM's pid: stopped in a group of its own too
    relay.forward_to(guardian, pid);

    fd child(static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)));
    fd lost_event(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
    std::stop_callback on_lost(lease.stop, [&] {
        const std::uint64_t one = 1;
        [[maybe_unused]] auto n = ::write(lost_event.value, &one, sizeof one);
    });

    // The deadline moves with each renewal (every third of the lease); the
    // guardian hears of it within a tick, well inside the lease's margin.
    const int tick_ms = static_cast<int>(std::clamp<std::int64_t>(lease_length.count() / 20, 10, 100));
    child_result result;
    bool guardian_alive = true;
    std::int64_t kill_at = 0;  // when the guardian is gone: SIGKILL the group from here then (0: not due)
    bool own_group = false;    // PROGRAM moved to a group it leads (setpgid)
    // The grace period from now; 0 (never) when it is too long to count.
    auto after_grace = [&] {
        const std::int64_t now = lease_clock_ns();
        return grace_ns < std::numeric_limits<std::int64_t>::max() - now ? now + grace_ns : 0;
    };
    for (;;) {
        // A closed socket polls readable forever: once the guardian is gone,
        // poll a descriptor that never is (-1) in its place.
        pollfd fds[3] = {{lost_event.value, POLLIN, 0},
                         {guardian_alive ? to_guardian.value : -1, POLLIN, 0},
                         {child.value, POLLIN, 0}};
        if (::poll(fds, child.value >= 0 ? 3 : 2, tick_ms) < 0 && errno != EINTR)
            throw std::runtime_error(std::string("poll: ") + std::strerror(errno));
        if (fds[0].revents & POLLIN) {
            std::uint64_t drained;
            [[maybe_unused]] auto n = ::read(lost_event.value, &drained, sizeof drained);
        }
        if (fds[1].revents & (POLLIN | POLLHUP | POLLERR)) {
            char stopped;
            const ssize_t n = ::recv(to_guardian.value, &stopped, 1, MSG_DONTWAIT);
            if (n == 1) {
                result.lost = true;
            } else if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
                // The guardian died (someone killed it): sqlock does its work
                // from here while it runs; a freeze or kill -9 of sqlock
                // itself can no longer stop PROGRAM's group.
                guardian_alive = false;
                // After a loss the guardian ends its own group, itself
                // included, by design: nothing to report then.
                if (!result.lost)
                    std::fprintf(stderr,
                                 "sqlock: the guardian of PROGRAM's process group (pid %d) died; PROGRAM goes on, "
                                 "but is no longer stopped if sqlock is frozen or killed\n",
                                 static_cast<int>(guardian));
                else
                    kill_at = after_grace();  // it may have died before its SIGKILL
            }
        }
        if (kill_at != 0 && lease_clock_ns() >= kill_at) {
            signal_group(guardian, pid, SIGKILL);
            kill_at = 0;
        }
        // A PROGRAM that leads a group of its own: what it leaves there after
        // a loss goes too (below), once PROGRAM itself is reaped.
        if (::getpgid(pid) == pid) own_group = true;
        int wstatus = 0;
        const pid_t waited = ::waitpid(pid, &wstatus, WNOHANG | WUNTRACED);
        // ECHILD: someone reaped PROGRAM (SIGCHLD ignored, which startup()
        // undoes): its status is gone, and it would be ECHILD forever.
        if (waited < 0 && errno != EINTR) throw std::runtime_error(std::string("waitpid: ") + std::strerror(errno));
        if (waited == pid) {
            if (WIFSTOPPED(wstatus)) {
                // Ctrl-Z (or a read from the terminal while in the background):
                // stop sqlock too, so the shell sees the job stopped; renewals
                // stop with it, and a stop longer than the lease ends PROGRAM.
                if (tty.foreground()) {
                    tty.take_back();
                    ::raise(SIGSTOP);
                    if (::tcgetpgrp(0) == ::getpgrp()) terminal::hand_to(guardian);  // `fg`
                    signal_group(guardian, pid, SIGCONT);
                }
                continue;
            }
            result.status = status_of(wstatus);
            result.killed = result.lost && WIFSIGNALED(wstatus) && WTERMSIG(wstatus) == SIGKILL;
            break;
        }
        if (lease.stop.stop_requested() && !result.lost) {
            // The guardian stops the group: SIGTERM now, SIGKILL after the
            // grace period. Should it be gone, do it from here.
            result.lost = true;
            if (!guardian_alive || !tell_guardian(0)) {
                ask_to_end(guardian, pid, SIGTERM);
                kill_at = after_grace();
            }
        } else if (!result.lost && guardian_alive) {
            const std::int64_t deadline = std::chrono::nanoseconds(lease.deadline().time_since_epoch()).count();
            if (deadline != told && tell_guardian(deadline)) told = deadline;
        }
    }
    // After a loss nothing of PROGRAM's may run on: what it left in its group
    // goes now. Otherwise, like flock(1), background jobs it started stay.
    if (result.lost) {
        // The pid of a group that still has members is not handed out again.
        if (own_group) ::kill(-pid, SIGKILL);
        ::kill(-guardian, SIGKILL);
    }
    relay.forward_to(0);
    return result;
}

}  // namespace sqlock::cli
