// sqlock_test_worker: the other processes of multi-process tests. Each
// subcommand prints what it observed, one fact per line, so that the test
// (the parent) can assert on it.
//
//   counter URL PREFIX KEY MODE ITERATIONS FILE
//       ITERATIONS times: acquire KEY, read the integer in FILE, sleep a
//       little, write it back plus one, append "token owner" to FILE.tokens,
//       release. Unguarded read-modify-write: only the lock keeps it exact.
//   ha-counter URLS PREFIX KEY MODE ITERATIONS FILE LEASE_MS
//       `counter` through a failover or a dead cluster node (scripts/ha.sh):
//       URLS is a space-separated list of URLs, used in turn; an open,
//       acquire or release that fails with a connection or database error
//       moves to the next URL and goes on. A lease already lost when
//       acquire returns is not used. Prints "done N", "errors E", "lost L".
//   hold URL PREFIX KEY MODE LEASE_MS
//       acquire KEY (waiting up to 30 s), print "token T", then sleep until killed.
//   migrate URL PREFIX
//       run migrate(), print "version V".
//   clock URL PREFIX KEY LEASE_MS
//       the clock-skew scenario (run under faketime by the test): see below.
//   frozen URL PREFIX KEY MODE LEASE_MS
//       acquire KEY with auto-renewal, print "token T", wait for SIGCONT (the
//       parent SIGSTOPs and later continues it), then at once print
//       "check threw" / "check ok" and "renew 1" / "renew 0".
//   grant-loop URL PREFIX KEY LEASE_MS
//       print "looping", then take and release KEY (fixed lease) in a tight
//       loop until killed, for the parent to freeze it at a random point.
//   churn URL PREFIX KEY ITERATIONS FILE
//       `counter` in unique_insert mode with a 400 ms auto-renewed lease and
//       the sweeper running every 20 ms; before each turn it also takes three
//       junk keys with a 50 ms fixed lease and abandons them. Then waits
//       100 ms, prints "done N", "swept S" (its rows_swept) and "tickets T"
//       (wait-queue tickets it took, whose rows a sweeper may delete), and exits
//       without releasing the junk, as a crashed process would.
//   fair URL PREFIX KEY PRIORITY LEASE_MS ID FILE
//       acquire KEY fairly (waiting up to 60 s), append ID to FILE while
//       holding it, release, print "granted ID".
//   jobs URL PREFIX JOB RUNS FILE
//       job_runner: run JOB for run keys run-0 .. run-(RUNS-1) in a shuffled
//       order, passing over busy ones until every key is settled; the body
//       appends "RUNKEY PID" to FILE. Prints "ran N", "done N", "busy N".
//   job-hang URL PREFIX JOB RUNKEY LEASE_MS FILE
//       run JOB for RUNKEY with a body that appends "RUNKEY PID" to FILE,
//       prints "running TOKEN" and then sleeps until killed.
//   job-frozen URL PREFIX JOB RUNKEY LEASE_MS TABLE
//       run JOB for RUNKEY with a body that prints "running TOKEN" and waits
//       for SIGCONT (the parent SIGSTOPs it past its lease and continues it),
//       then inserts ('fenced', TOKEN) into TABLE in a transaction fenced by
//       the run's lease ("fenced ok" / "fenced rejected") and
//       ('unfenced', TOKEN) without a fence ("unfenced ok"). Then prints
//       "outcome STATUS".
//   rw URL PREFIX KEY ITERATIONS WRITE_EVERY HOLD_US LOG
//       ITERATIONS times: every WRITE_EVERY-th turn (0: never) acquire KEY
//       exclusively, else shared (each waiting up to 120 s); append "W+" /
//       "R+" to LOG, stay HOLD_US microseconds (a random part of it for
//       writers), append "W-" / "R-", release. One write(2) per line on an
//       O_APPEND descriptor, so the lines of every process interleave whole
//       and in the order they happened. Prints "done N".
//   sem URL PREFIX NAME PERMITS ITERATIONS HOLD_US LOG
//       the same with permits of semaphore NAME ("P+" / "P-").
//   hold-permit URL PREFIX NAME PERMITS LEASE_MS
//       take a permit (waiting up to 30 s), print "token T", sleep until killed.
//   ring-wait URL PREFIX KEY MODE
//       acquire KEY fairly in MODE (waiting up to 60 s).
//       On SIGUSR1, while it waits, it notes its client's counters and prints
//       "noted"; once granted (and its ring counted, or 2 s later) it prints
//       "misses M" and "wakeups W", the attempts that found KEY held and the
//       wake-ups received since the note (or "granted unnoted"), then
//       releases.
//   multi URL PREFIX KEYS ITERATIONS HOLD_US DIR TIMEOUT_MS
//       ITERATIONS times: acquire_all() a random 2 or 3 of the comma-separated
//       KEYS, listed in a random order (waiting up to TIMEOUT_MS); for each
//       key create DIR/inside-<key's index> with O_EXCL (it exists: another
//       process is inside too), stay HOLD_US microseconds, remove the files,
//       release. Prints "done N", "overlaps O" (files that existed),
//       "timeouts T" (calls that timed out), "lost L" (sets found lost) and
//       "waits W" (tickets taken: calls that found a key busy and waited).
//   hold-write URL MS
//       SQLite only: take the database's write lock (BEGIN IMMEDIATE), print
//       "holding", keep it MS milliseconds, commit, print "released".

