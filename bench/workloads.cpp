#include "workloads.hpp"

#include <sqlock/sqlock.hpp>

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <exception>
#include <fstream>
#include <iostream>
#include <limits>
#include <sstream>
#include <thread>
#include <utility>

#include <sys/wait.h>

namespace bench {

// ---------------------------------------------------------------------------
// Threads: uncontended and hot key
// ---------------------------------------------------------------------------

thread_sample run_threads(const contender& c, const target& t, int workers, int hold_ms, double warmup_s,
                          double seconds, const std::string& key, bool wait) {
    constexpr int keys_per_worker = 20;
    std::vector<std::unique_ptr<locker>> lockers;
    for (int w = 0; w < workers; ++w) {
        std::unique_ptr<locker> shared = wait && w > 0 ? lockers.front()->share() : nullptr;
        lockers.push_back(shared ? std::move(shared) : open_locker(c, t, {}));
    }
    struct worker_state {
        thread_sample s;
        std::exception_ptr error;
    };
    std::vector<worker_state> out(static_cast<std::size_t>(workers));
    // Exclusion, checked: on the hot key at most one worker may hold it.
    std::atomic<int> holders{0};
    const std::int64_t start = monotonic_ns() + 20'000'000;
    const std::int64_t from = start + static_cast<std::int64_t>(warmup_s * 1e9);
    const std::int64_t to = from + static_cast<std::int64_t>(seconds * 1e9);

    auto work = [&](int w) {
        locker& l = *lockers[static_cast<std::size_t>(w)];
        thread_sample& s = out[static_cast<std::size_t>(w)].s;
        std::vector<std::string> keys;
        if (hold_ms < 0)
            for (int i = 0; i < keys_per_worker; ++i) keys.push_back(key + "/" + std::to_string(w) + "/" + std::to_string(i));
        s.latency_us.reserve(4096);
        sleep_until_monotonic(start);
        bool counting = false;
        std::uint64_t statements_before = 0;
        for (std::size_t i = 0;; ++i) {
            const std::int64_t t0 = monotonic_ns();
            if (t0 >= to) break;
            if (!counting && t0 >= from) {
                counting = true;
                statements_before = l.statements();
            }
            if (hold_ms < 0) {
                const std::string& k = keys[i % keys.size()];
                if (!l.try_lock(k)) failure(c.label + " found its own uncontended key '" + k + "' held");
                l.unlock(k);
                const std::int64_t t1 = monotonic_ns();
                if (counting && t1 <= to) {
                    ++s.successes;
                    ++s.attempts;
                    s.latency_us.push_back(static_cast<double>(t1 - t0) / 1e3);
                }
                continue;
            }
            std::uint64_t tries = 0;
            std::int64_t got = 0;
            for (;;) {
                ++tries;
                if (wait ? l.lock(key, to) : l.try_lock(key)) {
                    got = monotonic_ns();
                    break;
                }
                if (wait || monotonic_ns() >= to) break;
            }
            if (got == 0) {
                if (counting) s.attempts += tries;
                break;
            }
            if (holders.fetch_add(1) != 0) failure(c.label + ": two workers held the hot key at once");
            if (hold_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(hold_ms));
            holders.fetch_sub(1);
            l.unlock(key);
            if (counting && got <= to) {
                ++s.successes;
                s.attempts += tries;
                s.latency_us.push_back(static_cast<double>(got - t0) / 1e3);
            }
        }
        if (counting) s.statements = l.statements() - statements_before;
    };
    std::vector<std::thread> threads;
    for (int w = 0; w < workers; ++w)
        threads.emplace_back([&, w] {
            try {
                work(w);
            } catch (...) {
                out[static_cast<std::size_t>(w)].error = std::current_exception();
            }
        });
    for (auto& th : threads) th.join();
    thread_sample total;
    total.seconds = seconds;
    for (auto& o : out) {
        if (o.error) std::rethrow_exception(o.error);
        total.successes += o.s.successes;
        total.attempts += o.s.attempts;
        total.statements += o.s.statements;
        total.latency_us.insert(total.latency_us.end(), o.s.latency_us.begin(), o.s.latency_us.end());
    }
    return total;
}

// ---------------------------------------------------------------------------
// Processes: handoff and fairness
// ---------------------------------------------------------------------------
//
// Every waiter is a process of its own (this program with --child waiter):
// a release in one process wakes that process's own sqlock waiters through a
// condition variable, so waiters in one process would not show how a release
// reaches another machine. Timestamps come from CLOCK_MONOTONIC, which all
// processes of a machine share.

namespace {

// Contention before the measured window: first grants, every child's first
// statements, its LISTEN connection (PostgreSQL) fall in it.
constexpr std::int64_t contention_warmup_ns = 1'000'000'000;
// A grant that passed a caller who had called at least this much earlier is
// an overtake: closer calls may simply not have reached the database yet.
constexpr std::int64_t overtake_margin_ns = 10'000'000;

// A child's failure, as one "E ..." line for its parent; exit status 1.
int child_failed(const std::exception& e) {
    std::string what = e.what();
    std::replace(what.begin(), what.end(), '\n', ' ');
    try {
        write_all(1, "E " + what + "\n");
    } catch (...) {
    }
    return 1;
}

std::vector<std::string> with(std::vector<std::string> base, std::initializer_list<std::string> more) {
    base.insert(base.end(), more);
    return base;
}

}  // namespace

int waiter_main(const contender& c, const target& t, const std::string& key, int hold_ms, bool fair,
                std::int64_t lease_ms) {
    try {
        auto l = open_locker(c, t, {.lease = std::chrono::milliseconds(lease_ms), .fair = fair});
        {
            // The first connection and statements, on a key of its own.
            const std::string warm = key + "/warm-up/" + std::to_string(getpid());
            if (l->try_lock(warm)) l->unlock(warm);
        }
        write_all(1, "ready\n");
        std::string buffer, line;
        if (!read_line(0, buffer, line, monotonic_ns() + 900'000'000'000LL)) return 0;  // parent gave up
        std::int64_t start = 0, end = 0;
        {
            std::istringstream go(line);
            std::string word;
            go >> word >> start >> end;
            if (word != "go" || end <= start) failure("bad go line '" + line + "'");
        }
        const std::uint64_t statements_before = l->statements();
        std::ostringstream out;
        sleep_until_monotonic(start);
        for (;;) {
            const std::int64_t asked = monotonic_ns();
            if (asked >= end) break;
            if (!l->lock(key, end)) {
                out << "U " << asked << "\n";
                break;
            }
            const std::int64_t granted = monotonic_ns();
            if (hold_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(hold_ms));
            const std::int64_t released = monotonic_ns();
            const std::int64_t token = l->token();
            l->unlock(key);
            out << "G " << asked << " " << granted << " " << released << " " << token << "\n";
        }
        out << "S " << l->statements() - statements_before << "\n";
        write_all(1, out.str());
        return 0;
    } catch (const std::exception& e) {
        return child_failed(e);
    }
}

contention_run run_contention(const contender& c, const std::vector<std::string>& child_args,
                              int processes, double seconds, int hold_ms, bool fair, const std::string& key) {
    contention_run run;
    run.processes = processes;
    run.seconds = seconds;
    std::vector<child_process> children;
    for (int i = 0; i < processes; ++i)
        children.emplace_back(with(child_args, {"--child", "waiter", "--contender", c.id, "--key", key, "--hold-ms",
                                                std::to_string(hold_ms), "--fair", fair ? "1" : "0"}));
    const std::int64_t ready_by = monotonic_ns() + 120'000'000'000LL;
    for (auto& ch : children) {
        std::string line;
        if (!ch.read(line, ready_by) || line != "ready")
            failure("a waiter process failed to start: " + (line.empty() ? "(no answer)" : line));
    }
    run.start = monotonic_ns() + 200'000'000;  // every child sleeps until then
    run.from = run.start + contention_warmup_ns;
    run.to = run.from + static_cast<std::int64_t>(seconds * 1e9);
    for (auto& ch : children) {
        ch.send("go " + std::to_string(run.start) + " " + std::to_string(run.to) + "\n");
        ch.close_stdin();
    }
    const std::int64_t done_by = run.to + 120'000'000'000LL;
    for (std::size_t i = 0; i < children.size(); ++i) {
        bool first = true;
        std::string line;
        while (children[i].read(line, done_by)) {
            std::istringstream in(line);
            std::string tag;
            in >> tag;
            grant_record g;
            g.process = static_cast<int>(i);
            if (tag == "G") {
                in >> g.asked >> g.granted >> g.released >> g.token;
                g.first = std::exchange(first, false);
                run.grants.push_back(g);
            } else if (tag == "U") {
                in >> g.asked;
                g.first = first;
                run.unfinished.push_back(g);
            } else if (tag == "S") {
                std::uint64_t n = 0;
                in >> n;
                run.statements += n;
            } else {
                failure("waiter process " + std::to_string(i) + ": " + line);
            }
            if (!in) failure("waiter process " + std::to_string(i) + " sent '" + line + "'");
        }
        const int status = children[i].wait();
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
            failure("waiter process " + std::to_string(i) + " failed (wait status " + std::to_string(status) + ")");
    }
    std::sort(run.grants.begin(), run.grants.end(),
              [](const grant_record& a, const grant_record& b) { return a.granted < b.granted; });
    return run;
}

contention_summary summarize(const contention_run& run) {
    contention_summary s;
    s.per_process.assign(static_cast<std::size_t>(run.processes), 0);
    const auto& g = run.grants;
    auto in_window = [&run](const grant_record& r) { return r.granted >= run.from && r.granted < run.to; };
    for (std::size_t k = 0; k < g.size(); ++k) {
        // Exclusion, seen from the clocks: a grant returns only after the
        // previous holder began releasing.
        if (k > 0 && g[k].granted <= g[k - 1].released) ++s.order_errors;
        if (k > 0 && g[k].token != 0 && g[k].token <= g[k - 1].token) ++s.order_errors;
        if (!in_window(g[k])) continue;
        ++s.acquisitions;
        ++s.per_process[static_cast<std::size_t>(g[k].process)];
        const double wait = static_cast<double>(g[k].granted - g[k].asked) / 1e6;
        s.wait_ms.push_back(wait);
        s.max_wait_ms = std::max(s.max_wait_ms, wait);
        if (k > 0 && g[k].process != g[k - 1].process) {
            ++s.handoffs;
            s.handoff_ms.push_back(static_cast<double>(g[k].granted - g[k - 1].released) / 1e6);
        }
    }
    for (const auto& u : run.unfinished) {
        const double wait = static_cast<double>(run.to - u.asked) / 1e6;
        if (wait > s.max_wait_ms) {
            s.max_wait_ms = wait;
            s.max_wait_unfinished = true;
        }
    }
    // FIFO inversions: a grant in the window to a call made more than the
    // margin after that of another caller who was still waiting. Every
    // process's first call starts at the same instant, so two first calls
    // are not compared.
    constexpr std::int64_t never = std::numeric_limits<std::int64_t>::max();
    std::int64_t earliest_any = never, earliest_later = never;  // among calls granted later (or never)
    for (const auto& u : run.unfinished) {
        earliest_any = std::min(earliest_any, u.asked);
        if (!u.first) earliest_later = std::min(earliest_later, u.asked);
    }
    for (auto it = g.rbegin(); it != g.rend(); ++it) {
        const std::int64_t earliest = it->first ? earliest_later : earliest_any;
        if (in_window(*it) && earliest < it->asked - overtake_margin_ns) ++s.overtakes;
        earliest_any = std::min(earliest_any, it->asked);
        if (!it->first) earliest_later = std::min(earliest_later, it->asked);
    }
    double sum = 0, squares = 0;
    for (auto n : s.per_process) {
        sum += static_cast<double>(n);
        squares += static_cast<double>(n) * static_cast<double>(n);
    }
    s.jain = squares > 0 ? sum * sum / (static_cast<double>(s.per_process.size()) * squares) : 0;
    s.statements_per_acquisition =
        g.empty() ? 0 : static_cast<double>(run.statements) / static_cast<double>(g.size() + run.unfinished.size());
    return s;
}

// ---------------------------------------------------------------------------
// Renewal
// ---------------------------------------------------------------------------

namespace {

// Fields of /proc/<pid>/stat after "(comm)": [0] is field 3 (state).
std::vector<std::string> proc_stat_fields(int pid) {
    std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
    std::string line;
    std::getline(in, line);
    std::vector<std::string> out;
    const auto close = line.rfind(')');
    if (close == std::string::npos) return out;
    std::istringstream rest(line.substr(close + 1));
    for (std::string f; rest >> f;) out.push_back(f);
    return out;
}

}  // namespace

// CPU time a database server uses, from each process's CPU-time clock
// (clock_getcpuclockid: every thread, nanoseconds) rather than the 10 ms
// ticks of /proc/<pid>/stat.
class server_cpu {
public:
    server_cpu(int pid, bool with_children) : root_(pid), children_(with_children) {
        if (!std::filesystem::exists("/proc/" + std::to_string(pid)))
            failure("no process " + std::to_string(pid) + " to read the server's CPU time from");
    }
    struct sample {
        std::map<int, double> seconds;  // per live process
        double reaped = 0;              // children that exited and were waited for, whole lives
    };
    sample take() const {
        sample s;
        read(root_, s);
        if (children_) {
            for (int child : children()) read(child, s);
            const auto f = proc_stat_fields(root_);
            if (f.size() > 14)
                s.reaped = (std::stod(f[13]) + std::stod(f[14])) / static_cast<double>(sysconf(_SC_CLK_TCK));
        }
        return s;
    }
    // A process that exited in between counts with its whole life (reaped
    // total) minus what it had used before the first sample.
    static double between(const sample& a, const sample& b) {
        double total = b.reaped - a.reaped;
        for (const auto& [pid, t] : b.seconds) {
            auto before = a.seconds.find(pid);
            total += t - (before == a.seconds.end() ? 0.0 : before->second);
        }
        for (const auto& [pid, t] : a.seconds)
            if (!b.seconds.contains(pid)) total -= t;
        return std::max(total, 0.0);
    }

private:
    static void read(int pid, sample& s) {
        clockid_t clock{};
        timespec ts{};
        if (clock_getcpuclockid(pid, &clock) != 0 || clock_gettime(clock, &ts) != 0) return;  // gone
        s.seconds[pid] = static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
    }
    std::vector<int> children() const {
        std::vector<int> out;
        std::ifstream list("/proc/" + std::to_string(root_) + "/task/" + std::to_string(root_) + "/children");
        if (list) {
            for (int pid; list >> pid;) out.push_back(pid);
            return out;
        }
        for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
            const std::string name = entry.path().filename().string();
            if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
            const auto f = proc_stat_fields(std::stoi(name));
            if (f.size() > 1 && f[1] == std::to_string(root_)) out.push_back(std::stoi(name));
        }
        return out;
    }
    int root_;
    bool children_;
};

std::shared_ptr<server_cpu> open_server_cpu(int pid, bool with_children) {
    return std::make_shared<server_cpu>(pid, with_children);
}

double server_idle_ms_per_s(server_cpu& probe, double seconds) {
    const auto a = probe.take();
    const auto t0 = clock_type::now();
    std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
    const auto b = probe.take();
    return server_cpu::between(a, b) * 1e3 / seconds_of(clock_type::now() - t0);
}

namespace {

// sqlock's leases last 3 s and are renewed every second (a third, the
// default); the per-lease contenders' for an hour, renewed once a second, so
// a contender that falls behind its schedule keeps its keys.
constexpr std::chrono::milliseconds sqlock_renewal_lease{3000};
constexpr std::chrono::milliseconds renewal_interval{1000};
constexpr std::chrono::milliseconds per_lease_lease{3'600'000};

struct counters {
    std::uint64_t statements = 0, renewals = 0, rounds = 0, troubles = 0;
};

struct sample_point {
    clock_type::time_point at;
    counters n;
    double process_cpu = 0, main_cpu = 0;
    std::optional<server_cpu::sample> server;
};

// The server's CPU is read before the bench's own counters at a window's
// start and after them at its end, so reading it costs the window nothing.
template <typename F>
sample_point take_point(server_cpu* probe, bool start, F&& read_counters) {
    sample_point p;
    if (probe && start) p.server = probe->take();
    p.at = clock_type::now();
    p.n = read_counters();
    p.process_cpu = process_cpu_seconds();
    p.main_cpu = thread_cpu_seconds();
    if (probe && !start) p.server = probe->take();
    return p;
}

// `exclude_main`: the main thread only waited (sqlock's watchdog did the work).
renewal_window window_between(const sample_point& a, const sample_point& b, bool exclude_main) {
    renewal_window w;
    w.seconds = seconds_of(b.at - a.at);
    w.statements = static_cast<double>(b.n.statements - a.n.statements);
    w.renewals = static_cast<double>(b.n.renewals - a.n.renewals);
    w.troubles = static_cast<double>(b.n.troubles - a.n.troubles);
    w.client_cpu = (b.process_cpu - a.process_cpu) - (exclude_main ? b.main_cpu - a.main_cpu : 0.0);
    if (a.server && b.server) w.server_cpu = server_cpu::between(*a.server, *b.server);
    return w;
}

// Waits until the watchdog has finished `target` rounds that renewed something.
void wait_rounds(sqlock::client& c, std::uint64_t target, clock_type::time_point not_before) {
    std::this_thread::sleep_until(not_before);
    const auto give_up = clock_type::now() + std::chrono::seconds(60);
    while (c.stats().watchdog_ticks < target) {
        if (clock_type::now() > give_up) failure("the watchdog finished no renewal round for 60 s");
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
}

std::string sqlock_url(const contender& c, const target& t) {
    return c.backend == "postgres" ? t.postgres : c.backend == "mysql" ? t.mysql : "sqlite:" + t.sqlite;
}

// sqlock: one client holding `n` leases; its watchdog renews them in batches.
// Each window starts just after a round has finished and ends just after the
// `rounds`-th next one has.
std::vector<renewal_window> renew_batched(const contender& c, const target& t, std::size_t n, int reps, int rounds,
                                          server_cpu* probe) {
    sqlock::client_options o;
    o.table_prefix = t.prefix;
    o.sweep = false;
    if (c.relaxed) o.durability = sqlock::durability::relaxed;
    auto client = sqlock::client::open(sqlock_url(c, t), o);
    const sqlock::lock_options options{.lease = sqlock_renewal_lease, .reentrant = false};
    std::vector<sqlock::lease> held;
    held.reserve(n);
    // SQLite: the watchdog's renewals wait for the one write lock, which a
    // thread granting in a tight loop holds off (the busy handler does not
    // queue across clients); so pause 150 ms after every 200 ms of grants.
    const bool single_writer = c.backend == "sqlite";
    auto since = clock_type::now();
    for (std::size_t i = 0; i < n; ++i) {
        const std::string key = "renewal/" + c.id + "/" + std::to_string(i);
        auto l = client.try_acquire(key, options);
        if (!l) failure("sqlock found '" + key + "' held");
        held.push_back(std::move(*l));
        if (single_writer && clock_type::now() - since > std::chrono::milliseconds(200)) {
            std::this_thread::sleep_for(std::chrono::milliseconds(150));
            since = clock_type::now();
        }
    }
    if (client.stats().leases_lost > 0) failure("sqlock lost leases while the bench acquired them");
    // The first round after the last grant renews every lease (each falls due
    // within the gap), so from the second on they share one round.
    wait_rounds(client, client.stats().watchdog_ticks + 2, clock_type::now());
    auto read = [&client] {
        const auto st = client.stats();
        return counters{st.statements, st.renewals, st.watchdog_ticks, st.leases_lost + st.renewal_failures};
    };
    std::vector<renewal_window> out;
    sample_point a = take_point(probe, true, read);
    for (int rep = 0; rep < reps; ++rep) {
        wait_rounds(client, a.n.rounds + static_cast<std::uint64_t>(rounds), a.at + rounds * renewal_interval - renewal_interval / 2);
        sample_point b = take_point(probe, false, read);
        out.push_back(window_between(a, b, true));
        a = std::move(b);
    }
    for (auto& l : held) l.release();
    return out;
}

// Every other contender: `n` keys held by one locker (one connection), each
// renewed by its own statement once a second at its own evenly spread moment,
// as independent per-lease timers would fire. Renewals that fall behind go
// out at once; the window ends on time regardless.
std::vector<renewal_window> renew_per_lease(const contender& c, const target& t, std::size_t n, int reps, int rounds,
                                            server_cpu* probe) {
    auto l = open_locker(c, t, {.lease = per_lease_lease});
    std::vector<std::string> keys;
    for (std::size_t i = 0; i < n; ++i) {
        keys.push_back("renewal/" + c.id + "/" + std::to_string(n) + "/" + std::to_string(i));
        if (!l->try_lock(keys.back())) failure(c.label + " found '" + keys.back() + "' held");
    }
    std::uint64_t renewed = 0;
    auto read = [&] { return counters{l->statements(), renewed, 0, 0}; };
    const auto spacing = std::chrono::duration<double>(renewal_interval) / static_cast<double>(n);
    std::vector<renewal_window> out;
    for (int rep = 0; rep < reps; ++rep) {
        const sample_point a = take_point(probe, true, read);
        const auto end = a.at + rounds * renewal_interval;
        double worst = 0;
        if (l->needs_renewal()) {
            for (std::uint64_t j = 0;; ++j) {
                const auto due = a.at + std::chrono::duration_cast<clock_type::duration>(spacing * static_cast<double>(j));
                const auto now = clock_type::now();
                if (due >= end || now >= end) break;
                if (now < due) std::this_thread::sleep_until(due);
                else worst = std::max(worst, seconds_of(now - due));
                const std::string& key = keys[j % n];
                if (!l->renew(key)) failure(c.label + ": renewal found '" + key + "' not held");
                ++renewed;
            }
        }
        std::this_thread::sleep_until(end);
        renewal_window w = window_between(a, take_point(probe, false, read), false);
        w.worst_lag = worst;
        out.push_back(w);
    }
    for (const auto& k : keys) l->unlock(k);
    return out;
}

}  // namespace

std::vector<renewal_window> run_renewal(const contender& c, const target& t, std::size_t leases, int reps, int rounds,
                                        server_cpu* probe) {
    if (c.kind == family::sqlock) return renew_batched(c, t, leases, reps, rounds, probe);
    return renew_per_lease(c, t, leases, reps, rounds, probe);
}

// ---------------------------------------------------------------------------
// Recovery after kill -9
// ---------------------------------------------------------------------------

int holder_main(const contender& c, const target& t, const std::string& key, std::int64_t lease_ms) {
    try {
        auto l = open_locker(c, t, {.lease = std::chrono::milliseconds(lease_ms)});
        if (!l->lock(key, monotonic_ns() + 60'000'000'000LL)) failure("the holder did not get '" + key + "' in 60 s");
        write_all(1, "held\n");
        for (;;) pause();  // until SIGKILL
    } catch (const std::exception& e) {
        return child_failed(e);
    }
}

double run_recovery(const contender& c, const target& t, const std::vector<std::string>& child_args,
                    std::chrono::milliseconds lease, std::chrono::milliseconds kill_after, const std::string& key) {
    auto waiter = open_locker(c, t, {.lease = lease});
    {
        // The waiter's connection and first statements, on a key of its own.
        const std::string warm = key + "/warm-up";
        if (waiter->try_lock(warm)) waiter->unlock(warm);
    }
    child_process holder(with(child_args, {"--child", "holder", "--contender", c.id, "--key", key, "--lease-ms",
                                           std::to_string(lease.count())}));
    std::string line;
    if (!holder.read(line, monotonic_ns() + 60'000'000'000LL) || line != "held")
        failure("the holder process failed: " + (line.empty() ? "(no answer)" : line));
    std::this_thread::sleep_for(kill_after);
    holder.kill_now();
    const std::int64_t killed = monotonic_ns();
    holder.wait();
    const std::int64_t limit = killed + 3 * std::chrono::nanoseconds(lease).count() + 10'000'000'000LL;
    if (!waiter->lock(key, limit)) failure(c.label + ": no grant within three leases after the holder was killed");
    const std::int64_t granted = monotonic_ns();
    waiter->unlock(key);
    return static_cast<double>(granted - killed) / 1e6;
}

}  // namespace bench
