// sqlock_demo: a periodic job that must run once per period, shared by
// several worker processes on the embedded SQLite default. In the middle of
// the demo the worker running the job is killed with kill -9; another worker
// finishes that period once the dead one's lease has run out. The demo then
// prints the job ledger and checks, from the ledger and from the workers' own
// execution log, that every period ran exactly once.
//
//   sqlock_demo [--db FILE] [--workers N] [--periods N] [--period-ms MS]
//
// The workers are this program started again with the hidden --worker K
// (posix_spawn, not a bare fork: each worker opens its own client, and a
// client must never cross a fork).

#include <sqlock/sqlock.hpp>

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

using namespace std::chrono_literals;
using steady = std::chrono::steady_clock;

extern char** environ;

namespace {

constexpr const char* job_name = "nightly-report";
// Short, so that a dead worker's run is taken over within the same period.
constexpr auto lease_length = 600ms;

struct settings {
    std::string db_file = "sqlock-demo.db";
    int workers = 4;
    int periods = 10;
    std::chrono::milliseconds period{2000};
    // Worker mode: its number, the execution log, and the run key of the
    // period in which the demo began (that one and earlier are not ours).
    int worker = 0;
    std::string log_file, after;
};

std::string worker_name(int id) { return "worker-" + std::to_string(id); }

// One write() per line: O_APPEND keeps the lines of several processes whole.
void append_line(int fd, const std::string& line) {
    const std::string text = line + "\n";
    if (write(fd, text.data(), text.size()) != static_cast<ssize_t>(text.size()))
        std::perror("sqlock_demo: writing the execution log");
}

// Nothing more to do for this run key, as far as this worker can tell.
bool settled(const sqlock::job_outcome& out) {
    using sqlock::job_status;
    return out.status == job_status::ran || out.status == job_status::already_done ||
           (out.status == job_status::failed && !out.retry_in);
}

volatile std::sig_atomic_t stopping = 0;

// A worker: every 50-100 ms, run the job for the current period unless
// another worker has done it or is doing it. Logs "K start|done|stopped
// KEY ATTEMPT TOKEN" per execution of the body, and "K calls N" at the end.
int run_worker(const settings& s) {
    std::signal(SIGTERM, +[](int) { stopping = 1; });
    const pid_t parent = getppid();
    const int log = open(s.log_file.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC);
    if (log < 0) {
        std::perror(s.log_file.c_str());
        return 1;
    }
    auto db = sqlock::client::open("sqlite:" + s.db_file);
    sqlock::job_runner runner(db, {.lease = lease_length});
    std::mt19937 rng(static_cast<unsigned>(getpid()));

    auto body = [&](const sqlock::job_context& c) {
        const std::string run = std::string(c.run_key) + " " + std::to_string(c.attempt) + " " + std::to_string(c.token);
        append_line(log, std::to_string(s.worker) + " start " + run);
        const auto work = 300ms + std::chrono::milliseconds(rng() % 201);
        for (auto spent = 0ms; spent < work; spent += 20ms) {
            if (c.stop.stop_requested()) {
                append_line(log, std::to_string(s.worker) + " stopped " + run);
                throw std::runtime_error("the lease was lost: stopped half-way");
            }
            std::this_thread::sleep_for(20ms);
        }
        append_line(log, std::to_string(s.worker) + " done " + run);
        return "report by " + worker_name(s.worker);
    };

    // runner.run(job_name, sqlock::every{period}, body) would do in one call;
    // keeping the key lets a worker come back to a run that was still held
    // (say, by a worker that then died) when its period ended.
    std::set<std::string> unsettled;
    long calls = 0;
    // A worker whose demo died (a new parent) stops too.
    while (!stopping && getppid() == parent) {
        try {
            const std::string current = runner.run_key(sqlock::every{s.period});
            // Run keys of one period length are ISO 8601 times: they sort by time.
            if (current > s.after) unsettled.insert(current);
            for (auto it = unsettled.begin(); it != unsettled.end();) {
                ++calls;
                it = settled(runner.run(job_name, *it, body)) ? unsettled.erase(it) : std::next(it);
            }
        } catch (const sqlock::error& e) {
            std::fprintf(stderr, "%s: %s\n", worker_name(s.worker).c_str(), e.what());
        }
        std::this_thread::sleep_for(50ms + std::chrono::milliseconds(rng() % 51));
    }
    append_line(log, std::to_string(s.worker) + " calls " + std::to_string(calls));
    close(log);
    return 0;
}

struct worker_process {
    int id;
    pid_t pid;
    int status = 0;  // from waitpid
};

pid_t spawn_worker(const settings& s, int id, const std::string& log_file, const std::string& after) {
    const std::string self = std::filesystem::read_symlink("/proc/self/exe");
    std::vector<std::string> args = {self, "--db", s.db_file, "--period-ms", std::to_string(s.period.count()),
                                     "--log", log_file, "--after", after, "--worker", std::to_string(id)};
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    pid_t pid = 0;
    if (int rc = posix_spawn(&pid, self.c_str(), nullptr, nullptr, argv.data(), environ); rc != 0)
        throw std::runtime_error("posix_spawn " + self + ": " + std::strerror(rc));
    return pid;
}

// One execution of the job body, from the workers' log.
struct execution {
    int worker = 0;
    std::string run_key;
    int attempt = 0;
    long long token = 0;
    std::string end;  // "done", "stopped", or "" when the worker died in it
};

// Follows the workers' execution log as it grows.
class log_follower {
public:
    explicit log_follower(int fd) : fd_(fd) {}
    ~log_follower() { close(fd_); }
    log_follower(const log_follower&) = delete;
    log_follower& operator=(const log_follower&) = delete;

