// `sqlock status` (a table, JSON, Prometheus gauges with --metrics, or
// repeated with --watch) and `sqlock runs` (the job ledger): read-only views
// of the database, printed by output.cpp.

#include "cli/child.hpp"
#include "cli/command.hpp"
#include "cli/duration.hpp"
#include "cli/output.hpp"

#include <sqlock/sqlock.hpp>

#include <spdlog/spdlog.h>

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <string>

namespace sqlock::cli {
namespace {

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

}  // namespace

std::chrono::milliseconds watch_interval(const settings& s) {
    const auto interval = duration_option("--interval", s.interval);
    if (interval < std::chrono::milliseconds(100)) usage("--interval must be at least 100ms");
    // Longer, the wait's deadline (now + interval, in nanoseconds) overflowed
    // into the past, and snapshots came without a pause.
    if (interval > max_duration) usage("--interval must be at most 24 days (" + s.interval + " given)");
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
    print(s.json ? runs_json(records) : runs_table(records));
    return 0;
}

}  // namespace sqlock::cli