#include "support/backends.hpp"

#include <sqlock/sqlock.hpp>

#include <fcntl.h>

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <optional>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

using namespace std::chrono_literals;

namespace {

sqlock::mode parse_mode(const std::string& m) {
    if (m == "unique_insert") return sqlock::mode::unique_insert;
    if (m == "conditional_update") return sqlock::mode::conditional_update;
    if (m == "select_for_update") return sqlock::mode::select_for_update;
    throw std::runtime_error("unknown mode " + m);
}

sqlock::client open(const std::string& url, const std::string& prefix) {
    sqlock::client_options o;
    o.table_prefix = prefix;
    return sqlock::client::open(url, o);
}

// A client without the background sweeper.
sqlock::client open_quiet(const std::string& url, const std::string& prefix) {
    sqlock::client_options o;
    o.table_prefix = prefix;
    o.sweep = false;
    return sqlock::client::open(url, o);
}

void say(const std::string& line) {
    std::cout << line << std::endl;  // flushed: the parent reads line by line
}

// The unguarded read-modify-write only the lock keeps exact: reads the
// integer in `file`, waits a little (without the lock, lost updates are
// certain), writes it back plus one, and appends "token owner" to FILE.tokens.
void increment_under(const sqlock::lease& lease, const std::string& file, std::mt19937& rng) {
    long value = 0;
    {
        std::ifstream in(file);
        in >> value;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(rng() % 300));
    {
        std::ofstream out(file, std::ios::trunc);
        out << value + 1 << "\n";
    }
    std::ofstream log(file + ".tokens", std::ios::app);
    log << lease.token() << " " << lease.owner() << "\n";
}

int counter(char** argv) {
    auto db = open(argv[2], argv[3]);
    const std::string key = argv[4];
    const auto m = parse_mode(argv[5]);
    const int iterations = std::stoi(argv[6]);
    const std::string file = argv[7];
    std::mt19937 rng(static_cast<unsigned>(getpid()));
    for (int i = 0; i < iterations; ++i) {
        auto lease = db.acquire(key, 120s, {.mode = m, .lease = 20s});
        increment_under(lease, file, rng);
        lease.release();
    }
    say("done " + std::to_string(iterations));
    return 0;
}

int ha_counter(char** argv) {
    std::vector<std::string> urls;
    {
        std::istringstream words(argv[2]);
        for (std::string u; words >> u;) urls.push_back(u);
    }
    const std::string prefix = argv[3], key = argv[4], file = argv[7];
    const auto m = parse_mode(argv[5]);
    const int iterations = std::stoi(argv[6]);
    const auto lease_len = std::chrono::milliseconds(std::stoll(argv[8]));
    std::mt19937 rng(static_cast<unsigned>(getpid()));
    std::optional<sqlock::client> db;
    std::size_t at = 0;
    int done = 0, errors = 0, lost = 0;
    auto next_url = [&] {
        ++errors;
        db.reset();
        ++at;
        std::this_thread::sleep_for(50ms);
    };
    const auto give_up = std::chrono::steady_clock::now() + 150s;
    while (done < iterations) {
        if (std::chrono::steady_clock::now() > give_up) {
            say("gave up after " + std::to_string(done));
            return 1;
        }
        try {
            if (!db) db.emplace(open(urls[at % urls.size()], prefix));
            auto lease = db->acquire(key, 30s, {.mode = m, .lease = lease_len});
            if (lease.lost()) {
                ++lost;
                continue;
            }
            increment_under(lease, file, rng);
            ++done;
            try {
                lease.release();
            } catch (const sqlock::lease_lost_error&) {
                ++lost;
            }
        } catch (const sqlock::connection_error&) {
            next_url();
        } catch (const sqlock::db_error&) {
            next_url();
        } catch (const sqlock::timeout_error&) {
            ++errors;
        }
    }
    say("done " + std::to_string(done));
    say("errors " + std::to_string(errors));
    say("lost " + std::to_string(lost));
    return 0;
}

int hold(char** argv) {
    auto db = open(argv[2], argv[3]);
    auto lease = db.acquire(argv[4], 30s,
                            {.mode = parse_mode(argv[5]), .lease = std::chrono::milliseconds(std::stoll(argv[6]))});
    say("token " + std::to_string(lease.token()));
    for (;;) pause();
}

int migrate(char** argv) {
    auto db = open(argv[2], argv[3]);
    db.migrate();
    say("version " + std::to_string(db.schema_version()));
    return 0;
}

// The parent holds KEY with a long lease, then starts this process (under
// faketime +1h, -1h, or not at all) and expects the same lines every time:
//   try busy         - a skewed clock must not make the holder look expired
//   child-holds T    - it took KEY/child with a short lease and stops renewing
//   (parent checks that KEY/child is held, then waits for it by database time)
//   lost 1           - after its lease, the child's lease reports lost
//   renew 0          - and cannot be renewed
int clock_scenario(char** argv) {
    auto db = open(argv[2], argv[3]);
    const std::string key = argv[4];
    const auto lease_len = std::chrono::milliseconds(std::stoll(argv[5]));
    say(db.try_acquire(key) ? "try got" : "try busy");
    auto mine = db.acquire(key + "/child", 10s, {.lease = lease_len, .auto_renew = false});
    say("child-holds " + std::to_string(mine.token()));
    std::this_thread::sleep_for(lease_len + 300ms);
    say(std::string("lost ") + (mine.lost() ? "1" : "0"));
    say(std::string("renew ") + (mine.renew() ? "1" : "0"));
    return 0;
}

// Waits (not fair) for a key another process holds; says when granted.
int wait_key(char** argv) {
    auto db = open(argv[2], argv[3]);
    auto lease = db.acquire(argv[4], 30s);
    say("granted " + std::to_string(lease.token()));
    return 0;
}

std::atomic<bool> continued{false};
static_assert(std::atomic<bool>::is_always_lock_free, "set from a signal handler");

extern "C" void on_sigcont(int) { continued.store(true); }

int frozen(char** argv) {
    struct sigaction sa {};
    sa.sa_handler = on_sigcont;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGCONT, &sa, nullptr);
    // No sweeper: after the grant, the only statements this process sends
    // are renewals, the first a third of a lease later.
    auto db = open_quiet(argv[2], argv[3]);
    auto lease = db.acquire(argv[4], 30s,
                            {.mode = parse_mode(argv[5]),
                             .lease = std::chrono::milliseconds(std::stoll(argv[6])),
                             .auto_renew = true});
    say("token " + std::to_string(lease.token()));
    // SIGSTOP freezes every thread, the watchdog too; SIGCONT runs the handler.
    while (!continued.load()) std::this_thread::sleep_for(1ms);
    // First thing after waking: a holder must learn that it was frozen past
    // its lease before it touches the protected resource again.
    bool threw = false;
    try {
        lease.check();
    } catch (const sqlock::lease_lost_error&) {
        threw = true;
    }
    say(threw ? "check threw" : "check ok");
    say(std::string("renew ") + (lease.renew() ? "1" : "0"));
    return 0;
}

