#pragma once
// The fault campaign (scripts/faults.sh): pieces shared by its workload
// client, its orchestrator and its checker.
//
// A cell is one backend x mode x fault. The orchestrator (run.cpp) starts N
// workload clients (client.cpp), applies the fault again and again while they
// run, stops them, sweeps, and dumps the tables; the checker (checker.cpp)
// then reads the histories and the dumps. Everything a process observes is
// one JSON object per line in its own history file (event_log).
//
// Times: every event carries "m", CLOCK_MONOTONIC, and "rt", CLOCK_REALTIME,
// both read with the raw system call so that a client under faketime still
// logs the host's clocks. The servers run on this host, so their clock is
// the host's CLOCK_REALTIME: database timestamps (ms) and "rt" (ns) share one
// timeline, which is the one the checker uses.

#include <nlohmann/json.hpp>

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

namespace campaign {

std::int64_t mono_ns();
std::int64_t real_ns();

// Appends one JSON object per line to a file with a single write(2), so a
// process killed with SIGKILL leaves every line it logged whole.
class event_log {
public:
    event_log() = default;
    explicit event_log(const std::string& path);
    ~event_log();
    event_log(const event_log&) = delete;
    event_log& operator=(const event_log&) = delete;
    // Adds "m" and "rt" (now) unless present, then appends.
    void write(nlohmann::json event);

private:
    int fd_ = -1;
};

// Reads a history or dump file: one JSON object per line; a torn last line
// (a process killed mid-write cannot make one, but a full disk can) is skipped.
std::vector<nlohmann::json> read_lines(const std::string& path);

// What each client is doing right now, in a small file every process maps,
// so the orchestrator can pick a holder or a waiter to hurt.
class board {
public:
    enum state : std::int32_t { idle = 0, waiting = 1, holding = 2, running_job = 3 };
    struct slot {
        std::atomic<std::int32_t> pid;
        std::atomic<std::int32_t> state;
        std::atomic<std::int32_t> key;  // index of the hot key, or -1
        std::atomic<std::int32_t> writer;  // 1: a reader-writer client waiting for or holding rw_key exclusively
        // 1: a reader-writer or permit holder that has made its first act.
        // Stopped after it, its span (first act to last) covers the stop, so
        // a control's hole shows whoever acts in the gap; stopped before it,
        // only a holder acting just as it resumes would.
        std::atomic<std::int32_t> acted;
    };
    static constexpr int max_slots = 64;

    // Maps (creating when asked) the file of max_slots slots.
    board(const std::string& path, bool create);
    ~board();
    board(const board&) = delete;
    board& operator=(const board&) = delete;
    slot& at(int i) { return slots_[i]; }

private:
    slot* slots_ = nullptr;
};

// The application's tables beside sqlock's, under the cell's prefix: a
// counter per hot key, the history of fenced writes (seq is the counter value
// the write produced, so it orders writes by commit), the effects of job
// runs, and the acts of reader-writer and permit holders (each a database
// time at which its holder's fence said it held its lease).
struct tables {
    std::string prefix;
    std::string counters() const { return prefix + "ctr"; }
    std::string history() const { return prefix + "hist"; }
    std::string effects() const { return prefix + "effects"; }
    std::string acts() const { return prefix + "acts"; }
    std::string holders() const { return prefix + "holders"; }
    std::string locks() const { return prefix + "locks"; }
    std::string fences() const { return prefix + "fences"; }
    std::string waiters() const { return prefix + "waiters"; }
};

// Per-backend SQL text the campaign needs (the values in it are the
// campaign's own: key names, hex owner ids and numbers).
struct dialect_sql {
    std::string backend;  // "postgres", "mysql", "sqlite"
    // The application tables.
    std::vector<std::string> create(const tables& t, int keys) const;
    // The database clock in ms (SQLite has no server: the host's clock).
    std::string now_ms() const;
    // The same in microseconds, for acts: they are compared with each other.
    std::string now_us() const;
    // One row, 1, when the permit `owner` of semaphore `name` is live by the
    // database clock at the statement's run (MariaDB: and share-locks it).
    std::string permit_live(const tables& t, const std::string& name, const std::string& owner) const;
    // The lease row's grant time in ms for key/owner (empty result for
    // select_for_update, which writes no lease).
    std::string acquired_ms(const tables& t, const std::string& key, const std::string& owner) const;
    // Rows of sqlock's lock table as JSON-ready text: key, owner, mode, live (1/0).
    std::string lock_rows(const tables& t) const;
    std::string waiter_rows(const tables& t) const;
    // Rows of sqlock's holders table: kind, key, owner, live (1/0).
    std::string holder_rows(const tables& t) const;
};

std::string backend_of(const std::string& url);
std::string hot_key(int i);
// The reader-writer role's key and the permit role's semaphore: names of
// their own, apart from the hot keys (a semaphore shares the waiters' queue
// namespace with locks).
inline const char* const rw_key = "r0";
inline const char* const semaphore = "s0";

}  // namespace campaign
