#pragma once
// Small helpers shared by the test suites.

#include "support/backends.hpp"

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

namespace test {

// Every mode the backend offers: the lease modes, and select_for_update
// where it has row locks.
inline std::vector<sqlock::mode> modes_of(const backend_base& db) {
    std::vector<sqlock::mode> m{sqlock::mode::unique_insert, sqlock::mode::conditional_update};
    if (db.row_locks()) m.push_back(sqlock::mode::select_for_update);
    return m;
}

// Polls until pred() holds or the timeout passes; returns pred().
template <class Pred>
bool eventually(Pred pred, std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
    const auto until = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < until) {
        if (pred()) return true;
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return pred();
}

// A private directory under the system temp dir, removed at scope exit.
struct temp_dir {
    std::filesystem::path path = std::filesystem::temp_directory_path() / ("sqlock-test-" + random_hex(12));
    temp_dir() { std::filesystem::create_directories(path); }
    ~temp_dir() {
        std::error_code ec;
        std::filesystem::remove_all(path, ec);
    }
    temp_dir(const temp_dir&) = delete;
    temp_dir& operator=(const temp_dir&) = delete;
};

// Starts the server again when the test leaves, whatever happened, so that a
// failing test does not take the following ones down with it.
struct server_comes_back {
    std::string name;
    ~server_comes_back() {
        try {
            servers("start-one " + name);
        } catch (...) {
        }
    }
};

inline std::string line_or_eof(std::optional<std::string> line) {
    return line ? *line : std::string("<eof or timeout>");
}

// What the worker's `counter` and `churn` subcommands leave behind: the
// counter file's value and, from FILE.tokens, the "token owner" lines in the
// order they were appended (under the lock, so in grant order).
struct counter_history {
    long count = -1;
    std::vector<std::int64_t> tokens;
    std::set<std::string> owners;
};
counter_history read_counter_history(const std::string& file);

}  // namespace test
