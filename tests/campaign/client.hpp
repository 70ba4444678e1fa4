#pragma once
// A campaign workload process: see client.cpp.

#include <string>

namespace campaign {

struct client_config {
    std::string url, prefix;
    int id = 0;     // unique in the cell (a replacement gets a new one)
    int slot = 0;   // its place on the board
    std::string role = "lock";  // "lock", "job", "rw" (reader or writer of rw_key) or "sem" (permits of semaphore)
    std::string mode = "mixed";  // a mode's name, or "mixed": one at random per acquisition
    int keys = 3;
    int lease_ms = 2000;
    int sweep_ms = 1000;
    int job_period_ms = 4000;
    int permits = 3;  // the semaphore's N (role "sem")
    std::string log, board;
    unsigned long seed = 1;
    bool unfenced = false;      // negative control: writes and acts without the fence
    bool broken_clock = false;  // negative control: SQLite leases read the (faked) client clock
    bool relaxed = false;       // negative control: durability::relaxed (commits a server crash can lose)
};

int run_client(const client_config& config);

}  // namespace campaign