    // Reads what was appended; returns the executions that started meanwhile.
    std::vector<execution> poll() {
        char buf[4096];
        for (ssize_t n; (n = read(fd_, buf, sizeof buf)) > 0;) pending_.append(buf, static_cast<std::size_t>(n));
        std::vector<execution> started;
        for (auto nl = pending_.find('\n'); nl != std::string::npos; nl = pending_.find('\n')) {
            std::istringstream line(pending_.substr(0, nl));
            pending_.erase(0, nl + 1);
            execution e;
            std::string what;
            line >> e.worker >> what;
            if (what == "calls") {
                long n = 0;
                line >> n;
                calls += n;
                continue;
            }
            line >> e.run_key >> e.attempt >> e.token;
            if (what == "start") {
                runs.push_back(e);
                started.push_back(e);
            } else {
                for (auto& r : runs)
                    if (r.worker == e.worker && r.run_key == e.run_key && r.attempt == e.attempt) r.end = what;
            }
        }
        return started;
    }

    std::vector<execution> runs;  // every execution so far, and how it ended
    long calls = 0;               // run() calls, reported by each worker as it exits

private:
    int fd_;
    std::string pending_;
};

// The ledger rows of the demo's periods (those after `after`), oldest first.
std::vector<sqlock::job_record> demo_rows(sqlock::job_runner& runner, const std::string& after, int periods) {
    std::vector<sqlock::job_record> rows;
    for (auto& r : runner.records(job_name, 100))
        if (r.run_key > after) rows.push_back(std::move(r));
    std::sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return a.run_key < b.run_key; });
    if (rows.size() > static_cast<std::size_t>(periods)) rows.resize(static_cast<std::size_t>(periods));
    return rows;
}

bool all_succeeded(const std::vector<sqlock::job_record>& rows, int periods) {
    return rows.size() == static_cast<std::size_t>(periods) &&
           std::all_of(rows.begin(), rows.end(), [](const auto& r) { return r.status == sqlock::run_status::succeeded; });
}

