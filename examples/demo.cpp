// sqlock_demo: several processes compete for one key on the embedded SQLite
// default; one holder is killed with kill -9 while it holds the key. The demo
// prints who held the key when, with which fencing token, and checks the
// guarantees from what it observed.
//
//   sqlock_demo [--db FILE] [--workers N] [--seconds S]

#include <sqlock/sqlock.hpp>

#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

using namespace std::chrono_literals;
using steady = std::chrono::steady_clock;

extern char** environ;

namespace {

constexpr const char* key = "demo/nightly-report";
constexpr auto lease_length = 1000ms;

long long now_ms() {
    return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
        .count();
}

// A worker: take the key whenever it can, "work" 150-350 ms, release.
// Prints "start W TOKEN MS" and "end W TOKEN MS" for the parent.
int worker(const std::string& db_file, int id, int seconds) {
    auto db = sqlock::client::open("sqlite:" + db_file);
    std::mt19937 rng(static_cast<unsigned>(getpid()));
    const auto until = steady::now() + std::chrono::seconds(seconds);
    while (steady::now() < until) {
        try {
            auto lease = db.acquire(key, 3s, {.lease = lease_length, .note = "demo worker " + std::to_string(id)});
            std::printf("start %d %lld %lld\n", id, static_cast<long long>(lease.token()), now_ms());
            std::fflush(stdout);
            std::this_thread::sleep_for(std::chrono::milliseconds(150 + rng() % 200));
            std::printf("end %d %lld %lld\n", id, static_cast<long long>(lease.token()), now_ms());
            std::fflush(stdout);
            lease.release();
        } catch (const sqlock::timeout_error&) {
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(rng() % 40));
    }
    return 0;
}

struct grant_row {
    int worker;
    long long token, start, end = -1;
    bool killed = false;
};

struct child {
    pid_t pid;
    int out;
    std::string buffer;
};

}  // namespace

