#pragma once
// What the `sqlock` commands share: the parsed command line (settings), the
// one-line way out (exit_with, usage), the client a command opens, and each
// command's entry point. main.cpp parses argv and dispatches; run.cpp holds
// keys while PROGRAM runs; status.cpp has `status` (and --watch, --metrics)
// and `runs`; admin.cpp has `migrate` and `release --force`; command.cpp the
// helpers below.

#include "cli/exit_status.hpp"

#include <sqlock/sqlock.hpp>

#include <spdlog/spdlog.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace sqlock::cli {

// Every non-zero status sqlock produces itself leaves through here: one line.
struct exit_with {
    int status;
    std::string message;
};

[[noreturn]] inline void usage(const std::string& message) { throw exit_with{exit_status::usage, message}; }

// A duration option's text as a duration; bad text is a usage error naming the option.
std::chrono::milliseconds duration_option(const std::string& name, const std::string& text);

struct settings {
    std::string url, table_prefix;
    bool url_given = false;  // --url was given, perhaps empty (a usage error)
    std::string durability;  // as given to --durability; checked into `commits` before connecting
    sqlock::durability commits = sqlock::durability::strict;
    bool verbose = false;
    // run
    std::string key, wait = "0s", lease = "30s", mode = "update", once_per, run_key, kill_after;
    bool fair = false, shared = false;
    std::int64_t permits = 0;  // run --permits N: a permit of semaphore KEY
    std::vector<std::string> also;  // run --also KEY2 ...: KEY and these, all or none
    bool permits_given = false;
    bool kill_after_given = false;  // else a twentieth of --lease (plan_run)
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

inline constexpr const char* empty_url_message =
    "--url is empty: give the database URL, or leave --url out to use $SQLOCK_URL";

// --url, else $SQLOCK_URL, else the SQLite file ./sqlock.db; an empty --url
// or SQLOCK_URL is a usage error.
std::string resolve_url(const settings& s);

// --durability, else $SQLOCK_DURABILITY, else strict.
sqlock::durability resolve_durability(const settings& s);

// Only `run`, which may hold a key for long, sweeps expired rows: the other
// commands look (status --metrics counts the rows not yet swept) and go.
client open_client(const settings& s, spdlog::level::level_enum level, bool sweeps = false);

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

// The holder a lock_info names, its token and the lease it has left, for messages.
std::string describe_holder(const lock_info& info);

// Writes what a command prints to stdout, flushed; a write that fails (a
// full disk) is exit 74, so that a script never acts on output it lost.
void print(std::string_view text);

// PROGRAM's name as messages give it.
std::string program_name(const settings& s);

// --- the commands: each returns the exit status, or throws exit_with --------

// Everything `run` was asked, checked before any connection is made: bad
// input is exit 64 even when the database is away, and creates no file.
struct run_plan {
    mode lease_mode;
    std::chrono::milliseconds lease, wait, kill_after;
    std::optional<std::chrono::milliseconds> period;  // --once-per
    bool ledger = false;                              // --once-per or --run-key
};

// Checks everything `run` was asked (usage() when something is off).
run_plan plan_run(const settings& s);
int command_run(const settings& s);

// --interval, checked before connecting.
std::chrono::milliseconds watch_interval(const settings& s);
int command_status(const settings& s);
int command_runs(const settings& s);

int command_migrate(const settings& s);
int command_release(const settings& s);

}  // namespace sqlock::cli