// Everything the demo observed, once the workers are gone.
struct observed {
    std::vector<sqlock::job_record> rows;  // the ledger, one row per period
    std::vector<execution> runs;           // the execution log
    std::vector<worker_process> workers;
    long calls = 0;
    std::optional<int> victim;  // the worker killed with kill -9
    std::string kill_key;       // the run it was killed in

    // The worker a ledger row names: its holder is "host:pid:thread". 0 if none of ours.
    int worker_of(const sqlock::job_record& r) const {
        const auto last = r.holder.rfind(':');
        const auto first = last == std::string::npos || last == 0 ? std::string::npos : r.holder.rfind(':', last - 1);
        if (first == std::string::npos) return 0;
        const auto pid = static_cast<pid_t>(std::atol(r.holder.substr(first + 1).c_str()));
        for (const auto& w : workers)
            if (w.pid == pid) return w.id;
        return 0;
    }
};

void print_ledger(const observed& o) {
    const int key_width = o.rows.empty() ? 7 : static_cast<int>(o.rows.front().run_key.size());
    std::printf("\nThe job ledger, runner.records(\"%s\"), oldest first:\n", job_name);
    std::printf("  period  %-*s  ran by     token  attempts  status     result\n", key_width, "run key");
    for (std::size_t i = 0; i < o.rows.size(); ++i) {
        const auto& r = o.rows[i];
        const int ran_by = o.worker_of(r);
        const std::string note = o.victim && r.run_key == o.kill_key
                                     ? "   <- " + worker_name(*o.victim) + " was killed in attempt 1"
                                     : "";
        std::printf("  %6zu  %-*s  %-9s  %5lld  %8d  %-9s  %s%s\n", i + 1, key_width, r.run_key.c_str(),
                    ran_by ? worker_name(ran_by).c_str() : "?", static_cast<long long>(r.token), r.attempts,
                    sqlock::to_string(r.status), r.result.c_str(), note.c_str());
    }
}

// What contradicts the demo's claims; empty when every check passed.
std::vector<std::string> check(const observed& o, const settings& s, int kill_period) {
    std::vector<std::string> problems;
    if (o.rows.size() != static_cast<std::size_t>(s.periods))
        problems.push_back("only " + std::to_string(o.rows.size()) + " of " + std::to_string(s.periods) +
                           " periods are in the ledger");
    for (std::size_t i = 0; i < o.rows.size(); ++i) {
        const auto& r = o.rows[i];
        const std::string period = "period " + std::to_string(i + 1) + " (" + r.run_key + ")";
        if (r.status != sqlock::run_status::succeeded)
            problems.push_back(period + " is " + sqlock::to_string(r.status) + " in the ledger: " + r.last_error);
        std::vector<const execution*> done;
        for (const auto& e : o.runs)
            if (e.run_key == r.run_key && e.end == "done") done.push_back(&e);
        if (done.size() != 1) {
            std::string who;
            for (auto* e : done) who += ' ' + worker_name(e->worker) + "/attempt " + std::to_string(e->attempt);
            problems.push_back(period + ": the job body completed " + std::to_string(done.size()) + " times:" + who);
        } else if (done.front()->worker != o.worker_of(r) ||
                   r.result != "report by " + worker_name(done.front()->worker)) {
            problems.push_back(period + ": the ledger says " + r.holder + " (\"" + r.result + "\") but " +
                               worker_name(done.front()->worker) + " completed the body");
        }
    }
    const auto killed_row = std::find_if(o.rows.begin(), o.rows.end(),
                                         [&](const auto& r) { return o.victim && r.run_key == o.kill_key; });
    if (!o.victim) {
        problems.push_back("no worker was killed: period " + std::to_string(kill_period) + " never started");
    } else if (killed_row == o.rows.end()) {
        problems.push_back("the killed run " + o.kill_key + " is not among the demo's periods in the ledger");
    } else {
        for (const auto& e : o.runs)
            if (e.worker == *o.victim && e.run_key == o.kill_key && !e.end.empty())
                problems.push_back("the kill came too late: " + worker_name(*o.victim) + "'s attempt " +
                                   std::to_string(e.attempt) + " of " + o.kill_key + " ended (" + e.end + ")");
        if (killed_row->attempts != 2 || o.worker_of(*killed_row) == *o.victim)
            problems.push_back("the killed run " + o.kill_key + " shows attempts " +
                               std::to_string(killed_row->attempts) + " by " + killed_row->holder +
                               "; expected attempt 2 by another worker");
    }
    for (const auto& w : o.workers) {
        const bool killed = o.victim && w.id == *o.victim;
        const bool as_expected = killed ? WIFSIGNALED(w.status) && WTERMSIG(w.status) == SIGKILL
                                        : WIFEXITED(w.status) && WEXITSTATUS(w.status) == 0;
        if (!as_expected)
            problems.push_back(worker_name(w.id) + " ended with wait status " + std::to_string(w.status));
    }
    return problems;
}