int main(int argc, char** argv) {
    std::string db_file = "sqlock-demo.db";
    int workers = 4;
    int seconds = 6;
    for (int i = 1; i + 1 < argc; i += 2) {
        std::string flag = argv[i];
        if (flag == "--db") db_file = argv[i + 1];
        else if (flag == "--workers") workers = std::max(2, std::atoi(argv[i + 1]));
        else if (flag == "--seconds") seconds = std::max(2, std::atoi(argv[i + 1]));
        else if (flag == "--worker") return worker(db_file, std::atoi(argv[i + 1]), seconds);
        else {
            std::fprintf(stderr, "usage: sqlock_demo [--db FILE] [--workers N] [--seconds S]\n");
            return 64;
        }
    }

    for (const char* suffix : {"", "-wal", "-shm"}) std::filesystem::remove(db_file + suffix);
    auto db = sqlock::client::open("sqlite:" + db_file);
    db.migrate();
    std::printf("sqlock demo: %d processes compete for '%s' on SQLite (%s) for %d s;\n"
                "each holds it 150-350 ms with a %lld ms lease. One holder will be killed with kill -9.\n\n",
                workers, key, db_file.c_str(), seconds, static_cast<long long>(lease_length.count()));

    std::vector<child> children;
    for (int w = 1; w <= workers; ++w) {
        int fds[2];
        if (pipe(fds) != 0) return 1;
        posix_spawn_file_actions_t actions;
        posix_spawn_file_actions_init(&actions);
        posix_spawn_file_actions_adddup2(&actions, fds[1], 1);
        posix_spawn_file_actions_addclose(&actions, fds[0]);
        std::string self = std::filesystem::read_symlink("/proc/self/exe");
        std::vector<std::string> args = {self, "--db", db_file, "--seconds", std::to_string(seconds), "--worker",
                                         std::to_string(w)};
        std::vector<char*> cargs;
        for (auto& a : args) cargs.push_back(a.data());
        cargs.push_back(nullptr);
        pid_t pid;
        if (posix_spawn(&pid, self.c_str(), &actions, nullptr, cargs.data(), environ) != 0) return 1;
        posix_spawn_file_actions_destroy(&actions);
        close(fds[1]);
        children.push_back({pid, fds[0], {}});
    }

    std::vector<grant_row> grants;
    std::optional<int> victim;
    long long killed_at = 0;
    const auto kill_after = steady::now() + std::chrono::milliseconds(seconds * 1000 / 3);
    std::size_t open_pipes = children.size();
    while (open_pipes > 0) {
        std::vector<pollfd> fds;
        for (auto& c : children) fds.push_back({c.out, POLLIN, 0});
        poll(fds.data(), fds.size(), 100);
        for (std::size_t i = 0; i < children.size(); ++i) {
            auto& c = children[i];
            if (c.out < 0 || !(fds[i].revents & (POLLIN | POLLHUP))) continue;
            char buf[512];
            ssize_t n = read(c.out, buf, sizeof buf);
            if (n <= 0) {
                close(c.out);
                c.out = -1;
                --open_pipes;
                continue;
            }
            c.buffer.append(buf, static_cast<std::size_t>(n));
            for (auto nl = c.buffer.find('\n'); nl != std::string::npos; nl = c.buffer.find('\n')) {
                std::istringstream line(c.buffer.substr(0, nl));
                c.buffer.erase(0, nl + 1);
                std::string what;
                int w;
                long long token, ms;
                line >> what >> w >> token >> ms;
                if (what == "start") {
                    grants.push_back({w, token, ms});
                    // Kill the first holder seen after a third of the run, mid-hold.
                    if (!victim && steady::now() >= kill_after) {
                        victim = w;
                        kill(children[static_cast<std::size_t>(w - 1)].pid, SIGKILL);
                        killed_at = now_ms();
                        grants.back().killed = true;
                    }
                } else if (what == "end") {
                    for (auto& g : grants)
                        if (g.token == token) g.end = ms;
                }
            }
        }
    }
    for (auto& c : children) waitpid(c.pid, nullptr, 0);

    std::sort(grants.begin(), grants.end(), [](auto& a, auto& b) { return a.start < b.start; });
    const long long t0 = grants.empty() ? 0 : grants.front().start;
    std::printf("  #  holder     token   held from .. to (ms since start)\n");
    bool increasing = true, overlap = false;
    std::optional<long long> after_kill_gap;
    for (std::size_t i = 0; i < grants.size(); ++i) {
        const auto& g = grants[i];
        if (i > 0 && g.token <= grants[i - 1].token) increasing = false;
        const long long prev_end = i > 0 ? (grants[i - 1].killed ? killed_at : grants[i - 1].end) : -1;
        if (i > 0 && prev_end > g.start) overlap = true;
        if (i > 0 && grants[i - 1].killed) after_kill_gap = g.start - killed_at;
        char held[64];
        if (g.killed) std::snprintf(held, sizeof held, "%6lld .. killed -9", g.start - t0);
        else std::snprintf(held, sizeof held, "%6lld .. %6lld", g.start - t0, g.end - t0);
        std::printf("%3zu  worker-%d  %5lld   %s%s\n", i + 1, g.worker, static_cast<long long>(g.token), held,
                    g.killed ? "   <- its lease must run out before anyone else gets the key" : "");
    }
    const auto info = db.inspect(key);
    std::printf("\nWhat this run shows:\n");
    std::printf("- %zu grants of one key across %d processes; fencing tokens %s.\n", grants.size(), workers,
                increasing ? "strictly increasing in grant order" : "NOT increasing (a bug!)");
    std::printf("- No two holders overlapped: %s.\n", overlap ? "NO, they did (a bug!)" : "yes");
    if (victim) {
        if (after_kill_gap)
            std::printf("- worker-%d was killed with kill -9 while holding the key; the next holder got it %lld ms "
                        "later, once the %lld ms lease had run out by the database clock, with a larger token.\n",
                        *victim, *after_kill_gap, static_cast<long long>(lease_length.count()));
        else
            std::printf("- worker-%d was killed with kill -9 while holding the key near the end of the run.\n",
                        *victim);
    }
    std::printf("- The database's fence counter for the key is %lld, the last token granted.\n",
                static_cast<long long>(info.token));
    const bool ok = increasing && !overlap && !grants.empty() && victim.has_value();
    return ok ? 0 : 1;
}
