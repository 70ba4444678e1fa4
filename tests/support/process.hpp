#pragma once
// Child processes for multi-process tests: spawn the test worker (optionally
// under a wrapper), read its output line by line, signal it.

#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

namespace test {

class child {
public:
    // argv[0] is looked up on PATH. env entries ("K=V") are added to ours.
    explicit child(const std::vector<std::string>& argv, const std::vector<std::string>& env = {});
    child(child&& other) noexcept;
    child(const child&) = delete;
    ~child();  // kills (SIGKILL) and reaps a child still running

    // Next line of stdout (without the newline), or nullopt on EOF / timeout.
    std::optional<std::string> read_line(std::chrono::milliseconds timeout = std::chrono::seconds(30));
    // Waits for exit; returns the exit status, or 128+signal. -1 on timeout.
    int wait(std::chrono::milliseconds timeout = std::chrono::seconds(120));
    void signal(int sig);
    pid_t pid() const { return pid_; }

private:
    pid_t pid_ = -1;
    int out_ = -1;
    std::string buffer_;
    bool reaped_ = false;
    int status_ = 0;
};

// Path of the sqlock_test_worker binary.
std::string worker_path();

}  // namespace test
