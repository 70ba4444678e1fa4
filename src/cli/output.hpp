#pragma once
// What `sqlock status` and `sqlock runs` print: aligned tables for people,
// JSON for programs.

#include <sqlock/sqlock.hpp>

#include <chrono>
#include <string>
#include <vector>

namespace sqlock::cli {

struct snapshot {
    std::chrono::sys_time<std::chrono::milliseconds> now;  // database clock
    std::vector<lock_info> locks;
    std::vector<waiter_info> waiters;
    std::vector<job_record> runs;
    // Each section shows at most --limit rows; true when more were there.
    bool more_locks = false, more_waiters = false, more_runs = false;
};

std::string status_table(const snapshot& s);
std::string status_json(const snapshot& s);
std::string runs_table(const std::vector<job_record>& runs);
std::string runs_json(const std::vector<job_record>& runs);

}  // namespace sqlock::cli