int grant_loop(char** argv) {
    auto db = open_quiet(argv[2], argv[3]);  // grants and releases only
    const std::string key = argv[4];
    const auto lease_len = std::chrono::milliseconds(std::stoll(argv[5]));
    say("looping");
    for (;;) {
        auto l = db.try_acquire(key, {.lease = lease_len, .auto_renew = false});
        if (l) l->release();
    }
}

int churn(char** argv) {
    const std::string key = argv[4];
    const int iterations = std::stoi(argv[5]);
    const std::string file = argv[6];
    // Every abandoned junk lease is logged as lost when it runs out: keep
    // that out of the test's output.
    if (!std::freopen((file + "." + std::to_string(getpid()) + ".log").c_str(), "w", stderr))
        throw std::runtime_error("cannot redirect stderr");
    sqlock::client_options o;
    o.table_prefix = argv[3];
    o.sweep = true;
    o.sweep_interval = 20ms;
    auto db = sqlock::client::open(argv[2], o);
    // Never released: their rows stay behind for the sweepers.
    std::vector<sqlock::lease> abandoned;
    std::mt19937 rng(static_cast<unsigned>(getpid()));
    int junk = 0;
    for (int i = 0; i < iterations; ++i) {
        for (int j = 0; j < 3; ++j) {
            const std::string junk_key = "junk/" + std::to_string(getpid()) + "/" + std::to_string(junk++);
            auto l = db.try_acquire(junk_key,
                                    {.mode = sqlock::mode::unique_insert, .lease = 50ms, .auto_renew = false});
            if (!l) throw std::runtime_error("fresh junk key " + junk_key + " was busy");
            abandoned.push_back(std::move(*l));
        }
        auto lease = db.acquire(key, 60s, {.mode = sqlock::mode::unique_insert, .lease = 400ms});
        increment_under(lease, file, rng);
        lease.release();
    }
    // Linger for a junk lease and two sweep intervals, so that how much junk
    // is left behind does not depend on how fast the loop ran.
    std::this_thread::sleep_for(100ms);
    say("done " + std::to_string(iterations));
    say("swept " + std::to_string(db.stats().rows_swept));
    say("tickets " + std::to_string(db.stats().waits));
    std::fflush(nullptr);
    // Leave like a crashed process: no destructor releases the junk.
    std::_Exit(0);
}

