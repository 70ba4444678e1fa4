#include "common.hpp"

#include "dialects/common/sql_library.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <deque>
#include <ctime>
#include <fstream>
#include <random>
#include <sstream>
#include <utility>

namespace bench {

std::int64_t monotonic_ns() {
    timespec ts{};
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<std::int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

void sleep_until_monotonic(std::int64_t ns) {
    timespec ts{};
    ts.tv_sec = static_cast<time_t>(ns / 1'000'000'000);
    ts.tv_nsec = static_cast<long>(ns % 1'000'000'000);
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nullptr) == EINTR) {
    }
}

double seconds_of(clock_type::duration d) { return std::chrono::duration<double>(d).count(); }

void failure(const std::string& what) { throw std::runtime_error(what); }

std::string format(const char* fmt, double v) {
    char buf[64];
    std::snprintf(buf, sizeof buf, fmt, v);
    return buf;
}

std::string read_text(const std::filesystem::path& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw std::runtime_error("cannot read " + path.string());
    std::ostringstream out;
    out << in.rdbuf();
    return out.str();
}

std::string sql_texts::get(std::string_view name) const {
    // The same substitutions the library applies to its embedded SQL: each
    // {{other}} becomes other.sql without its comment lines, and the prefix.
    static constexpr std::string_view from = "sqlock_";
    std::deque<std::string> fragments;  // kept alive (and in place) while expand_includes reads them
    const std::string sql =
        sqlock::detail::expand_includes(read_text(dir_ / (std::string(name) + ".sql")), [&](std::string_view other) {
            return std::string_view(fragments.emplace_back(read_text(dir_ / (std::string(other) + ".sql"))));
        });
    std::string out;
    std::size_t pos = 0;
    for (auto hit = sql.find(from); hit != std::string::npos; hit = sql.find(from, pos)) {
        out.append(sql, pos, hit - pos).append(prefix_);
        pos = hit + from.size();
    }
    out.append(sql, pos);
    return out;
}

bool sql_texts::has(std::string_view name) const {
    return std::filesystem::exists(dir_ / (std::string(name) + ".sql"));
}

owner_source::owner_source() : salt_((std::uint64_t{std::random_device{}()} << 32) ^ std::random_device{}()) {}

const std::string& owner_source::next() {
    char buf[40];
    std::snprintf(buf, sizeof buf, "%016llx%016llx", static_cast<unsigned long long>(salt_),
                  static_cast<unsigned long long>(++n_));
    current_.assign(buf, 32);
    return current_;
}

std::string holder_text() {
    char host[HOST_NAME_MAX + 1] = {};
    if (gethostname(host, sizeof host - 1) != 0) host[0] = '\0';
    return std::string(host) + ":" + std::to_string(getpid()) + ":" + std::to_string(syscall(SYS_gettid));
}

double median(std::vector<double> v) {
    if (v.empty()) return 0;
    std::sort(v.begin(), v.end());
    const std::size_t m = v.size() / 2;
    return v.size() % 2 ? v[m] : (v[m - 1] + v[m]) / 2;
}

double percentile(std::vector<double> v, double p) {
    if (v.empty()) return 0;
    auto k = static_cast<std::size_t>(std::ceil(p * static_cast<double>(v.size())));
    k = std::clamp<std::size_t>(k, 1, v.size()) - 1;
    std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(k), v.end());
    return v[k];
}

spread spread_of(const std::vector<double>& v) {
    if (v.empty()) return {};
    const auto [lo, hi] = std::minmax_element(v.begin(), v.end());
    return {median(v), *lo, *hi};
}

std::string number_text(double v) {
    const double a = std::fabs(v);
    return format(a >= 99.95 ? "%.0f" : a >= 9.995 ? "%.1f" : "%.2f", v);
}

std::string spread_text(const spread& s) {
    return number_text(s.med) + " (" + number_text(s.lo) + "–" + number_text(s.hi) + ")";
}

std::string ratio_text(double a, double b) { return b > 0 && a >= 0 ? format("%.2f", a / b) : "—"; }

double process_cpu_seconds() {
    rusage u{};
    getrusage(RUSAGE_SELF, &u);
    auto s = [](const timeval& t) { return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) * 1e-6; };
    return s(u.ru_utime) + s(u.ru_stime);
}

double thread_cpu_seconds() {
    timespec ts{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

void write_all(int fd, std::string_view text) {
    while (!text.empty()) {
        const ssize_t n = ::write(fd, text.data(), text.size());
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) throw std::runtime_error("cannot write to the pipe: " + std::string(std::strerror(errno)));
        text.remove_prefix(static_cast<std::size_t>(n));
    }
}

bool read_line(int fd, std::string& buffer, std::string& line, std::int64_t deadline) {
    for (;;) {
        if (const auto nl = buffer.find('\n'); nl != std::string::npos) {
            line = buffer.substr(0, nl);
            buffer.erase(0, nl + 1);
            return true;
        }
        const std::int64_t left_ms = (deadline - monotonic_ns()) / 1'000'000;
        if (left_ms <= 0) throw std::runtime_error("a child process did not answer in time");
        pollfd p{fd, POLLIN, 0};
        const int ready = ::poll(&p, 1, static_cast<int>(std::min<std::int64_t>(left_ms, 1000)));
        if (ready < 0 && errno != EINTR) throw std::runtime_error("poll: " + std::string(std::strerror(errno)));
        if (ready <= 0) continue;
        char chunk[65536];
        const ssize_t n = ::read(fd, chunk, sizeof chunk);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) throw std::runtime_error("cannot read from a child process: " + std::string(std::strerror(errno)));
        if (n == 0) {
            line = std::move(buffer);
            buffer.clear();
            return !line.empty();
        }
        buffer.append(chunk, static_cast<std::size_t>(n));
    }
}

