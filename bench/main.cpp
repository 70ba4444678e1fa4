// sqlock_bench: sqlock beside what users would pick instead — the same SQL
// sent by hand, the servers' native locks, ShedLock's and Spring's lock
// statements, Redis — on the same machine in the same run
// (docs/benchmarks.md; scripts/bench.sh starts the servers and runs it).
//
// Writes OUT/report.md, OUT/data/*.tsv and OUT/charts.gp (gnuplot, drawing
// SVGs into --img-dir); progress goes to stderr.

#include "common.hpp"
#include "lockers.hpp"
#include "report.hpp"
#include "workloads.hpp"

#include <sqlock/sqlock.hpp>

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstring>
#include <set>
#include <iostream>
#include <random>
#include <sstream>

namespace bench {
namespace {

struct options {
    target t;
    int postgres_pid = 0, mysql_pid = 0, redis_pid = 0, redis_aof_pid = 0;
    std::set<std::string> workloads{"uncontended", "hotkey", "waiters", "handoff", "fairness", "renewal",
                                    "recovery",    "primitives"};
    std::vector<std::string> only;  // contender id substrings; empty: all
    int reps = 3;
    double seconds = 1.0, hot_seconds = 0.5, warmup = 0.25;
    std::vector<int> workers{1, 2, 4, 8, 32}, hot_workers{2, 4, 16}, holds{0, 1, 10}, primitive_workers{1, 4};
    int waiter_threads = 16;
    int handoff_processes = 4, fairness_processes = 16, hold_ms = 1;
    double handoff_seconds = 5, fairness_seconds = 60;
    std::vector<int> renewal_leases{100, 1000, 10000};
    int renewal_rounds = 2;
    int recovery_lease_ms = 3000, recovery_kill_after_ms = 1500;
    std::string out = "bench-out", img_dir, img_link = "img";
    // Child modes.
    std::string child, contender_id, key;
    int fair = 0;
    std::int64_t lease_ms = 5000;
};

[[noreturn]] void usage(int code) {
    (code ? std::cerr : std::cout)
        << "usage: sqlock_bench [--postgres URL] [--mysql URL] [--sqlite PATH] [--redis HOST:PORT]\n"
           "                    [--redis-aof HOST:PORT] [--out DIR] [--img-dir DIR] [--img-link PATH] [options]\n"
           "Runs every workload for every contender on the databases given and writes\n"
           "DIR/report.md, DIR/data/*.tsv and DIR/charts.gp (run it with gnuplot for the SVGs).\n"
           "  --workload W          uncontended,hotkey,waiters,handoff,fairness,renewal,recovery,primitives\n"
           "                        (default all)\n"
           "  --only S,S            only contenders whose id contains one of these (e.g. postgres.sqlock)\n"
           "  --reps R              repetitions (default 3)\n"
           "  --seconds S           window of one uncontended measurement (default 1)\n"
           "  --hot-seconds S       window of one hot-key measurement (default 0.5)\n"
           "  --warmup S            warm-up before each thread measurement (default 0.25)\n"
           "  --workers L           uncontended worker threads (default 1,2,4,8,32)\n"
           "  --hot-workers L       hot-key worker threads (default 2,4,16)\n"
           "  --primitive-workers L worker threads of the primitives workload: exclusive, shared, permit and\n"
           "                        3-key acquire + release on distinct keys (default 1,4)\n"
           "  --holds L             hot-key hold times, ms (default 0,1,10)\n"
           "  --waiter-threads N    threads of one process waiting for one key with lock() (default 16)\n"
           "  --handoff-processes N --handoff-seconds S   (default 4, 5)\n"
           "  --fairness-processes N --fairness-seconds S (default 16, 60)\n"
           "  --hold-ms H           hold of the handoff and fairness processes (default 1)\n"
           "  --renewal-leases L    held lease counts (default 100,1000,10000)\n"
           "  --renewal-rounds K    seconds per renewal window (default 2)\n"
           "  --recovery-lease-ms L --recovery-kill-after-ms K (default 3000, 1500)\n"
           "  --postgres-pid P --mysql-pid P --redis-pid P --redis-aof-pid P  servers' pids, for their CPU\n"
           "  --prefix P            table prefix (default: a fresh bench_<random>_)\n"
           "  --sql-dir D           the library's sql/ directory (default " SQLOCK_BENCH_SQL_DIR ")\n";
    std::exit(code);
}

std::vector<std::string> split_list(const std::string& s) {
    std::vector<std::string> out;
    std::istringstream in(s);
    for (std::string x; std::getline(in, x, ',');)
        if (!x.empty()) out.push_back(x);
    return out;
}

std::vector<int> int_list(const std::string& s) {
    std::vector<int> out;
    for (const auto& x : split_list(s)) {
        const int v = std::stoi(x);
        if (v < 0) throw std::invalid_argument(x);
        out.push_back(v);
    }
    if (out.empty()) throw std::invalid_argument(s);
    return out;
}

options parse_args(int argc, char** argv) {
    options o;
    o.t.sql_dir = SQLOCK_BENCH_SQL_DIR;
    for (int i = 1; i < argc; ++i) {
        const std::string arg = argv[i];
        if (arg == "-h" || arg == "--help") usage(0);
        if (i + 1 >= argc) {
            std::cerr << "sqlock_bench: " << arg << " needs a value\n";
            usage(2);
        }
        const std::string v = argv[++i];
        try {
            if (arg == "--postgres") o.t.postgres = v;
            else if (arg == "--mysql") o.t.mysql = v;
            else if (arg == "--sqlite") o.t.sqlite = std::filesystem::absolute(v).string();
            else if (arg == "--redis") o.t.redis = v;
            else if (arg == "--redis-aof") o.t.redis_aof = v;
            else if (arg == "--prefix") o.t.prefix = v;
            else if (arg == "--sql-dir") o.t.sql_dir = v;
            else if (arg == "--postgres-pid") o.postgres_pid = std::stoi(v);
            else if (arg == "--mysql-pid") o.mysql_pid = std::stoi(v);
            else if (arg == "--redis-pid") o.redis_pid = std::stoi(v);
            else if (arg == "--redis-aof-pid") o.redis_aof_pid = std::stoi(v);
            else if (arg == "--workload") {
                o.workloads.clear();
                for (const auto& w : split_list(v)) {
                    if (w != "uncontended" && w != "hotkey" && w != "waiters" && w != "handoff" && w != "fairness" &&
                        w != "renewal" && w != "recovery" && w != "primitives") {
                        std::cerr << "sqlock_bench: unknown workload '" << w << "'\n";
                        usage(2);
                    }
                    o.workloads.insert(w);
                }
            } else if (arg == "--only") o.only = split_list(v);
            else if (arg == "--reps") o.reps = std::stoi(v);
            else if (arg == "--seconds") o.seconds = std::stod(v);
            else if (arg == "--hot-seconds") o.hot_seconds = std::stod(v);
            else if (arg == "--warmup") o.warmup = std::stod(v);
            else if (arg == "--workers") o.workers = int_list(v);
            else if (arg == "--hot-workers") o.hot_workers = int_list(v);
            else if (arg == "--primitive-workers") o.primitive_workers = int_list(v);
            else if (arg == "--holds") o.holds = int_list(v);
            else if (arg == "--waiter-threads") o.waiter_threads = std::stoi(v);
            else if (arg == "--handoff-processes") o.handoff_processes = std::stoi(v);
            else if (arg == "--handoff-seconds") o.handoff_seconds = std::stod(v);
            else if (arg == "--fairness-processes") o.fairness_processes = std::stoi(v);
            else if (arg == "--fairness-seconds") o.fairness_seconds = std::stod(v);
            else if (arg == "--hold-ms") o.hold_ms = std::stoi(v);
            else if (arg == "--renewal-leases") o.renewal_leases = int_list(v);
            else if (arg == "--renewal-rounds") o.renewal_rounds = std::stoi(v);
            else if (arg == "--recovery-lease-ms") o.recovery_lease_ms = std::stoi(v);
            else if (arg == "--recovery-kill-after-ms") o.recovery_kill_after_ms = std::stoi(v);
            else if (arg == "--out") o.out = v;
            else if (arg == "--img-dir") o.img_dir = v;
            else if (arg == "--img-link") o.img_link = v;
            else if (arg == "--child") o.child = v;
            else if (arg == "--contender") o.contender_id = v;
            else if (arg == "--key") o.key = v;
            else if (arg == "--fair") o.fair = std::stoi(v);
            else if (arg == "--lease-ms") o.lease_ms = std::stoll(v);
            else {
                std::cerr << "sqlock_bench: unknown option " << arg << "\n";
                usage(2);
            }
        } catch (const std::logic_error&) {
            std::cerr << "sqlock_bench: " << arg << " needs a number or a list of numbers, got '" << v << "'\n";
            usage(2);
        }
    }
    if (o.reps < 1 || o.seconds <= 0 || o.hot_seconds <= 0 || o.warmup < 0 || o.waiter_threads < 2 || o.handoff_processes < 2 ||
        o.fairness_processes < 2 || o.handoff_seconds <= 0 || o.fairness_seconds <= 0 || o.renewal_rounds < 1 ||
        o.recovery_lease_ms < 100 || o.recovery_kill_after_ms < 0) {
        std::cerr << "sqlock_bench: lengths must be positive, --reps and --renewal-rounds at least 1, process and "
                     "waiter thread counts at least 2, --recovery-lease-ms at least 100\n";
        usage(2);
    }
    if (o.child.empty() && o.t.postgres.empty() && o.t.mysql.empty() && o.t.sqlite.empty() && o.t.redis.empty()) {
        std::cerr << "sqlock_bench: give at least one of --postgres, --mysql, --sqlite, --redis\n";
        usage(2);
    }
    if (o.img_dir.empty()) o.img_dir = o.out + "/img";
    return o;
}

std::vector<contender> all_contenders(const options& o) {
    std::vector<std::string> ids;
    auto database = [&ids](const std::string& b, bool native, bool for_update) {
        for (const char* m : {"unique_insert", "conditional_update", "select_for_update"}) {
            if (!for_update && std::string(m) == "select_for_update") continue;
            ids.push_back(b + ".sqlock." + m);
        }
        if (b != "mysql") ids.push_back(b + ".sqlock-relaxed.conditional_update");
        for (const char* m : {"unique_insert", "conditional_update", "select_for_update"}) {
            if (!for_update && std::string(m) == "select_for_update") continue;
            ids.push_back(b + ".raw." + m);
        }
        if (b != "mysql") ids.push_back(b + ".raw-relaxed.conditional_update");
        if (native) ids.push_back(b + ".native");
        // MariaDB's conditional_update grant keeps its counter in the lock
        // row itself since schema 14: the shape is measured there as sqlock.
        if (b == "postgres") ids.push_back(b + ".ceiling");
        ids.push_back(b + ".shedlock");
        ids.push_back(b + ".spring");
    };
    if (!o.t.postgres.empty()) database("postgres", true, true);
    if (!o.t.mysql.empty()) database("mysql", true, true);
    if (!o.t.sqlite.empty()) database("sqlite", false, false);
    if (!o.t.redis.empty()) ids.push_back("redis.redis");
    if (!o.t.redis_aof.empty()) ids.push_back("redis-aof.redis");
    std::vector<contender> out;
    for (const auto& id : ids) {
        bool keep = o.only.empty();
        for (const auto& s : o.only) keep = keep || id.find(s) != std::string::npos;
        if (keep) out.push_back(contender::parse(id));
    }
    return out;
}

// The primitives workload's contenders: per database, the exclusive lock
// beside a reader, a permit and a 3-key set, all in conditional_update.
std::vector<contender> primitive_contenders(const options& o) {
    std::vector<contender> out;
    for (const auto& [b, url] : {std::pair{std::string("postgres"), o.t.postgres}, std::pair{std::string("mysql"), o.t.mysql},
                                 std::pair{std::string("sqlite"), o.t.sqlite}}) {
        if (url.empty()) continue;
        for (const char* kind : {"sqlock", "sqlock-shared", "sqlock-permit", "sqlock-set3"}) {
            const std::string id = b + "." + kind + ".conditional_update";
            bool keep = o.only.empty();
            for (const auto& s : o.only) keep = keep || id.find(s) != std::string::npos;
            if (keep) out.push_back(contender::parse(id));
        }
    }
    return out;
}

bool plain_sqlock(const contender& c) { return c.kind == family::sqlock && c.mode == "conditional_update" && !c.relaxed; }

std::vector<std::string> child_args(const options& o) {
    std::vector<std::string> a{self_executable()};
    auto add = [&a](const char* flag, const std::string& v) {
        if (!v.empty()) {
            a.push_back(flag);
            a.push_back(v);
        }
    };
    add("--postgres", o.t.postgres);
    add("--mysql", o.t.mysql);
    add("--sqlite", o.t.sqlite);
    add("--redis", o.t.redis);
    add("--redis-aof", o.t.redis_aof);
    add("--prefix", o.t.prefix);
    add("--sql-dir", o.t.sql_dir);
    return a;
}

std::string random_prefix() {
    std::mt19937_64 rng(std::random_device{}());
    char buf[32];
    std::snprintf(buf, sizeof buf, "bench_%08llx_", static_cast<unsigned long long>(rng() & 0xffffffffULL));
    return buf;
}

void progress(const std::string& line) { std::cerr << "sqlock_bench: " << line << "\n"; }

template <typename Cell, typename Pred>
Cell& cell_for(std::vector<Cell>& cells, Pred same, const Cell& fresh) {
    for (auto& c : cells)
        if (same(c)) return c;
    cells.push_back(fresh);
    return cells.back();
}

enum class threads_on { own_keys, hot_key, waiting };

void thread_workload(const options& o, const std::vector<contender>& cs, threads_on how, std::vector<thread_cell>& cells) {
    const bool hot = how != threads_on::own_keys;
    const bool wait = how == threads_on::waiting;
    const std::vector<int> workers = wait ? std::vector<int>{o.waiter_threads} : hot ? o.hot_workers : o.workers;
    const std::vector<int> holds = wait ? std::vector<int>{0} : hot ? o.holds : std::vector<int>{-1};
    const double seconds = hot && !wait ? o.hot_seconds : o.seconds;
    for (int rep = 0; rep < o.reps; ++rep)
        for (int h : holds)
            for (int w : workers)
                for (std::size_t k = 0; k < cs.size(); ++k) {
                    // Alternate the direction, so drift on the machine falls on all alike.
                    const contender& c = cs[rep % 2 == 0 ? k : cs.size() - 1 - k];
                    const std::string key = std::string(wait ? "wait/" : hot ? "hot/" : "u/") + c.id + "/" +
                                            std::to_string(w) + "/" + std::to_string(h) + "/" + std::to_string(rep);
                    thread_sample s = run_threads(c, o.t, w, h, o.warmup, seconds, key, wait);
                    auto& cell = cell_for(
                        cells, [&](const thread_cell& x) { return x.c.id == c.id && x.workers == w && x.hold_ms == h; },
                        thread_cell{c, w, h, {}, {}, 0, 0, 0});
                    cell.rates.push_back(static_cast<double>(s.successes) / s.seconds);
                    cell.latency_us.insert(cell.latency_us.end(), s.latency_us.begin(), s.latency_us.end());
                    cell.successes += s.successes;
                    cell.attempts += s.attempts;
                    cell.statements += s.statements;
                    progress(std::string(wait ? "waiters" : hot ? "hot key" : "uncontended") + " rep " + std::to_string(rep + 1) + "/" +
                             std::to_string(o.reps) + "  " + c.id + ", " + std::to_string(w) + " workers" +
                             (hot && !wait ? ", hold " + std::to_string(h) + " ms" : "") + ": " +
                             number_text(cell.rates.back()) + "/s" +
                             (hot && s.successes ? ", " + format("%.1f", static_cast<double>(s.attempts) /
                                                                           static_cast<double>(s.successes)) +
                                                       " attempts/success"
                                                 : ""));
                }
}

// A wait this long in a contention run is a stall worth a look.
constexpr double stall_ms = 1000;

// Writes the grants around a run's longest wait to DIR/data/stall-<key>.tsv:
// which process got the key before and after, and whether the one that
// waited longest was at the head of the line all along.
void write_stall(const options& o, const contention_run& run, const std::string& key) {
    const grant_record* longest = nullptr;
    for (const auto& g : run.grants)
        if (g.granted >= run.from && g.granted < run.to &&
            (!longest || g.granted - g.asked > longest->granted - longest->asked))
            longest = &g;
    std::int64_t from = longest ? longest->asked : run.to, to = longest ? longest->granted : run.to;
    for (const auto& u : run.unfinished) from = std::min(from, u.asked);
    std::ostringstream tsv;
    tsv << "# ms since the run's start; the longest wait: process " << (longest ? longest->process : -1) << "\n"
        << "process\tasked\tgranted\treleased\ttoken\n";
    auto ms = [&](std::int64_t t) { return format("%.3f", static_cast<double>(t - run.start) / 1e6); };
    for (const auto& g : run.grants)
        if (g.granted >= from - 500'000'000 && g.asked <= to + 500'000'000)
            tsv << g.process << "\t" << ms(g.asked) << "\t" << ms(g.granted) << "\t" << ms(g.released) << "\t"
                << g.token << "\n";
    for (const auto& u : run.unfinished) tsv << u.process << "\t" << ms(u.asked) << "\t-\t-\t-\n";
    std::string name = key;
    std::replace(name.begin(), name.end(), '/', '-');
    const std::string path = o.out + "/data/stall-" + name + ".tsv";
    write_file(path, tsv.str());
    progress("a stall: the grants around it are in " + path);
}

void contention_workload(const options& o, const std::vector<std::pair<contender, bool>>& cs, bool fairness,
                         std::vector<contention_cell>& cells) {
    const int reps = fairness ? 1 : o.reps;
    const int processes = fairness ? o.fairness_processes : o.handoff_processes;
    const double seconds = fairness ? o.fairness_seconds : o.handoff_seconds;
    for (int rep = 0; rep < reps; ++rep)
        for (std::size_t k = 0; k < cs.size(); ++k) {
            const auto& [c, fair] = cs[rep % 2 == 0 ? k : cs.size() - 1 - k];
            const std::string key = std::string(fairness ? "fair/" : "handoff/") + c.id + (fair ? "/fair/" : "/") +
                                    std::to_string(rep);
            const auto run = run_contention(c, child_args(o), processes, seconds, o.hold_ms, fair, key);
            auto s = summarize(run);
            auto& cell = cell_for(cells, [&](const contention_cell& x) { return x.c.id == c.id && x.fair == fair; },
                                  contention_cell{c, fair, {}});
            progress(std::string(fairness ? "fairness " : "handoff ") + cell.label() + ": " +
                     std::to_string(s.acquisitions) + " acquisitions, " + std::to_string(s.handoffs) +
                     " handoffs, p50 " + number_text(percentile(s.handoff_ms, 0.5)) + " ms, p99 " +
                     number_text(percentile(s.handoff_ms, 0.99)) + " ms, Jain " + format("%.3f", s.jain) +
                     ", longest wait " + number_text(s.max_wait_ms) + " ms, inversions " + std::to_string(s.overtakes) +
                     ", overlapping " + std::to_string(s.order_errors));
            if (s.order_errors > 0) failure(cell.label() + ": two holders at once");
            if (s.max_wait_ms >= stall_ms) write_stall(o, run, key);
            cell.runs.push_back(std::move(s));
        }
}

int run(options o) {
    if (o.t.prefix.empty()) o.t.prefix = random_prefix();
    progress("table prefix " + o.t.prefix);
    std::vector<std::string> present;
    if (!o.t.postgres.empty()) present.push_back("postgres");
    if (!o.t.mysql.empty()) present.push_back("mysql");
    if (!o.t.sqlite.empty()) present.push_back("sqlite");
    if (!o.t.redis.empty()) present.push_back("redis");
    if (!o.t.redis_aof.empty()) present.push_back("redis-aof");

    // Leave no bench tables behind, whether the run finishes or fails.
    struct dropper {
        const target& t;
        std::vector<std::string> done;
        ~dropper() {
            for (const auto& b : done) {
                try {
                    drop_tables(b, t);
                } catch (const std::exception& e) {
                    std::cerr << "sqlock_bench: dropping the " << b << " bench tables failed: " << e.what() << "\n";
                }
            }
        }
    } drop_at_exit{o.t, {}};
    results r;
    r.m = machine::gather(o.t.sqlite.empty() ? std::filesystem::path("/tmp")
                                             : std::filesystem::path(o.t.sqlite).parent_path());
    for (const auto& b : present) {
        if (b == "postgres" || b == "mysql" || b == "sqlite") {
            sqlock::client_options co;
            co.table_prefix = o.t.prefix;
            const std::string url = b == "postgres" ? o.t.postgres : b == "mysql" ? o.t.mysql : "sqlite:" + o.t.sqlite;
            sqlock::client::open(url, co).migrate();
        }
        drop_at_exit.done.push_back(b);
        create_tables(b, o.t);
        r.facts[b] = server_facts(b, o.t);
    }
    const auto cs = all_contenders(o);
    if (cs.empty()) failure("--only matches no contender");
    r.started = utc_now();
    r.load_start = load_average();
    r.handoff_seconds = o.handoff_seconds;
    r.fairness_seconds = o.fairness_seconds;
    auto list = [](const std::vector<int>& v) {
        std::string s;
        for (int x : v) s += (s.empty() ? "" : ", ") + std::to_string(x);
        return s;
    };
    r.settings.run = std::to_string(o.reps) + " repetitions of every measurement, contenders interleaved (the order "
                     "reversed every other repetition); thread workloads: " + format("%g", o.warmup) +
                     " s warm-up, then " + format("%g", o.seconds) + " s (uncontended, " + list(o.workers) +
                     " workers) or " + format("%g", o.hot_seconds) + " s (hot key, " + list(o.hot_workers) +
                     " workers × holds of " + list(o.holds) + " ms), every worker a thread with connections of its own";
    r.settings.waiters = std::to_string(o.waiter_threads) + " threads of one process on one key, each waiting with "
                         "acquire() (sqlock, conditional_update, the threads sharing one client as an application "
                         "does) or the server's blocking call (advisory lock, GET_LOCK: a connection per thread), "
                         "releasing at once and asking again; " + format("%g", o.warmup) + " s warm-up, then " +
                         format("%g", o.seconds) + " s, " + std::to_string(o.reps) + " repetitions.";
    r.settings.primitives = "The uncontended workload's loop (" + std::to_string(o.reps) + " repetitions, " +
                            format("%g", o.warmup) + " s warm-up, then " + format("%g", o.seconds) + " s; " +
                            list(o.primitive_workers) +
                            " workers, each on keys of its own) for sqlock's primitives in conditional_update mode: "
                            "an exclusive lock (try_acquire + release), a reader (try_acquire_shared + release), a "
                            "permit of a semaphore of 1 (try_acquire_permit + release) and a set of 3 keys "
                            "(try_acquire_all + release).";
    r.settings.handoff = std::to_string(o.handoff_processes) + " processes take turns on one key, each holding it " +
                         std::to_string(o.hold_ms) + " ms and asking again at once; " + format("%g", o.handoff_seconds) +
                         " s windows after 1 s of contention, " + std::to_string(o.reps) + " repetitions.";
    r.settings.fairness = std::to_string(o.fairness_processes) + " processes on one key, each holding it " +
                          std::to_string(o.hold_ms) + " ms and asking again at once; one window of " +
                          format("%g", o.fairness_seconds) + " s after 1 s of contention.";
    r.settings.renewal = "Leases held by one client (sqlock) or one connection (the others) and kept alive for " +
                         std::to_string(o.reps) + " windows of " + std::to_string(o.renewal_rounds) +
                         " s. sqlock: 3 s leases, renewed by the watchdog every second in batches of up to 500. "
                         "The others: each lease renewed by its own statement once a second, at evenly spread "
                         "moments; native locks need no renewal.";
    r.settings.recovery = "A holder process takes the key with a " + std::to_string(o.recovery_lease_ms) +
                          " ms lease, is killed with SIGKILL " + std::to_string(o.recovery_kill_after_ms) +
                          " ms later, and a waiter that was already connected asks for the key at once (sqlock: "
                          "acquire(); native: blocking call; the others: try every ms). " + std::to_string(o.reps) +
                          " repetitions.";

    if (o.workloads.contains("uncontended")) thread_workload(o, cs, threads_on::own_keys, r.uncontended);
    if (o.workloads.contains("hotkey")) {
        // The ceiling shape is a measurement of one grant, not a lock to wait on.
        std::vector<contender> hot;
        for (const auto& c : cs)
            if (c.kind != family::ceiling) hot.push_back(c);
        thread_workload(o, hot, threads_on::hot_key, r.hot);
    }
    if (o.workloads.contains("waiters")) {
        // The library on one client, beside the server's own blocking lock.
        std::vector<contender> waiting;
        for (const auto& c : cs)
            if (plain_sqlock(c) || c.kind == family::native) waiting.push_back(c);
        thread_workload(o, waiting, threads_on::waiting, r.waiters);
    }
    if (o.workloads.contains("primitives")) {
        options po = o;
        po.workers = o.primitive_workers;
        thread_workload(po, primitive_contenders(o), threads_on::own_keys, r.primitives);
    }

    std::vector<std::pair<contender, bool>> handoff, fairness;
    for (const auto& c : cs) {
        const bool other = c.kind == family::native || c.kind == family::shedlock || c.kind == family::spring ||
                           c.kind == family::redis;
        if (plain_sqlock(c)) {
            handoff.push_back({c, false});
            handoff.push_back({c, true});
            fairness.push_back({c, false});
            fairness.push_back({c, true});
        } else if (other) {
            handoff.push_back({c, false});
            // Polling contenders wait alike; one database's ShedLock and
            // Spring and plain Redis stand for them in the long run.
            if (c.kind == family::native || c.backend == "redis" || c.backend == "postgres") fairness.push_back({c, false});
        }
    }
    if (o.workloads.contains("handoff")) contention_workload(o, handoff, false, r.handoff);
    if (o.workloads.contains("fairness")) contention_workload(o, fairness, true, r.fairness);

    if (o.workloads.contains("renewal")) {
        std::map<std::string, std::shared_ptr<server_cpu>> probes;
        if (o.postgres_pid > 0) probes["postgres"] = open_server_cpu(o.postgres_pid, true);
        if (o.mysql_pid > 0) probes["mysql"] = open_server_cpu(o.mysql_pid, false);
        if (o.redis_pid > 0) probes["redis"] = open_server_cpu(o.redis_pid, false);
        if (o.redis_aof_pid > 0) probes["redis-aof"] = open_server_cpu(o.redis_aof_pid, false);
        for (auto& [b, p] : probes) {
            r.idle_server_ms[b] = server_idle_ms_per_s(*p, 2.0);
            progress("renewal: " + b + " server idle CPU " + number_text(r.idle_server_ms[b]) + " ms/s");
        }
        for (int n : o.renewal_leases)
            for (const auto& c : cs) {
                const bool wanted = plain_sqlock(c) ||
                                    (c.kind == family::raw && c.mode == "conditional_update" && !c.relaxed) ||
                                    c.kind == family::shedlock || c.kind == family::spring ||
                                    c.kind == family::native || c.backend == "redis";
                if (!wanted) continue;
                auto probe = probes.find(c.backend);
                renewal_cell cell{c, static_cast<std::size_t>(n), {}, c.backend == "sqlite"};
                cell.windows = run_renewal(c, o.t, static_cast<std::size_t>(n), o.reps, o.renewal_rounds,
                                           probe == probes.end() ? nullptr : probe->second.get());
                for (const auto& w : cell.windows)
                    progress("renewal " + c.id + ", " + std::to_string(n) + " leases: " +
                             number_text(w.statements / w.seconds) + " statements/s, " +
                             number_text(w.renewals / w.seconds) + " renewals/s, server CPU " +
                             (w.server_cpu ? number_text(*w.server_cpu * 1e3 / w.seconds) + " ms/s" : "-") +
                             ", client CPU " + number_text(w.client_cpu * 1e3 / w.seconds) + " ms/s, worst lag " +
                             number_text(w.worst_lag * 1e3) + " ms");
                r.renewal.push_back(std::move(cell));
            }
    }

    if (o.workloads.contains("recovery")) {
        std::vector<contender> rc;
        for (const auto& c : cs)
            if ((c.kind == family::sqlock && !c.relaxed) || c.kind == family::native || c.kind == family::shedlock ||
                c.kind == family::spring || c.backend == "redis")
                rc.push_back(c);
        for (int rep = 0; rep < o.reps; ++rep)
            for (std::size_t k = 0; k < rc.size(); ++k) {
                const contender& c = rc[rep % 2 == 0 ? k : rc.size() - 1 - k];
                const double ms = run_recovery(c, o.t, child_args(o), std::chrono::milliseconds(o.recovery_lease_ms),
                                               std::chrono::milliseconds(o.recovery_kill_after_ms),
                                               "recovery/" + c.id + "/" + std::to_string(rep));
                auto& cell = cell_for(r.recovery, [&](const recovery_cell& x) { return x.c.id == c.id; },
                                      recovery_cell{c, {}});
                cell.ms.push_back(ms);
                progress("recovery " + c.id + ": " + number_text(ms) + " ms");
            }
    }

    r.finished = utc_now();
    r.load_end = load_average();
    write_report(r, o.out, o.img_dir, o.img_link);
    progress("wrote " + o.out + "/report.md and " + o.out + "/charts.gp");
    return 0;
}

int child_main(const options& o) {
    // Nothing of the parent's (its connections, other children's pipes) stays open.
    close_range(3, ~0U, 0);
    const contender c = contender::parse(o.contender_id);
    if (o.child == "waiter") return waiter_main(c, o.t, o.key, o.hold_ms, o.fair != 0, o.lease_ms);
    if (o.child == "holder") return holder_main(c, o.t, o.key, o.lease_ms);
    std::cerr << "sqlock_bench: unknown child mode '" << o.child << "'\n";
    return 2;
}

}  // namespace
}  // namespace bench

int main(int argc, char** argv) {
    const bench::options opt = bench::parse_args(argc, argv);
    try {
        if (!opt.child.empty()) return bench::child_main(opt);
        // A child that died early must fail the run with a message (EPIPE),
        // not end this process with SIGPIPE.
        std::signal(SIGPIPE, SIG_IGN);
        return bench::run(opt);
    } catch (const std::exception& e) {
        std::cerr << "sqlock_bench: " << e.what() << "\n";
        return 1;
    }
}
