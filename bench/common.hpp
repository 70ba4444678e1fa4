#pragma once
// Helpers every part of sqlock_bench shares: clocks, statistics, text,
// statement files, pipes to child processes, and facts about the machine.

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace bench {

using clock_type = std::chrono::steady_clock;

// CLOCK_MONOTONIC in nanoseconds: one clock for every process of the machine,
// so a parent can compare its children's timestamps.
std::int64_t monotonic_ns();
void sleep_until_monotonic(std::int64_t ns);
double seconds_of(clock_type::duration d);

// Anything the bench did not expect: it stops the run with this message.
[[noreturn]] void failure(const std::string& what);

std::string format(const char* fmt, double v);
std::string read_text(const std::filesystem::path& path);

// The statements of one dialect from sql/<dialect>/<name>.sql, with the
// library's "sqlock_" table prefix replaced as the library does it.
class sql_texts {
public:
    sql_texts(std::filesystem::path dir, std::string prefix) : dir_(std::move(dir)), prefix_(std::move(prefix)) {}
    std::string get(std::string_view name) const;
    bool has(std::string_view name) const;
    const std::string& prefix() const { return prefix_; }

private:
    std::filesystem::path dir_;
    std::string prefix_;
};

// Owner ids for the hand-written contenders: 32 hex digits like sqlock's,
// unique per grant, from a counter.
class owner_source {
public:
    owner_source();
    const std::string& next();

private:
    std::uint64_t salt_;
    std::uint64_t n_ = 0;
    std::string current_;
};

// "host:pid:tid", the holder text stored beside a lease.
std::string holder_text();

// Median, percentile (0..1, nearest rank) and min–max of samples.
double median(std::vector<double> v);
double percentile(std::vector<double> v, double p);
struct spread {
    double med = 0, lo = 0, hi = 0;
};
spread spread_of(const std::vector<double>& v);

// Three significant digits or more.
std::string number_text(double v);
std::string spread_text(const spread& s);
// a ÷ b with two digits, or "—".
std::string ratio_text(double a, double b);

// User + system CPU of this process (all threads), seconds.
double process_cpu_seconds();
double thread_cpu_seconds();

// Pipes to and from child processes.
void write_all(int fd, std::string_view text);
// Reads from fd into `buffer` until it holds a line (true) or the pipe is
// closed with nothing left (false); throws at `deadline` (monotonic ns).
bool read_line(int fd, std::string& buffer, std::string& line, std::int64_t deadline);
std::string self_executable();

// A child process of this program, with pipes to its stdin and stdout.
// Killed (SIGKILL) and reaped on destruction if still running.
class child_process {
public:
    explicit child_process(const std::vector<std::string>& args);
    child_process(child_process&& other) noexcept;
    child_process& operator=(child_process&&) = delete;
    child_process(const child_process&) = delete;
    ~child_process();

    pid_t pid() const { return pid_; }
    // One line from its stdout; false at end of file.
    bool read(std::string& line, std::int64_t deadline) { return read_line(from_, buffer_, line, deadline); }
    void send(std::string_view text) { write_all(to_, text); }
    void close_stdin();
    // Waits for it to exit; returns the wait status.
    int wait();
    void kill_now();

private:
    pid_t pid_ = -1;
    int to_ = -1, from_ = -1;
    std::string buffer_;
};

// The machine a run is on, for the report.
struct machine {
    std::string cpu, ram, os, kernel, compiler, disk;
    int nproc = 0;
    bool virtualized = false;
    static machine gather(const std::filesystem::path& data_dir);
};
std::string load_average();
std::string utc_now();

}  // namespace bench
