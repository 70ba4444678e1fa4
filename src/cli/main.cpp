// sqlock: the command line. `run` wraps a program the way flock(1) does, for
// a whole fleet; `status`, `runs` and `release --force` inspect and repair
// lock state; `migrate` creates the tables. See `sqlock --help`.

#include "cli/check_arguments.hpp"
#include "cli/child.hpp"
#include "cli/duration.hpp"
#include "cli/exit_status.hpp"
#include "cli/output.hpp"

#include <sqlock/sqlock.hpp>

#include <CLI/CLI.hpp>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <cstdio>
#include <exception>
#include <functional>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace sqlock::cli {
namespace {

constexpr std::string_view default_url = "sqlite:sqlock.db";

// Every non-zero status sqlock produces itself leaves through here: one line.
struct exit_with {
    int status;
    std::string message;
};

[[noreturn]] void usage(const std::string& message) { throw exit_with{exit_status::usage, message}; }

std::chrono::milliseconds duration_option(const std::string& name, const std::string& text) {
    try {
        return parse_duration(text);
    } catch (const std::invalid_argument& e) {
        usage(name + ": " + e.what());
    }
}

struct settings {
    std::string url, table_prefix;
    std::string durability;  // as given to --durability; checked into `commits` before connecting
    sqlock::durability commits = sqlock::durability::strict;
    bool verbose = false;
    // run
    std::string key, wait = "0s", lease = "30s", mode = "update", once_per, run_key, kill_after = "10s";
    bool fair = false, shared = false;
    std::int64_t permits = 0;  // run --permits N: a permit of semaphore KEY
    std::vector<std::string> also;  // run --also KEY2 ...: KEY and these, all or none
    bool permits_given = false;
    int priority = 0, max_attempts = 3, conflict_exit_code = exit_status::busy;
    std::vector<std::string> program;
    bool saw_separator = false;
    // status, runs, release
    bool json = false, force = false, print_sql = false;
    std::string prefix, job;
    std::size_t limit = 20;
    // status --metrics, status --watch
    bool metrics = false, watch = false;
    std::string interval = "2s";
    int refreshes = 0;  // --count: 0 until interrupted
};

std::string resolve_url(const settings& s) {
    if (!s.url.empty()) return s.url;
    if (const char* env = std::getenv("SQLOCK_URL"); env && *env) return env;
    return std::string(default_url);
}

// Only `run`, which may hold a key for long, sweeps expired rows: the other
// commands look (status --metrics counts the rows not yet swept) and go.
client open_client(const settings& s, spdlog::level::level_enum level, bool sweeps = false) {
    // Library messages go to stderr as "sqlock: ..." lines; `run` keeps only
    // errors so that its own one-line verdict is what people read.
    auto log = std::make_shared<spdlog::logger>("sqlock", std::make_shared<spdlog::sinks::stderr_sink_mt>());
    log->set_pattern("sqlock: %v");
    log->set_level(s.verbose ? spdlog::level::debug : level);
    client_options options{.pool_size = 2, .logger = std::move(log)};
    options.sweep = sweeps;
    if (!s.table_prefix.empty()) options.table_prefix = s.table_prefix;
    else if (const char* env = std::getenv("SQLOCK_TABLE_PREFIX"); env && *env) options.table_prefix = env;
    options.durability = s.commits;
    return client::open(resolve_url(s), options);
}

// Runs f; on an embedded database (SQLite), whose file sqlock creates on first use, a missing schema
// is created and f run again. Elsewhere tables are the operator's to create.
template <class F>
auto with_schema(client& db, F&& f) -> decltype(f()) {
    try {
        return f();
    } catch (const schema_error&) {
        if (!db.capabilities().embedded || db.schema_version() != 0) throw;
        db.migrate();
        return f();
    }
}

// --durability, else $SQLOCK_DURABILITY, else strict.
sqlock::durability resolve_durability(const settings& s) {
    std::string text = s.durability, from = "--durability";
    if (const char* env = std::getenv("SQLOCK_DURABILITY"); text.empty() && env && *env) {
        text = env;
        from = "SQLOCK_DURABILITY";
    }
    if (text.empty() || text == "strict") return durability::strict;
    if (text == "relaxed") return durability::relaxed;
    usage(from + ": '" + text + "' is not a durability; use strict or relaxed");
}

mode parse_mode(const std::string& m) {
    if (m == "insert") return mode::unique_insert;
    if (m == "update") return mode::conditional_update;
    if (m == "select-for-update") return mode::select_for_update;
    usage("--mode: '" + m + "' is not a mode; use insert, update or select-for-update");
}

std::string who_am_i() {
    const char* user = std::getenv("SUDO_USER");
    if (!user || !*user) user = std::getenv("USER");
    char host[256] = {};
    if (::gethostname(host, sizeof host - 1) != 0) host[0] = '\0';
    return std::string(user && *user ? user : "uid " + std::to_string(::getuid())) + "@" + host + " (sqlock pid " +
           std::to_string(::getpid()) + ")";
}

std::string describe_holder(const lock_info& info) {
    std::string out = info.holder.empty() ? "a " + info.mode + " holder" : info.holder;
    out += " (token " + std::to_string(info.token);
    if (info.expires_in.count() > 0) out += ", " + format_duration(info.expires_in) + " left";
    return out + ")";
}

std::string program_name(const settings& s) { return s.program.empty() ? "PROGRAM" : s.program.front(); }

// --- run ---------------------------------------------------------------

// Everything `run` was asked, checked before any connection is made: bad
// input is exit 64 even when the database is away, and creates no file.
struct run_plan {
    mode lease_mode;
    std::chrono::milliseconds lease, wait, kill_after;
    std::optional<std::chrono::milliseconds> period;  // --once-per
    bool ledger = false;                              // --once-per or --run-key
};

// KEY and every --also key: the set `run --also` holds.
std::vector<std::string> run_keys(const settings& s) {
    std::vector<std::string> keys{s.key};
    keys.insert(keys.end(), s.also.begin(), s.also.end());
    return keys;
}

run_plan plan_run(const settings& s) {
    if (!s.saw_separator) usage("run needs '--' before PROGRAM: sqlock run [OPTIONS] KEY -- PROGRAM [ARGS...]");
    if (s.program.empty()) usage("run: missing PROGRAM after '--'");
    if (!s.once_per.empty() && !s.run_key.empty()) usage("use --once-per or --run-key, not both");
    if (s.conflict_exit_code < 0 || s.conflict_exit_code > 255) usage("--conflict-exit-code must be 0 to 255");
    run_plan plan{.lease_mode = parse_mode(s.mode),
                  .lease = duration_option("--lease", s.lease),
                  .wait = duration_option("--wait", s.wait),
                  .kill_after = duration_option("--kill-after", s.kill_after),
                  .ledger = !s.once_per.empty() || !s.run_key.empty()};
    if (plan.lease.count() <= 0) usage("--lease must be longer than zero");
    if (!s.once_per.empty()) {
        plan.period = duration_option("--once-per", s.once_per);
        if (plan.period->count() <= 0) usage("--once-per must be longer than zero");
    }
    if (s.shared && s.permits != 0) usage("use --shared or --permits, not both");
    if ((s.shared || s.permits != 0) && plan.ledger)
        usage("--shared and --permits cannot be combined with --once-per or --run-key");
    if (s.permits < 0 || (s.permits == 0 && s.permits_given)) usage("--permits must be at least 1");
    if (!s.also.empty()) {
        if (s.shared || s.permits != 0 || plan.ledger)
            usage("--also cannot be combined with --shared, --permits, --once-per or --run-key");
        if (plan.lease_mode == mode::select_for_update)
            usage("--also holds every key with a lease: use --mode update or insert, not select-for-update");
    }
    if (plan.ledger) {
        if (s.fair || s.priority != 0) usage("--fair and --priority cannot be combined with --once-per or --run-key");
        if (s.max_attempts < 1) usage("--max-attempts must be at least 1");
        // KEY names the job; a period's run key is known only from the database clock.
        job_runner::lock_key(s.key, s.run_key.empty() ? "period" : s.run_key);
    } else if (!s.also.empty()) {
        client::check_keys(run_keys(s));  // count, duplicates, each key: exit 64 before any SQL
    } else {
        client::check_key(s.key);
    }
    return plan;
}

void check_not_interrupted(const signal_relay& relay) {
    if (relay.interrupted().stop_requested()) throw cancelled_error("interrupted before PROGRAM started");
}

// Runs PROGRAM while `held` (a lease or a multi_lease) holds, then releases
// it; a loss while PROGRAM ran is exit 70. lost_what() names what was lost;
// `name` what could not be released.
template <class Held>
int run_held(Held& held, const held_by& watch, const std::vector<std::string>& env,
             const std::function<std::string()>& lost_what, const std::string& name, const settings& s,
             const run_plan& plan, signal_relay& relay) {
    check_not_interrupted(relay);
    auto result = run_child(s.program, env, watch, plan.lease, plan.kill_after, relay);
    // Also lost if sqlock was frozen while PROGRAM ran and finished: nobody
    // held the lease for it meanwhile.
    result.lost = result.lost || held.lost();
    const std::string lost = result.lost ? lost_what() : std::string();
    try {
        held.release();
    } catch (const error& e) {
        // The lease ends by itself at its expiry; PROGRAM's status still counts.
        std::fprintf(stderr, "sqlock: could not release %s (it expires by itself): %s\n", name.c_str(), e.what());
    }
    if (result.lost)
        throw exit_with{exit_status::lease_lost, "lost the lease on " + lost + " while " + program_name(s) +
                                                     " ran; it was sent SIGTERM" +
                                                     (result.killed ? ", then SIGKILL after " +
                                                                          format_duration(plan.kill_after)
                                                                    : "")};
    return result.status;
}

int run_locked(client& db, const settings& s, const run_plan& plan, signal_relay& relay) {
    const lock_options options{
        .mode = plan.lease_mode, .lease = plan.lease, .fair = s.fair, .priority = s.priority, .cancel = relay.interrupted()};
    std::optional<lease> held = with_schema(db, [&]() -> std::optional<lease> {
        if (plan.wait.count() == 0) {
            if (s.shared) return db.try_acquire_shared(s.key, options);
            if (s.permits > 0) return db.try_acquire_permit(s.key, s.permits, options);
            return db.try_acquire(s.key, options);
        }
        try {
            if (s.shared) return db.acquire_shared(s.key, plan.wait, options);
            if (s.permits > 0) return db.acquire_permit(s.key, s.permits, plan.wait, options);
            return db.acquire(s.key, plan.wait, options);
        } catch (const timeout_error&) {
            return std::nullopt;
        }
    });
    if (!held && s.permits > 0)
        throw exit_with{s.conflict_exit_code,
                        "every permit of semaphore '" + s.key + "' is held" +
                            (plan.wait.count() ? " after waiting " + format_duration(plan.wait) : "") + "; " +
                            program_name(s) + " not run"};
    if (!held && s.shared)
        throw exit_with{s.conflict_exit_code,
                        "'" + s.key + "' is held exclusively or a writer waits for it" +
                            (plan.wait.count() ? " after waiting " + format_duration(plan.wait) : "") + "; " +
                            program_name(s) + " not run"};
    if (!held) {
        const auto info = db.inspect(s.key);
        throw exit_with{s.conflict_exit_code,
                        "'" + s.key + "' is held by " + describe_holder(info) +
                            (plan.wait.count() ? " after waiting " + format_duration(plan.wait) : "") + "; " +
                            program_name(s) + " not run"};
    }
    return run_held(*held, held_by_lease(*held),
                    {"SQLOCK_KEY=" + held->key(), "SQLOCK_TOKEN=" + std::to_string(held->token()),
                     "SQLOCK_OWNER=" + held->owner()},
                    [&] { return "'" + s.key + "' (token " + std::to_string(held->token()) + ")"; }, "'" + s.key + "'",
                    s, plan, relay);
}

// run --also: KEY and the --also keys, all of them or none.
int run_set(client& db, const settings& s, const run_plan& plan, signal_relay& relay) {
    const lock_options options{
        .mode = plan.lease_mode, .lease = plan.lease, .fair = s.fair, .priority = s.priority, .cancel = relay.interrupted()};
    const auto keys = run_keys(s);
    std::optional<multi_lease> held = with_schema(db, [&]() -> std::optional<multi_lease> {
        if (plan.wait.count() == 0) return db.try_acquire_all(keys, options);
        try {
            return db.acquire_all(keys, plan.wait, options);
        } catch (const timeout_error&) {
            return std::nullopt;
        }
    });
    std::string all;
    for (const auto& k : keys) all += (all.empty() ? "'" : ", '") + k + "'";
    if (!held) {
        // The first key held now; none may be, when waiters were ahead or a holder just left.
        std::string busy = "one of " + all + " is busy";
        for (const auto& k : keys) {
            if (const auto info = db.inspect(k); info.held) {
                busy = "'" + k + "' (of " + all + ") is held by " + describe_holder(info);
                break;
            }
        }
        throw exit_with{s.conflict_exit_code, busy +
                                                  (plan.wait.count() ? " after waiting " + format_duration(plan.wait) : "") +
                                                  "; " + program_name(s) + " not run"};
    }
    std::vector<std::string> env{"SQLOCK_KEY=" + s.key, "SQLOCK_TOKEN=" + std::to_string(held->token(s.key)),
                                 "SQLOCK_OWNER=" + held->at(s.key).owner(),
                                 "SQLOCK_KEY_COUNT=" + std::to_string(held->keys().size())};
    for (std::size_t i = 0; i < held->keys().size(); ++i) {
        env.push_back("SQLOCK_KEY_" + std::to_string(i + 1) + "=" + held->keys()[i]);
        env.push_back("SQLOCK_TOKEN_" + std::to_string(i + 1) + "=" + std::to_string(held->tokens()[i]));
    }
    auto lost_key = [&] {
        for (const auto& l : held->leases())
            if (l.lost()) return "'" + l.key() + "' (token " + std::to_string(l.token()) + ") of " + all;
        return all;
    };
    return run_held(*held, held_by_set(*held), env, lost_key, all, s, plan, relay);
}

int run_job(client& db, const settings& s, const run_plan& plan, signal_relay& relay) {
    job_runner runner(db, {.mode = plan.lease_mode,
                           .lease = plan.lease,
                           .wait = plan.wait,
                           .max_attempts = s.max_attempts,
                           .cancel = relay.interrupted()});
    const std::string run_key =
        plan.period ? with_schema(db, [&] { return runner.run_key(every{*plan.period}); }) : s.run_key;

    std::optional<child_result> ran;
    std::exception_ptr not_started;  // PROGRAM could not be started: sqlock's failure, not PROGRAM's
    const auto outcome = with_schema(db, [&] {
        return runner.run(s.key, run_key, [&](const job_context& ctx) -> std::string {
            try {
                check_not_interrupted(relay);
                ran = run_child(s.program,
                                {"SQLOCK_KEY=" + ctx.lease.key(), "SQLOCK_TOKEN=" + std::to_string(ctx.token),
                                 "SQLOCK_OWNER=" + ctx.lease.owner(), "SQLOCK_JOB=" + s.key,
                                 "SQLOCK_RUN_KEY=" + std::string(ctx.run_key),
                                 "SQLOCK_ATTEMPT=" + std::to_string(ctx.attempt)},
                                held_by_lease(ctx.lease), plan.lease, plan.kill_after, relay);
            } catch (...) {
                not_started = std::current_exception();
                throw;  // recorded in the ledger as this attempt's failure
            }
            if (ran->status != 0)
                throw std::runtime_error(program_name(s) + " exited with status " + std::to_string(ran->status));
            return "exit 0";
        });
    });
    if (not_started && outcome.status != job_status::lost) std::rethrow_exception(not_started);
    const std::string what = "'" + s.key + "' for run key " + run_key;
    switch (outcome.status) {
    case job_status::ran:
        return 0;
    case job_status::already_done:
        throw exit_with{s.conflict_exit_code, what + " already ran (" + outcome.record.holder + ", token " +
                                                  std::to_string(outcome.record.token) + "); " + program_name(s) +
                                                  " not run"};
    case job_status::busy:
        throw exit_with{s.conflict_exit_code, what + " is running elsewhere: " + outcome.error + "; " +
                                                  program_name(s) + " not run"};
    case job_status::lost:
        throw exit_with{exit_status::lease_lost, "lost the lease on " + what + " while " + program_name(s) +
                                       " ran; it was stopped and the run is not recorded as done"};
    case job_status::failed:
        if (outcome.executed && ran) return ran->status;  // PROGRAM's own failure, recorded in the ledger
        throw exit_with{s.conflict_exit_code,
                        what + " failed before (attempt " + std::to_string(outcome.record.attempts) + " of " +
                            std::to_string(s.max_attempts) + ": " + outcome.record.last_error + "); " +
                            (outcome.retry_in ? "retry in " + format_duration(*outcome.retry_in)
                                              : std::string("no attempts left")) +
                            "; " + program_name(s) + " not run"};
    }
    return 1;
}

int command_run(const settings& s) {
    const run_plan plan = plan_run(s);
    signal_relay relay;  // before the client starts its threads, so they never see these signals
    auto db = open_client(s, spdlog::level::err, true);
    try {
        if (plan.ledger) return run_job(db, s, plan, relay);
        return s.also.empty() ? run_locked(db, s, plan, relay) : run_set(db, s, plan, relay);
    } catch (const cancelled_error&) {
        const int sig = relay.last_signal();
        const char* name = sig > 0 ? sigabbrev_np(sig) : nullptr;
        throw exit_with{exit_status::signal_base + sig, std::string("interrupted by SIG") + (name ? name : "?") + " while waiting for '" +
                                       s.key + "'; " + program_name(s) + " not run"};
    } catch (const spawn_error& e) {
        throw exit_with{e.status, e.what()};
    }
}

// --- the other commands ------------------------------------------------

int command_migrate(const settings& s) {
    auto db = open_client(s, spdlog::level::warn);
    if (s.print_sql) {
        std::fputs(db.migration_sql().c_str(), stdout);
        return 0;
    }
    const int before = db.schema_version();
    db.migrate();
    const int after = db.schema_version();
    if (before == after) std::printf("schema is up to date (version %d)\n", after);
    else std::printf("migrated from schema version %d to %d\n", before, after);
    return 0;
}

snapshot read_status(client& db, const settings& s) {
    snapshot snap;
    // One row past the limit tells whether there were more. The prefix is
    // applied by the database, so the limit counts matching rows only.
    auto bounded = [&](auto rows, bool& more) {
        more = rows.size() > s.limit;
        rows.resize(std::min(rows.size(), s.limit));
        return rows;
    };
    snap.locks = bounded(with_schema(db, [&] { return db.locks(s.prefix, s.limit + 1); }), snap.more_locks);
    snap.waiters = bounded(db.waiters(s.prefix, s.limit + 1), snap.more_waiters);
    snap.holders = bounded(db.holders(s.prefix, s.limit + 1), snap.more_holders);
    job_runner runner(db);
    snap.runs = bounded(runner.records_with_prefix(s.prefix, s.limit + 1), snap.more_runs);
    snap.now = db.database_time();
    return snap;
}

void print(const std::string& text) {
    std::fputs(text.c_str(), stdout);
    std::fflush(stdout);
}

// status --watch: a snapshot every --interval until --count of them or a
// signal. On a terminal each one replaces the last in place (cursor home,
// each line and then the rest of the screen cleared, so nothing flickers);
// elsewhere they follow one another, a blank line between, each starting
// with its "database time" line. A database error after the first snapshot
// is shown in its place and the watch goes on (a failover, a restart).
int watch_status(const settings& s, std::chrono::milliseconds interval) {
    signal_relay relay;  // before the client starts its threads, so they never see these signals
    auto db = open_client(s, spdlog::level::err);
    const bool terminal = ::isatty(STDOUT_FILENO) == 1;
    const std::stop_token stop = relay.interrupted();
    std::mutex mu;
    std::condition_variable_any tick;
    int shown = 0;
    while (!stop.stop_requested()) {
        std::string text;
        try {
            text = status_table(read_status(db, s));
        } catch (const error& e) {
            // What a failover or a restart brings passes; anything else (a missing schema) ends the watch.
            const bool passing = dynamic_cast<const connection_error*>(&e) || dynamic_cast<const db_error*>(&e);
            if (shown == 0 || !passing) throw;
            text = "local time " +
                   iso8601(std::chrono::floor<std::chrono::milliseconds>(std::chrono::system_clock::now())) +
                   "\n\nstatus unavailable: " + std::string(e.what()) + "\n";
        }
        ++shown;
        if (terminal) {
            std::string screen = "\x1b[H";
            for (std::size_t at = 0, end; at < text.size(); at = end + 1) {
                end = text.find('\n', at);
                if (end == std::string::npos) end = text.size();
                screen += text.substr(at, end - at) + "\x1b[K\n";
            }
            print(screen + "\x1b[K\nevery " + format_duration(interval) + "; Ctrl-C stops\x1b[K\n\x1b[J");
        } else {
            print((shown > 1 ? "\n" : "") + text);
        }
        if (s.refreshes > 0 && shown >= s.refreshes) return 0;
        std::unique_lock lock(mu);
        tick.wait_for(lock, stop, interval, [] { return false; });
    }
    const int sig = relay.last_signal();
    const char* name = sig > 0 ? sigabbrev_np(sig) : nullptr;
    throw exit_with{exit_status::signal_base + sig, std::string("status --watch stopped by SIG") + (name ? name : "?") +
                                                        " after " + std::to_string(shown) + " snapshot" +
                                                        (shown == 1 ? "" : "s")};
}

// --interval, checked before connecting.
std::chrono::milliseconds watch_interval(const settings& s) {
    const auto interval = duration_option("--interval", s.interval);
    if (interval < std::chrono::milliseconds(100)) usage("--interval must be at least 100ms");
    return interval;
}

int command_status(const settings& s) {
    if (s.watch) return watch_status(s, watch_interval(s));
    auto db = open_client(s, spdlog::level::warn);
    if (s.metrics) {
        const auto gauges = with_schema(db, [&] { return db.gauges(s.limit); });
        print(status_metrics(gauges, db.capabilities().row_locks));
        return 0;
    }
    const auto snap = read_status(db, s);
    print(s.json ? status_json(snap) : status_table(snap));
    return 0;
}

int command_runs(const settings& s) {
    auto db = open_client(s, spdlog::level::warn);
    job_runner runner(db);
    const auto records = with_schema(db, [&] { return runner.records(s.job, s.limit); });
    std::fputs((s.json ? runs_json(records) : runs_table(records)).c_str(), stdout);
    return 0;
}

int command_release(const settings& s) {
    if (!s.force)
        usage("release takes a lock from whoever holds it; say so with --force: sqlock release --force KEY");
    auto db = open_client(s, spdlog::level::warn);
    const auto before = with_schema(db, [&] { return db.inspect(s.key); });
    const auto token = db.force_release(s.key, who_am_i());
    if (token == 0) {
        std::printf("'%s' was never granted: nothing to release\n", s.key.c_str());
        return 0;
    }
    if (before.held)
        std::printf("released '%s': %s is fenced off; the next holder gets a token above %lld\n", s.key.c_str(),
                    describe_holder(before).c_str(), static_cast<long long>(token));
    else
        std::printf("'%s' was not held; its token is now %lld\n", s.key.c_str(), static_cast<long long>(token));
    return 0;
}

// --- parsing -----------------------------------------------------------

constexpr const char* footer = R"(The database: --url, else $SQLOCK_URL, else the SQLite file ./sqlock.db
(created on first use). URLs: postgresql://user:pass@host:port/db,
mysql://user:pass@host:port/db, sqlite:path/to/file.db (docs/urls.md).
Durations: 250ms, 30s, 5m, 1h, 1h30m.

Exit status: 0 success; PROGRAM's own status when it ran; 75 (or
--conflict-exit-code) when the key was busy or the run already done; 64 bad
usage; 69 database unreachable or schema missing; 70 lease lost while
PROGRAM ran; 126/127 PROGRAM could not be run; 71 fork or pipe failed.)";

