#pragma once
// The campaign's checker: reads a cell's histories and table dumps and says
// whether sqlock kept its promises (see checker.cpp for each check).

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace campaign {

// Everything the checker reads. Client events carry "c" (the client id; 0
// for the orchestrator's own job runs); orchestrator events are in `faults`.
struct cell_record {
    nlohmann::json meta;
    std::vector<nlohmann::json> events, faults;
    std::vector<nlohmann::json> counters, history, fences, locks, waiters, jobs, effects, acquirable;
    std::vector<nlohmann::json> acts, holders;  // reader-writer and permit acts; sqlock's holder rows
};

// Reads the files `sqlock_campaign run` wrote into dir.
cell_record load_cell(const std::string& dir);

// The verdict: per check a violation count and the first violations in
// words; "violations" sums (a) to (d) and (f) to (h); (e) is a distribution.
nlohmann::json check(const cell_record& cell);

}  // namespace campaign