int fair(char** argv) {
    auto db = open(argv[2], argv[3]);
    const std::string id = argv[7];
    auto lease = db.acquire(argv[4], 60s,
                            {.lease = std::chrono::milliseconds(std::stoll(argv[6])),
                             .fair = true,
                             .priority = std::stoi(argv[5])});
    {
        std::ofstream log(argv[8], std::ios::app);
        log << id << "\n";
    }
    std::this_thread::sleep_for(20ms);
    lease.release();
    say("granted " + id);
    return 0;
}

}  // namespace

// One line appended with a single write(2) on an O_APPEND file: lines of
// concurrent processes never interleave.
void append_line(const std::string& file, const std::string& line) {
    const int fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd < 0) throw std::runtime_error("cannot open " + file);
    const std::string text = line + "\n";
    const bool ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
    ::close(fd);
    if (!ok) throw std::runtime_error("cannot append to " + file);
}

int jobs(char** argv) {
    sqlock::job_runner runner(open(argv[2], argv[3]), {.lease = 10s, .retry_backoff = 0ms});
    const std::string job = argv[4];
    const int runs = std::stoi(argv[5]);
    const std::string file = argv[6];
    std::vector<std::string> pending;
    for (int i = 0; i < runs; ++i) pending.push_back("run-" + std::to_string(i));
    std::mt19937 rng(static_cast<unsigned>(getpid()));
    int ran = 0, done = 0, busy = 0;
    while (!pending.empty()) {
        std::shuffle(pending.begin(), pending.end(), rng);
        std::vector<std::string> again;
        for (const auto& run_key : pending) {
            auto out = runner.run(job, run_key, [&](const sqlock::job_context& c) {
                append_line(file, std::string(c.run_key) + " " + std::to_string(getpid()));
                std::this_thread::sleep_for(2ms);
                return "by " + std::to_string(getpid());
            });
            switch (out.status) {
                case sqlock::job_status::ran: ++ran; break;
                case sqlock::job_status::already_done: ++done; break;
                case sqlock::job_status::busy:
                    ++busy;
                    again.push_back(run_key);
                    break;
                default: throw std::runtime_error(run_key + ": " + sqlock::to_string(out.status) + " " + out.error);
            }
        }
        pending = std::move(again);
        if (!pending.empty()) std::this_thread::sleep_for(5ms);
    }
    say("ran " + std::to_string(ran));
    say("done " + std::to_string(done));
    say("busy " + std::to_string(busy));
    return 0;
}

