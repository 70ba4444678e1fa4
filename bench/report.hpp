#pragma once
// Results of a run, and how they are written: markdown tables, tab-separated
// data and gnuplot scripts for the charts (docs/benchmarks.md, docs/img/).

#include "common.hpp"
#include "lockers.hpp"
#include "workloads.hpp"

#include <map>
#include <string>
#include <vector>

namespace bench {

struct thread_cell {
    contender c;
    int workers = 0;
    int hold_ms = -1;  // -1: uncontended
    std::vector<double> rates;  // successes/s, one per repetition
    std::vector<double> latency_us;
    std::uint64_t successes = 0, attempts = 0, statements = 0;
};

struct contention_cell {
    contender c;
    bool fair = false;
    std::vector<contention_summary> runs;
    std::string label() const {
        return (c.kind == family::redis ? c.label : backend_title(c.backend) + " " + c.label) + (fair ? " fair" : "");
    }
};

struct renewal_cell {
    contender c;
    std::size_t leases = 0;
    std::vector<renewal_window> windows;
    bool in_process = false;  // SQLite: the database's CPU is the bench's own
};

struct recovery_cell {
    contender c;
    std::vector<double> ms;
};

struct settings_text {
    std::string run;  // lengths, repetitions, worker counts
    std::string handoff, fairness, renewal, recovery, primitives, waiters;
};

struct results {
    machine m;
    std::string started, finished, load_start, load_end;
    settings_text settings;
    double handoff_seconds = 0, fairness_seconds = 0;  // one run's window
    std::map<std::string, std::vector<std::string>> facts;  // backend → lines
    std::map<std::string, double> idle_server_ms;            // backend → server CPU ms/s at rest
    std::vector<thread_cell> uncontended, hot;
    std::vector<thread_cell> waiters;  // one key, threads of one process waiting with lock()
    std::vector<thread_cell> primitives;  // uncontended: exclusive, shared, permit, 3-key set
    std::vector<contention_cell> handoff, fairness;
    std::vector<renewal_cell> renewal;
    std::vector<recovery_cell> recovery;
};

// Writes DIR/report.md (one part per workload, between markers the document
// splices in), DIR/data/*.tsv and DIR/charts/*.gp, whose SVGs go to
// `img_dir` (as the markdown refers to them: `img_link`/<name>.svg).
void write_report(const results& r, const std::string& dir, const std::string& img_dir, const std::string& img_link);
// Writes text to path, creating its directory; fails the run when it cannot.
void write_file(const std::filesystem::path& path, const std::string& text);

}  // namespace bench