std::string self_executable() {
    char path[PATH_MAX + 1] = {};
    const ssize_t n = readlink("/proc/self/exe", path, PATH_MAX);
    if (n <= 0) throw std::runtime_error("cannot find this program's path in /proc/self/exe");
    return std::string(path, static_cast<std::size_t>(n));
}

child_process::child_process(const std::vector<std::string>& args) {
    int in[2], out[2];
    if (pipe2(in, O_CLOEXEC) != 0) throw std::runtime_error("pipe2 failed");
    if (pipe2(out, O_CLOEXEC) != 0) {
        ::close(in[0]);
        ::close(in[1]);
        throw std::runtime_error("pipe2 failed");
    }
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, in[0], 0);  // dup2 clears O_CLOEXEC on 0 and 1
    posix_spawn_file_actions_adddup2(&actions, out[1], 1);
    std::vector<std::string> copy = args;
    std::vector<char*> argv;
    for (auto& a : copy) argv.push_back(a.data());
    argv.push_back(nullptr);
    const int rc = posix_spawn(&pid_, copy[0].c_str(), &actions, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    ::close(in[0]);
    ::close(out[1]);
    if (rc != 0) {
        ::close(in[1]);
        ::close(out[0]);
        pid_ = -1;
        throw std::runtime_error("cannot start a child process: " + std::string(std::strerror(rc)));
    }
    to_ = in[1];
    from_ = out[0];
}

child_process::child_process(child_process&& other) noexcept
    : pid_(std::exchange(other.pid_, -1)),
      to_(std::exchange(other.to_, -1)),
      from_(std::exchange(other.from_, -1)),
      buffer_(std::move(other.buffer_)) {}

child_process::~child_process() {
    if (to_ >= 0) ::close(to_);
    if (from_ >= 0) ::close(from_);
    if (pid_ > 0) {
        ::kill(pid_, SIGKILL);
        ::waitpid(pid_, nullptr, 0);
    }
}

void child_process::close_stdin() {
    if (to_ >= 0) ::close(to_);
    to_ = -1;
}

int child_process::wait() {
    int status = 0;
    if (pid_ > 0) ::waitpid(pid_, &status, 0);
    pid_ = -1;
    return status;
}

void child_process::kill_now() {
    if (pid_ > 0) ::kill(pid_, SIGKILL);
}

namespace {

std::string first_field(const std::string& file, std::string_view key) {
    std::ifstream in(file);
    for (std::string line; std::getline(in, line);) {
        if (!line.starts_with(key)) continue;
        auto sep = line.find_first_of(":=", key.size());
        if (sep == std::string::npos) continue;
        std::string v = line.substr(sep + 1);
        v.erase(0, v.find_first_not_of(" \t\""));
        while (!v.empty() && (v.back() == '"' || v.back() == ' ')) v.pop_back();
        return v;
    }
    return "unknown";
}

std::string filesystem_of(const std::filesystem::path& dir) {
    struct statfs fs {};
    if (statfs(dir.c_str(), &fs) != 0) return "unknown";
    switch (static_cast<unsigned long>(fs.f_type)) {
        case 0xEF53: return "ext4";
        case 0x01021994: return "tmpfs";
        case 0x794c7630: return "overlayfs";
        case 0x58465342: return "xfs";
        case 0x9123683e: return "btrfs";
        case 0x2fc12fc1: return "zfs";
        default: return "f_type " + format("%.0f", static_cast<double>(fs.f_type));
    }
}

}  // namespace

machine machine::gather(const std::filesystem::path& data_dir) {
    machine m;
    m.cpu = first_field("/proc/cpuinfo", "model name");
    cpu_set_t set;
    CPU_ZERO(&set);
    m.nproc = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set)
                                                          : static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN));
    m.virtualized = first_field("/proc/cpuinfo", "flags").find(" hypervisor") != std::string::npos;
    m.ram = format("%.1f GiB", std::stod(first_field("/proc/meminfo", "MemTotal")) / (1024.0 * 1024.0));
    m.os = first_field("/etc/os-release", "PRETTY_NAME");
    utsname u{};
    if (uname(&u) == 0) m.kernel = std::string(u.sysname) + " " + u.release + " " + u.machine;
#if defined(__clang__)
    m.compiler = "clang " __clang_version__;
#elif defined(__GNUC__)
    m.compiler = "g++ " __VERSION__;
#endif
    m.disk = filesystem_of(data_dir.empty() ? std::filesystem::path("/tmp") : data_dir);
    return m;
}

std::string load_average() {
    std::ifstream in("/proc/loadavg");
    std::string one, five, fifteen;
    in >> one >> five >> fifteen;
    return one + " / " + five + " / " + fifteen;
}

std::string utc_now() {
    std::time_t t = std::time(nullptr);
    char buf[32];
    std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M UTC", std::gmtime(&t));
    return buf;
}

}  // namespace bench