int job_hang(char** argv) {
    sqlock::job_runner runner(open_quiet(argv[2], argv[3]),
                              {.lease = std::chrono::milliseconds(std::stoll(argv[6]))});
    const std::string file = argv[7];
    (void)runner.run(argv[4], argv[5], [&](const sqlock::job_context& c) {
        append_line(file, std::string(c.run_key) + " " + std::to_string(getpid()));
        say("running " + std::to_string(c.token));
        for (;;) std::this_thread::sleep_for(1s);
    });
    return 1;  // never reached: the parent kills us mid-run
}

int job_frozen(char** argv) {
    struct sigaction sa {};
    sa.sa_handler = on_sigcont;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGCONT, &sa, nullptr);
    const std::string url = argv[2];
    const std::string table = argv[7];
    sqlock::job_runner runner(open_quiet(url, argv[3]), {.lease = std::chrono::milliseconds(std::stoll(argv[6]))});
    auto out = runner.run(argv[4], argv[5], [&](const sqlock::job_context& c) {
        auto app = test::raw_connection_for(url);
        say("running " + std::to_string(c.token));
        while (!continued.load()) std::this_thread::sleep_for(1ms);
        auto insert = [&](const std::string& what) {
            return "INSERT INTO " + table + " (what, token) VALUES ('" + what + "', " + std::to_string(c.token) + ")";
        };
        try {
            app->begin();
            app->fence(c.lease);
            app->exec(insert("fenced"));
            app->commit();
            say("fenced ok");
        } catch (const sqlock::lease_lost_error&) {
            app->rollback();
            say("fenced rejected");
        }
        app->exec(insert("unfenced"));
        say("unfenced ok");
        return std::string("frozen");
    });
    say(std::string("outcome ") + sqlock::to_string(out.status));
    return 0;
}

int hold_write(char** argv) {
    auto raw = test::raw_connection_for(argv[2]);
    raw->begin();  // SQLite: BEGIN IMMEDIATE, the write lock
    say("holding");
    std::this_thread::sleep_for(std::chrono::milliseconds(std::stoll(argv[3])));
    raw->commit();
    say("released");
    return 0;
}

// Appends one line to an O_APPEND log in one write(2).
class event_log {
public:
    explicit event_log(const std::string& path) : fd_(::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT, 0644)) {
        if (fd_ < 0) throw std::runtime_error("cannot open " + path);
    }
    ~event_log() { ::close(fd_); }
    void add(const std::string& what) {
        const std::string line = what + " " + std::to_string(::getpid()) + "\n";
        if (::write(fd_, line.data(), line.size()) != static_cast<ssize_t>(line.size()))
            throw std::runtime_error("short write to the event log");
    }