int run_demo(const settings& s) {
    const std::string log_file = s.db_file + ".log";
    for (const char* suffix : {"", "-wal", "-shm", ".log"}) std::filesystem::remove(s.db_file + suffix);
    auto db = sqlock::client::open("sqlite:" + s.db_file);
    db.migrate();
    sqlock::job_runner runner(db);
    // The period under way is only partly ours: the demo's periods come after it.
    const std::string after = runner.run_key(sqlock::every{s.period});
    const int log_fd = open(log_file.c_str(), O_RDONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (log_fd < 0) {
        std::perror(log_file.c_str());
        return 1;
    }
    log_follower log(log_fd);
    const int kill_period = (s.periods + 1) / 2;
    std::printf("sqlock demo: a job, \"%s\", must run once per %g s period; %d worker processes compete for it\n"
                "through one SQLite file (%s), each calling job_runner::run() every 50-100 ms.\n"
                "A run takes 0.3-0.5 s under a %lld ms lease. %d periods; in period %d the worker running the job "
                "gets kill -9.\n\n",
                job_name, static_cast<double>(s.period.count()) / 1000, s.workers, s.db_file.c_str(),
                static_cast<long long>(lease_length.count()), s.periods, kill_period);
    std::fflush(stdout);

    observed o;
    for (int id = 1; id <= s.workers; ++id) o.workers.push_back({id, spawn_worker(s, id, log_file, after)});

    // Number the periods as they start, kill the worker that starts the
    // chosen one, and tell who takes its run over.
    std::map<std::string, int> period_of;
    bool progress_open = false;  // a "periods started:" line is being written
    auto say = [&](const char* format, auto... args) {
        std::printf("%s  ", progress_open ? "\n" : "");
        std::printf(format, args...);
        std::printf("\n");
        progress_open = false;
    };
    steady::time_point killed_at;
    auto started = [&](const execution& e) {
        if (e.worker < 1 || e.worker > s.workers) return;
        if (!period_of.count(e.run_key)) {
            const int number = static_cast<int>(period_of.size()) + 1;
            period_of[e.run_key] = number;
            std::printf(progress_open ? " %d" : "  periods started: %d", number);
            progress_open = true;
        }
        const int period = period_of[e.run_key];
        if (!o.victim && period == kill_period) {
            const pid_t pid = o.workers[static_cast<std::size_t>(e.worker - 1)].pid;
            kill(pid, SIGKILL);
            killed_at = steady::now();
            o.victim = e.worker;
            o.kill_key = e.run_key;
            say("period %d: %s is running the job (attempt %d, token %lld): kill -9 %d", period,
                worker_name(e.worker).c_str(), e.attempt, e.token, static_cast<int>(pid));
        } else if (o.victim && e.run_key == o.kill_key && e.worker != *o.victim) {
            const auto later = std::chrono::duration_cast<std::chrono::milliseconds>(steady::now() - killed_at);
            say("period %d: %s takes over %lld ms later (attempt %d, token %lld), once %s's lease ran out", period,
                worker_name(e.worker).c_str(), static_cast<long long>(later.count()), e.attempt, e.token,
                worker_name(*o.victim).c_str());
        }
        std::fflush(stdout);
    };

    // Run until every period is recorded; the deadline only guards against a
    // stuck demo (the periods, the one under way, and slack for a slow machine).
    const auto deadline = steady::now() + (s.periods + 1) * s.period + 10s;
    auto next_check = steady::now();
    while (steady::now() < deadline) {
        for (const auto& e : log.poll()) started(e);
        if (period_of.size() >= static_cast<std::size_t>(s.periods) && steady::now() >= next_check) {
            if (all_succeeded(demo_rows(runner, after, s.periods), s.periods)) break;
            next_check = steady::now() + 100ms;
        }
        std::this_thread::sleep_for(10ms);
    }
    for (auto& w : o.workers)
        if (w.id != o.victim) kill(w.pid, SIGTERM);
    for (auto& w : o.workers) waitpid(w.pid, &w.status, 0);
    log.poll();  // the workers' last lines
    if (progress_open) std::printf("\n");

    o.rows = demo_rows(runner, after, s.periods);
    o.runs = log.runs;
    o.calls = log.calls;
    print_ledger(o);

    std::printf("\nChecked against the ledger and the workers' execution log (%s):\n", log_file.c_str());
    if (const auto problems = check(o, s, kill_period); !problems.empty()) {
        for (const auto& p : problems) std::printf("- FAILED: %s\n", p.c_str());
        return 1;
    }
    std::size_t completed = 0;
    for (const auto& r : o.rows)
        for (const auto& e : o.runs) completed += e.run_key == r.run_key && e.end == "done";
    const auto& killed = *std::find_if(o.rows.begin(), o.rows.end(), [&](auto& r) { return r.run_key == o.kill_key; });
    std::printf("- Each of the %d periods ran exactly once: %zu runs succeeded in the ledger and %zu job bodies\n"
                "  completed, out of %ld run() calls by %d competing workers.\n",
                s.periods, o.rows.size(), completed, o.calls, s.workers);
    std::printf("- Period %d was retried by %s after %s was killed (kill -9) mid-run: attempt 2, token %lld.\n",
                kill_period, worker_name(o.worker_of(killed)).c_str(), worker_name(*o.victim).c_str(),
                static_cast<long long>(killed.token));
    if (!killed.last_error.empty())
        std::printf("  Its ledger row keeps what became of attempt 1:\n  \"%s\"\n", killed.last_error.c_str());
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    settings s;
    bool usage_ok = argc % 2 == 1;  // flags come with a value each
    for (int i = 1; usage_ok && i + 1 < argc; i += 2) {
        const std::string flag = argv[i];
        const char* value = argv[i + 1];
        if (flag == "--db") s.db_file = value;
        else if (flag == "--workers") s.workers = std::atoi(value);
        else if (flag == "--periods") s.periods = std::atoi(value);
        else if (flag == "--period-ms") s.period = std::chrono::milliseconds(std::atol(value));
        else if (flag == "--worker") s.worker = std::atoi(value);
        else if (flag == "--log") s.log_file = value;
        else if (flag == "--after") s.after = value;
        else usage_ok = false;
    }
    if (!usage_ok || s.workers < 2 || s.workers > 32 || s.periods < 2 || s.periods > 50 || s.period < 1000ms) {
        std::fprintf(stderr, "usage: sqlock_demo [--db FILE] [--workers 2-32] [--periods 2-50] [--period-ms >=1000]\n");
        return 64;
    }
    try {
        return s.worker > 0 ? run_worker(s) : run_demo(s);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "sqlock_demo: %s\n", e.what());
        return 1;
    }
}
