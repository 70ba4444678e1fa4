#include "support/process.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <stdexcept>
#include <thread>

extern char** environ;

namespace test {

std::string worker_path() { return SQLOCK_TEST_WORKER; }

child::child(const std::vector<std::string>& argv, const std::vector<std::string>& env) {
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) throw std::runtime_error("pipe failed");
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, fds[1], 1);
    // Our environment, with the given entries replacing ours of the same name
    // (getenv() would return the first of two).
    std::vector<std::string> env_strings;
    auto name_of = [](const std::string& entry) { return entry.substr(0, entry.find('=') + 1); };
    for (char** e = environ; *e; ++e) {
        const std::string entry = *e;
        bool replaced = false;
        for (const auto& mine : env) replaced = replaced || name_of(mine) == name_of(entry);
        if (!replaced) env_strings.push_back(entry);
    }
    for (const auto& e : env) env_strings.push_back(e);
    std::vector<char*> envp, args;
    for (auto& e : env_strings) envp.push_back(e.data());
    envp.push_back(nullptr);
    std::vector<std::string> argv_copy = argv;
    for (auto& a : argv_copy) args.push_back(a.data());
    args.push_back(nullptr);
    int rc = posix_spawnp(&pid_, args[0], &actions, nullptr, args.data(), envp.data());
    posix_spawn_file_actions_destroy(&actions);
    close(fds[1]);
    if (rc != 0) {
        close(fds[0]);
        throw std::runtime_error("cannot spawn " + argv[0] + ": " + std::strerror(rc));
    }
    out_ = fds[0];
}

child::child(child&& o) noexcept
    : pid_(o.pid_), out_(o.out_), buffer_(std::move(o.buffer_)), reaped_(o.reaped_), status_(o.status_) {
    o.pid_ = -1;
    o.out_ = -1;
    o.reaped_ = true;
}

child::~child() {
    if (pid_ > 0 && !reaped_) {
        ::kill(pid_, SIGKILL);
        waitpid(pid_, nullptr, 0);
    }
    if (out_ >= 0) close(out_);
}

std::optional<std::string> child::read_line(std::chrono::milliseconds timeout) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
        auto nl = buffer_.find('\n');
        if (nl != std::string::npos) {
            std::string line = buffer_.substr(0, nl);
            buffer_.erase(0, nl + 1);
            return line;
        }
        auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
        if (left.count() <= 0 || out_ < 0) return std::nullopt;
        pollfd p{out_, POLLIN, 0};
        int rc = poll(&p, 1, static_cast<int>(left.count()));
        if (rc <= 0) continue;
        char buf[4096];
        ssize_t n = ::read(out_, buf, sizeof buf);
        if (n <= 0) {
            close(out_);
            out_ = -1;
            if (!buffer_.empty()) {
                std::string rest;
                rest.swap(buffer_);
                return rest;
            }
            return std::nullopt;
        }
        buffer_.append(buf, static_cast<std::size_t>(n));
    }
}

int child::wait(std::chrono::milliseconds timeout) {
    if (reaped_) return status_;
    auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
        int st = 0;
        pid_t r = waitpid(pid_, &st, WNOHANG);
        if (r == pid_) {
            reaped_ = true;
            status_ = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
            return status_;
        }
        if (std::chrono::steady_clock::now() >= deadline) return -1;
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
}

void child::signal(int sig) {
    if (pid_ > 0 && !reaped_) ::kill(pid_, sig);
}

}  // namespace test