private:
    int fd_;
};

// Holds `lease` for about hold_us while "<tag>+" and "<tag>-" bracket it in the log.
void inside(event_log& log, const sqlock::lease& lease, const std::string& tag, long hold_us) {
    lease.check();
    log.add(tag + "+");
    std::this_thread::sleep_for(std::chrono::microseconds(hold_us));
    log.add(tag + "-");
    lease.check();
}

int rw(char** argv) {
    auto db = open(argv[2], argv[3]);
    const std::string key = argv[4];
    const int iterations = std::stoi(argv[5]);
    const int write_every = std::stoi(argv[6]);
    const long hold_us = std::stol(argv[7]);
    event_log log(argv[8]);
    std::mt19937 rng(std::random_device{}());
    for (int i = 0; i < iterations; ++i) {
        if (write_every > 0 && i % write_every == 0) {
            auto lease = db.acquire(key, 120s);
            inside(log, lease, "W", static_cast<long>(rng() % static_cast<unsigned long>(hold_us + 1)));
        } else {
            auto lease = db.acquire_shared(key, 120s);
            inside(log, lease, "R", hold_us);
        }
    }
    say("done " + std::to_string(iterations));
    return 0;
}

int sem(char** argv) {
    auto db = open(argv[2], argv[3]);
    const std::string name = argv[4];
    const auto permits = std::stoll(argv[5]);
    const int iterations = std::stoi(argv[6]);
    const long hold_us = std::stol(argv[7]);
    event_log log(argv[8]);
    for (int i = 0; i < iterations; ++i) {
        auto lease = db.acquire_permit(name, permits, 120s);
        inside(log, lease, "P", hold_us);
    }
    say("done " + std::to_string(iterations));
    return 0;
}

int multi(char** argv) {
    auto db = open(argv[2], argv[3]);
    std::vector<std::string> keys;
    for (std::string all = argv[4]; !all.empty();) {
        const auto comma = all.find(',');
        keys.push_back(all.substr(0, comma));
        all = comma == std::string::npos ? "" : all.substr(comma + 1);
    }
    const int iterations = std::stoi(argv[5]);
    const long hold_us = std::stol(argv[6]);
    const std::string dir = argv[7];
    const auto timeout = std::chrono::milliseconds(std::stoll(argv[8]));
    std::mt19937 rng(std::random_device{}());
    int overlaps = 0, timeouts = 0, lost = 0;
    for (int i = 0; i < iterations; ++i) {
        std::vector<std::size_t> picked(keys.size());
        for (std::size_t k = 0; k < picked.size(); ++k) picked[k] = k;
        std::shuffle(picked.begin(), picked.end(), rng);
        picked.resize(2 + rng() % 2);
        std::vector<std::string> wanted;
        for (auto k : picked) wanted.push_back(keys[k]);
        try {
            auto set = db.acquire_all(wanted, timeout);
            std::vector<std::string> files;
            for (auto k : picked) {
                files.push_back(dir + "/inside-" + std::to_string(k));
                const int fd = ::open(files.back().c_str(), O_WRONLY | O_CREAT | O_EXCL, 0644);
                if (fd < 0) ++overlaps;
                else ::close(fd);
            }
            std::this_thread::sleep_for(std::chrono::microseconds(rng() % static_cast<unsigned long>(hold_us + 1)));
            if (set.lost()) ++lost;
            for (const auto& f : files) ::unlink(f.c_str());
            set.release();
        } catch (const sqlock::timeout_error&) {
            ++timeouts;
        }
    }
    say("done " + std::to_string(iterations));
    say("overlaps " + std::to_string(overlaps));
    say("timeouts " + std::to_string(timeouts));
    say("lost " + std::to_string(lost));
    say("waits " + std::to_string(db.stats().waits));
    return 0;
}