// check_only: stop after the checks each command makes before it connects
// (check_arguments()).
int dispatch(int argc, char** argv, bool check_only = false) {
    settings s;
    CLI::App app{"sqlock: distributed locks, leases and run-once jobs in the SQL database you already run"};
    app.name("sqlock");
    app.footer(footer);
    app.require_subcommand(1);
    app.set_version_flag("--version", "sqlock 0.1");
    app.add_option("--url", s.url, "Database URL (default: $SQLOCK_URL, else sqlite:sqlock.db)");
    app.add_option("--table-prefix", s.table_prefix,
                   "Prefix of sqlock's tables (default: $SQLOCK_TABLE_PREFIX, else sqlock_)");
    app.add_option("--durability", s.durability,
                   "strict or relaxed: faster commits that a database crash can lose, for locks that only "
                   "save work; not on MySQL (default: $SQLOCK_DURABILITY, else strict)");
    app.add_flag("-v,--verbose", s.verbose, "Log what the library does to stderr");

    app.fallthrough();  // the global options may follow the command too (set before adding the subcommands)

    auto* migrate = app.add_subcommand("migrate", "Create or upgrade sqlock's tables, or print their SQL");
    migrate->add_flag("--print-sql", s.print_sql, "Print the SQL for this database's dialect instead of applying it");

    auto* run = app.add_subcommand("run", "Hold KEY while PROGRAM runs (KEY -- PROGRAM [ARGS...])");
    run->add_option("KEY", s.key, "The lock key (with --once-per/--run-key: the job name)")->required();
    // After "--" everything is PROGRAM and its arguments, never sqlock's options.
    run->add_option("PROGRAM", s.program, "The program to run while KEY is held, after '--'");
    run->add_option("--wait", s.wait, "How long to wait for a busy key (default 0s: do not wait)");
    run->add_option("--lease", s.lease, "Lease length, renewed while PROGRAM runs (default 30s)");
    run->add_option("--mode", s.mode, "insert, update (default) or select-for-update");
    run->add_flag("--fair", s.fair, "Queue for the key in FIFO order with other fair waiters");
    run->add_flag("--shared", s.shared, "Hold KEY shared: other --shared runs may hold it too, exclusive ones not");
    run->add_option("--permits", s.permits,
                    "Hold one of N permits of the semaphore KEY (N: its limit when new); at most N run at once")
        ->each([&](const std::string&) { s.permits_given = true; });
    run->add_option("--also", s.also,
                    "Also hold this key (repeatable): KEY and every --also key, all of them or none, without "
                    "deadlock whatever order other runs name them in")
        ->allow_extra_args(false);
    run->add_option("--priority", s.priority, "Fair queue priority: higher first (default 0)");
    run->add_option("--once-per", s.once_per, "Through the job ledger: at most one successful run per period");
    run->add_option("--run-key", s.run_key, "Through the job ledger: at most one successful run for this key");
    run->add_option("--max-attempts", s.max_attempts, "Ledger runs: attempts per run key (default 3)");
    run->add_option("--conflict-exit-code", s.conflict_exit_code,
                    "Exit status when the key is busy or the run is done (default 75)");
    run->add_option("--kill-after", s.kill_after, "After a lost lease, SIGKILL this long after SIGTERM (default 10s)");
    run->footer(R"(PROGRAM runs in a process group of its own with SQLOCK_KEY, SQLOCK_TOKEN and
SQLOCK_OWNER set (ledger runs add SQLOCK_JOB, SQLOCK_RUN_KEY, SQLOCK_ATTEMPT;
--also adds SQLOCK_KEY_COUNT and SQLOCK_KEY_n, SQLOCK_TOKEN_n for n = 1.. in
key order).
SIGINT, SIGTERM and SIGHUP are passed on to it. If the lease is lost, or its
deadline passes while sqlock is frozen, the group gets SIGTERM, then SIGKILL
after --kill-after, and sqlock exits 70; if sqlock is killed, SIGKILL at once.)");

    auto* status = app.add_subcommand("status", "Held locks, waiters and recent job runs");
    auto* status_prefix = status->add_option("KEY-PREFIX", s.prefix, "Only keys (and job names) starting with this");
    auto* status_json = status->add_flag("--json", s.json, "JSON instead of a table");
    status->add_option("--limit", s.limit,
                       "Rows to show per section: locks, waiters, job runs; with --metrics, keys with the longest "
                       "queues (default 20)");
    auto* metrics = status->add_flag("--metrics", s.metrics,
                                     "Whole-database gauges in the Prometheus text format, for node_exporter's "
                                     "textfile collector");
    metrics->excludes(status_prefix)->excludes(status_json);
    auto* watch = status->add_flag("--watch", s.watch,
                                   "Show the status again every --interval, in place on a terminal, until "
                                   "interrupted");
    watch->excludes(status_json)->excludes(metrics);
    status->add_option("--interval", s.interval, "Time between --watch snapshots (default 2s)")->needs(watch);
    auto* count = status->add_option("--count", s.refreshes, "Stop --watch after N snapshots (default: until interrupted)")
                      ->needs(watch);

    auto* release = app.add_subcommand("release", "Break-glass: take KEY from whoever holds it");
    release->add_option("KEY", s.key, "The lock key")->required();
    release->add_flag("--force", s.force, "Required: bumps the token so the holder is fenced off");

    auto* runs = app.add_subcommand("runs", "The job ledger, newest first");
    runs->add_option("JOB", s.job, "Only this job");
    runs->add_flag("--json", s.json, "JSON instead of a table");
    runs->add_option("--limit", s.limit, "Rows to show (default 20)");

    try {
        app.parse(argc, argv);
    } catch (const CLI::CallForHelp&) {
        std::cout << (app.get_subcommands().empty() ? app.help() : app.get_subcommands().front()->help());
        return 0;
    } catch (const CLI::CallForVersion& e) {
        std::cout << e.what() << "\n";
        return 0;
    } catch (const CLI::ParseError& e) {
        usage(std::string(e.what()) + " (see sqlock --help)");
    }
    // CLI11 leaves the "--" it met among the subcommand's remaining
    // arguments, and after it fills positionals in order, KEY first if it is
    // still empty: PROGRAM must then be everything after the "--".
    const auto rest = run->remaining();
    s.saw_separator = std::find(rest.begin(), rest.end(), "--") != rest.end();
    if (run->parsed() && s.saw_separator) {
        const auto separator = std::find(argv + 1, argv + argc, std::string_view("--"));
        if (static_cast<std::size_t>(argv + argc - separator - 1) != s.program.size())
            usage("run needs KEY before '--': sqlock run [OPTIONS] KEY -- PROGRAM [ARGS...]");
    }
    if (s.limit < 1 || s.limit > 10000) usage("--limit must be 1 to 10000");
    if (count->count() > 0 && s.refreshes < 1) usage("--count must be at least 1");
    if (s.watch) watch_interval(s);
    s.commits = resolve_durability(s);
    if (check_only) {
        if (run->parsed()) plan_run(s);
        return 0;
    }

    if (migrate->parsed()) return command_migrate(s);
    if (run->parsed()) return command_run(s);
    if (status->parsed()) return command_status(s);
    if (release->parsed()) return command_release(s);
    return command_runs(s);
}

}  // namespace

