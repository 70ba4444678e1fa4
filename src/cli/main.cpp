// sqlock: the command line. `run` wraps a program the way flock(1) does, for
// a whole fleet; `status`, `runs` and `release --force` inspect and repair
// lock state; `migrate` creates the tables. See `sqlock --help`.
//
// This file parses argv (every option is declared here) and dispatches; the
// commands are in run.cpp, status.cpp and admin.cpp (see command.hpp).

#include "cli/check_arguments.hpp"
#include "cli/child.hpp"
#include "cli/command.hpp"
#include "cli/exit_status.hpp"
#include "cli/output.hpp"

#include <sqlock/sqlock.hpp>

#include <CLI/CLI.hpp>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <iostream>
#include <string>
#include <string_view>

namespace sqlock::cli {
namespace {

constexpr const char* footer = R"(The database: --url, else $SQLOCK_URL, else the SQLite file ./sqlock.db
(created on first use); an empty --url or SQLOCK_URL is an error. URLs: postgresql://user:pass@host:port/db,
mysql://user:pass@host:port/db, sqlite:path/to/file.db (docs/urls.md).
Durations: 250ms, 30s, 5m, 1h, 1h30m, 2d.

Exit status: 0 success; PROGRAM's own status when it ran; 75 (or
--conflict-exit-code) when the key was busy or the run already done; 64 bad
usage; 69 database unreachable or schema missing; 70 lease lost while
PROGRAM ran (or before: not run); 126/127 PROGRAM could not be run; 71
fork, pipe or another system call failed; 74 sqlock's own output could not
be written.)";

// Overwrites, in place, the password of a database URL given on the command
// line (userinfo "user:password@" or a "password=" parameter), so that
// /proc/PID/cmdline, which anyone on the machine may read, no longer shows it
// while `sqlock run` holds a key for hours. The parsed copy is kept.
void hide_password(char* arg) {
    std::string_view url(arg);
    if (const auto scheme = url.find("://"); scheme != std::string_view::npos) {
        const auto start = scheme + 3;
        const auto end = url.find_first_of("/?#", start);
        const auto at = url.rfind('@', end == std::string_view::npos ? url.size() : end);
        if (at != std::string_view::npos && at > start) {
            const auto colon = url.find(':', start);
            if (colon != std::string_view::npos && colon < at) std::fill(arg + colon + 1, arg + at, '*');
        }
    }
    for (auto p = url.find("password="); p != std::string_view::npos; p = url.find("password=", p + 1)) {
        if (p > 0 && url[p - 1] != '?' && url[p - 1] != '&') continue;
        const auto value = p + 9;
        const auto end = url.find('&', value);
        std::fill(arg + value, arg + (end == std::string_view::npos ? url.size() : end), '*');
    }
}

void hide_url_passwords(int argc, char** argv) {
    for (int i = 1; i < argc; ++i) {
        const std::string_view a(argv[i]);
        if (a == "--") return;  // PROGRAM's arguments are PROGRAM's
        if (a == "--url" && i + 1 < argc) hide_password(argv[++i]);
        else if (a.starts_with("--url=")) hide_password(argv[i] + 6);
    }
}

// CLI11 reads "--url=" as "--url" and takes the next argument for the URL:
// `sqlock --url="$DB_URL" run k -- true` with DB_URL empty would take "run",
// and `sqlock run --url="$DB_URL" sqlite:x.db k -- true` would run. Refused
// before parsing, as an empty --url is after it.
void refuse_empty_url(int argc, char** argv) {
    for (int i = 1; i < argc; ++i) {
        const std::string_view a(argv[i]);
        if (a == "--") return;  // PROGRAM's arguments are PROGRAM's
        if (a == "--url=") usage(empty_url_message);
    }
}

// check_only: stop after the checks each command makes before it connects
// (check_arguments()).
int dispatch(int argc, char** argv, bool check_only = false) {
    settings s;
    CLI::App app{"sqlock: distributed locks, leases and run-once jobs in the SQL database you already run"};
    app.name("sqlock");
    app.footer(footer);
    app.require_subcommand(1);
    app.set_version_flag("--version", "sqlock " SQLOCK_VERSION);  // the project's version, from CMake
    app.add_option("--url", s.url, "Database URL (default: $SQLOCK_URL, else sqlite:sqlock.db)")
        ->each([&](const std::string&) { s.url_given = true; });
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
    run->add_option("--kill-after", s.kill_after,
                    "After a lost lease, SIGKILL this long after SIGTERM (default: a twentieth of --lease, half "
                    "the safety margin, so PROGRAM is gone before the lease ends in the database)")
        ->each([&](const std::string&) { s.kill_after_given = true; });
    run->footer(R"(PROGRAM runs in a process group of its own with SQLOCK_KEY, SQLOCK_TOKEN and
SQLOCK_OWNER set (ledger runs add SQLOCK_JOB, SQLOCK_RUN_KEY, SQLOCK_ATTEMPT;
--also adds SQLOCK_KEY_COUNT and SQLOCK_KEY_n, SQLOCK_TOKEN_n for n = 1.. in
key order).
SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2 and SIGALRM are passed on to
it; it starts with the signal dispositions sqlock was started with (one
ignored then is not passed on). If the lease is lost, or its deadline passes
while sqlock is frozen, the group gets SIGTERM, then SIGKILL after
--kill-after, and sqlock exits 70; if sqlock is killed, SIGKILL at once.)");

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

    refuse_empty_url(argc, argv);
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
    hide_url_passwords(argc, argv);
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
    resolve_url(s);  // refuses an empty URL before PROGRAM or the database
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

// Its text may hold the database's (a holder's name, a driver's error): made
// safe for a terminal after the line breaks became spaces.
int say(int status, std::string_view prefix, std::string_view what, std::string_view suffix = {}) {
    std::fprintf(stderr, "sqlock: %s\n",
                 sqlock::cli::terminal_text(one_line(std::string(prefix) + std::string(what) + std::string(suffix))).c_str());
    return status;
}

// What sqlock printed itself must have reached its reader: `sqlock status`
// into a full disk or `migrate --print-sql` into a closed pipe's file is not
// a success that a script may act on. (PROGRAM's output is its own.)
int flushed(int status) {
    errno = 0;
    std::cout.flush();
    if (std::fflush(stdout) == 0 && !std::ferror(stdout) && std::cout) return status;
    const int err = errno;
    say(sqlock::cli::exit_status::io_error, "could not write standard output",
        err != 0 ? std::string(": ") + std::strerror(err) : std::string());
    return status == 0 ? sqlock::cli::exit_status::io_error : status;
}

}  // namespace

int main(int argc, char** argv) {
    using namespace sqlock;
    cli::startup();  // before anything opens a file or changes a signal's disposition
    try {
        return flushed(cli::dispatch(argc, argv));
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
