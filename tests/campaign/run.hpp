#pragma once
// One campaign cell (`sqlock_campaign run`): see run.cpp.

#include <string>
#include <vector>

namespace campaign {

struct cell_config {
    std::string url, prefix;
    std::string mode = "mixed";
    std::vector<std::string> faults;  // applied in turn, `trials` times each
    int trials = 1;
    int lock_clients = 8, job_clients = 2, keys = 3;
    // Readers and writers of rw_key; takers of permits of `semaphore`, N = permits.
    int rw_clients = 3, sem_clients = 6, permits = 3;
    int lease_ms = 2000;
    std::string dir;  // output: histories, dumps, meta.json
    // test-servers.sh and its DIR, for server faults; the server's name there.
    std::string servers_script, server_dir;
    std::string control = "none";  // "none", "unfenced", "broken-clock", "relaxed-durability"
    std::string cli;               // the sqlock program, for release --force
    std::string self;              // this program, to start clients
    unsigned long seed = 1;
};

// The faults a cell can apply, and whether one applies to a backend.
const std::vector<std::string>& all_faults();
bool fault_applies(const std::string& fault, const std::string& backend);

int run_cell(const cell_config& config);

}  // namespace campaign