int check_arguments(int argc, char** argv) {
    try {
        return dispatch(argc, argv, true);
    } catch (const exit_with& e) {
        return e.status;
    } catch (const config_error&) {
        return exit_status::usage;
    }
}

}  // namespace sqlock::cli

#ifndef SQLOCK_CLI_NO_MAIN  // tests/fuzz/cli_fuzz.cpp links this file without main()
namespace {

// Driver messages may span lines (libpq adds hints); sqlock's verdict is one.
std::string one_line(std::string_view text) {
    std::string out;
    for (char c : text) {
        if (c == '\n' || c == '\t' || c == '\r') {
            if (!out.empty() && out.back() != ' ') out += ' ';
        } else {
            out += c;
        }
    }
    while (!out.empty() && out.back() == ' ') out.pop_back();
    return out;
}

int say(int status, std::string_view prefix, std::string_view what, std::string_view suffix = {}) {
    std::fprintf(stderr, "sqlock: %s\n", one_line(std::string(prefix) + std::string(what) + std::string(suffix)).c_str());
    return status;
}

}  // namespace

int main(int argc, char** argv) {
    using namespace sqlock;
    cli::startup_fds();  // before anything opens a file
    try {
        return cli::dispatch(argc, argv);
    } catch (const cli::exit_with& e) {
        return say(e.status, "", e.message);
    } catch (const config_error& e) {
        return say(cli::exit_status::usage, "", e.what());
    } catch (const connection_error& e) {
        return say(cli::exit_status::unavailable, "database unreachable: ", e.what());
    } catch (const schema_error& e) {
        return say(cli::exit_status::unavailable, "", e.what(), " (run 'sqlock migrate')");
    } catch (const db_error& e) {
        return say(cli::exit_status::unavailable, "database error: ", e.what());
    } catch (const std::exception& e) {
        return say(cli::exit_status::os_error, "", e.what());  // fork, pipe or poll failed
    }
}
#endif