// See the usage above. The parent sends SIGUSR1 just before it releases the
// key: what happens after the note is what that release caused.
int ring_wait(char** argv) {
    // Blocked before the client starts its threads, so that only the
    // watcher below takes it.
    sigset_t usr1;
    sigemptyset(&usr1);
    sigaddset(&usr1, SIGUSR1);
    pthread_sigmask(SIG_BLOCK, &usr1, nullptr);
    auto db = open(argv[2], argv[3]);
    std::atomic<bool> noted{false}, granted{false};
    sqlock::client_stats before;
    std::thread watcher([&] {
        int sig = 0;
        sigwait(&usr1, &sig);
        if (granted.load()) return;  // sent by the guard below
        before = db.stats();
        noted = true;
        say("noted");
    });
    // However acquire() ends (granted, timed out, failed), the watcher ends
    // too: a thread still joinable at its destructor would abort the worker
    // and lose the error line main() prints.
    struct end_watcher {
        std::thread& t;
        std::atomic<bool>& granted;
        ~end_watcher() {
            granted = true;
            pthread_kill(t.native_handle(), SIGUSR1);  // a no-op once it has ended: still joinable until joined
            t.join();
        }
    } guard{watcher, granted};
    auto lease = db.acquire(argv[4], 60s, {.mode = parse_mode(argv[5]), .fair = true});
    // The ring that woke it is counted when the listener next reads its
    // count, which may come after the grant (on MariaDB a lease's release
    // rings before its COMMIT): waited for, up to 2 s, before the counters
    // are read.
    const auto counted = std::chrono::steady_clock::now() + 2s;
    while (noted.load() && db.stats().wakeups == before.wakeups && std::chrono::steady_clock::now() < counted)
        std::this_thread::sleep_for(1ms);
    const auto after = db.stats();
    if (!noted.load()) {
        say("granted unnoted");
        return 1;
    }
    say("misses " + std::to_string(after.contention_misses - before.contention_misses));
    say("wakeups " + std::to_string(after.wakeups - before.wakeups));
    lease.release();
    return 0;
}

int hold_permit(char** argv) {
    auto db = open(argv[2], argv[3]);
    auto lease = db.acquire_permit(argv[4], std::stoll(argv[5]), 30s,
                                   {.lease = std::chrono::milliseconds(std::stoll(argv[6]))});
    say("token " + std::to_string(lease.token()));
    for (;;) std::this_thread::sleep_for(1s);
}

int main(int argc, char** argv) {
    try {
        const std::string cmd = argc > 1 ? argv[1] : "";
        if (cmd == "counter" && argc == 8) return counter(argv);
        if (cmd == "hold" && argc == 7) return hold(argv);
        if (cmd == "ha-counter" && argc == 9) return ha_counter(argv);
        if (cmd == "migrate" && argc == 4) return migrate(argv);
        if (cmd == "clock" && argc == 6) return clock_scenario(argv);
        if (cmd == "wait-key" && argc == 5) return wait_key(argv);
        if (cmd == "frozen" && argc == 7) return frozen(argv);
        if (cmd == "churn" && argc == 7) return churn(argv);
        if (cmd == "grant-loop" && argc == 6) return grant_loop(argv);
        if (cmd == "fair" && argc == 9) return fair(argv);
        if (cmd == "jobs" && argc == 7) return jobs(argv);
        if (cmd == "job-hang" && argc == 8) return job_hang(argv);
        if (cmd == "job-frozen" && argc == 8) return job_frozen(argv);
        if (cmd == "hold-write" && argc == 4) return hold_write(argv);
        if (cmd == "rw" && argc == 9) return rw(argv);
        if (cmd == "sem" && argc == 9) return sem(argv);
        if (cmd == "hold-permit" && argc == 7) return hold_permit(argv);
        if (cmd == "multi" && argc == 9) return multi(argv);
        if (cmd == "ring-wait" && argc == 6) return ring_wait(argv);
        std::cerr << "usage: see tests/worker.cpp\n";
        return 64;
    } catch (const std::exception& e) {
        std::cerr << "worker error: " << e.what() << "\n";
        say(std::string("error ") + e.what());
        return 1;
    }
}
