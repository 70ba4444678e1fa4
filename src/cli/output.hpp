#pragma once
// What `sqlock status` and `sqlock runs` print: aligned tables for people,
// JSON for programs, Prometheus metrics for monitoring.

#include <sqlock/sqlock.hpp>

#include <chrono>
#include <string>
#include <string_view>
#include <vector>

namespace sqlock::cli {

struct snapshot {
    std::chrono::sys_time<std::chrono::milliseconds> now;  // database clock
    std::vector<lock_info> locks;
    std::vector<waiter_info> waiters;
    std::vector<holder_info> holders;  // shared holders and semaphore permits
    std::vector<job_record> runs;
    // Each section shows at most --limit rows; true when more were there.
    bool more_locks = false, more_waiters = false, more_runs = false, more_holders = false;
};

// Text from the database (keys, holders, notes, errors) made safe for a
// terminal: C0 and C1 control characters, DEL and bytes that are not UTF-8
// become \xNN (\u00NN for a C1 character): a note holding ESC [ or CSI
// could otherwise move the cursor, retitle the window or hide lines of
// `sqlock status`. Valid UTF-8 passes unchanged.
std::string terminal_text(std::string_view s);

// A time as 2026-11-21T09:30:00.250Z.
std::string iso8601(std::chrono::sys_time<std::chrono::milliseconds> t);
std::string status_table(const snapshot& s);
std::string status_json(const snapshot& s);
std::string runs_table(const std::vector<job_record>& runs);
std::string runs_json(const std::vector<job_record>& runs);
// `status --metrics`: the gauges in the Prometheus text exposition format
// 0.0.4, every family a gauge named sqlock_db_*. row_locks: the backend has
// select_for_update, whose holders are then a series of their own.
std::string status_metrics(const database_gauges& g, bool row_locks);

}  // namespace sqlock::cli
