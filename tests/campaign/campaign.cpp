#include "campaign/campaign.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>
#include <fstream>
#include <stdexcept>

namespace campaign {
namespace {

std::int64_t raw_clock(clockid_t id) {
    timespec ts{};
    ::syscall(SYS_clock_gettime, id, &ts);
    return static_cast<std::int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

[[noreturn]] void fail(const std::string& what) { throw std::runtime_error(what + ": " + std::strerror(errno)); }

}  // namespace

std::int64_t mono_ns() { return raw_clock(CLOCK_MONOTONIC); }
std::int64_t real_ns() { return raw_clock(CLOCK_REALTIME); }

event_log::event_log(const std::string& path) : fd_(::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0666)) {
    if (fd_ < 0) fail("open " + path);
}

event_log::~event_log() {
    if (fd_ >= 0) ::close(fd_);
}

void event_log::write(nlohmann::json event) {
    if (!event.contains("m")) event["m"] = mono_ns();
    if (!event.contains("rt")) event["rt"] = real_ns();
    const std::string line = event.dump() + "\n";
    // O_APPEND: one write lands whole at the end even with several threads.
    [[maybe_unused]] auto n = ::write(fd_, line.data(), line.size());
}

std::vector<nlohmann::json> read_lines(const std::string& path) {
    std::vector<nlohmann::json> out;
    std::ifstream in(path);
    std::string line;
    while (std::getline(in, line)) {
        if (line.empty()) continue;
        auto j = nlohmann::json::parse(line, nullptr, false);
        if (!j.is_discarded()) out.push_back(std::move(j));
    }
    return out;
}

board::board(const std::string& path, bool create) {
    const int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC | (create ? O_CREAT | O_TRUNC : 0), 0666);
    if (fd < 0) fail("open " + path);
    const auto size = sizeof(slot) * max_slots;
    if (create && ::ftruncate(fd, static_cast<off_t>(size)) != 0) fail("ftruncate " + path);
    void* p = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    ::close(fd);
    if (p == MAP_FAILED) fail("mmap " + path);
    slots_ = static_cast<slot*>(p);
}

board::~board() { ::munmap(slots_, sizeof(slot) * max_slots); }

std::vector<std::string> dialect_sql::create(const tables& t, int keys) const {
    std::vector<std::string> out;
    const bool my = backend == "mysql";
    const std::string text = my ? "VARCHAR(200)" : "TEXT";
    const std::string engine = my ? " ENGINE = InnoDB" : "";
    out.push_back("CREATE TABLE " + t.counters() + " (k " + text + " PRIMARY KEY, counter BIGINT NOT NULL)" + engine);
    out.push_back("CREATE TABLE " + t.history() + " (k " + text +
                  " NOT NULL, seq BIGINT NOT NULL, token BIGINT NOT NULL, owner " + text +
                  " NOT NULL, client INT NOT NULL, wid BIGINT NOT NULL, g_ms BIGINT, w_ms BIGINT, PRIMARY KEY (k, seq))" +
                  engine);
    out.push_back("CREATE TABLE " + t.effects() + " (job " + text + " NOT NULL, rk " + text +
                  " NOT NULL, token BIGINT NOT NULL, owner " + text +
                  " NOT NULL, client INT NOT NULL, attempt INT NOT NULL, w_ms BIGINT)" + engine);
    // An act: kind 'X' (exclusive), 'S' (shared) or 'P' (permit); t_us the
    // database time read before the holder's fence passed.
    out.push_back("CREATE TABLE " + t.acts() + " (k " + text +
                  " NOT NULL, kind CHAR(1) NOT NULL, token BIGINT NOT NULL, owner " + text +
                  " NOT NULL, client INT NOT NULL, wid BIGINT NOT NULL PRIMARY KEY, t_us BIGINT NOT NULL)" + engine);
    for (int i = 0; i < keys; ++i)
        out.push_back("INSERT INTO " + t.counters() + " (k, counter) VALUES ('" + hot_key(i) + "', 0)");
    return out;
}

std::string dialect_sql::now_ms() const {
    if (backend == "postgres") return "(extract(epoch FROM clock_timestamp()) * 1000)::bigint";
    if (backend == "mysql") return "FLOOR(UNIX_TIMESTAMP(NOW(6)) * 1000)";
    return std::to_string(real_ns() / 1'000'000);
}

std::string dialect_sql::now_us() const {
    if (backend == "postgres") return "(extract(epoch FROM clock_timestamp()) * 1000000)::bigint";
    if (backend == "mysql") return "FLOOR(UNIX_TIMESTAMP(NOW(6)) * 1000000)";
    return std::to_string(real_ns() / 1'000);
}

std::string dialect_sql::permit_live(const tables& t, const std::string& name, const std::string& owner) const {
    const std::string where = " FROM " + t.holders() + " WHERE kind = 'P' AND lock_key = '" + name +
                              "' AND owner = '" + owner + "' AND ";
    if (backend == "postgres") return "SELECT 1" + where + "expires_at > clock_timestamp()";
    // A locking read: the latest committed version, not the transaction's snapshot.
    if (backend == "mysql") return "SELECT 1" + where + "expires_at > UTC_TIMESTAMP(6) LOCK IN SHARE MODE";
    return "SELECT 1" + where + "expires_ms > " + now_ms();
}

std::string dialect_sql::acquired_ms(const tables& t, const std::string& key, const std::string& owner) const {
    const std::string where = " FROM " + t.locks() + " WHERE lock_key = '" + key + "' AND owner = '" + owner + "'";
    if (backend == "postgres") return "SELECT (extract(epoch FROM acquired_at) * 1000)::bigint" + where;
    // The raw connection runs with time_zone '+00:00' (the DATETIMEs are UTC).
    if (backend == "mysql") return "SELECT FLOOR(UNIX_TIMESTAMP(acquired_at) * 1000)" + where;
    return "SELECT acquired_ms" + where;
}

std::string dialect_sql::lock_rows(const tables& t) const {
    std::string live;
    if (backend == "postgres") live = "expires_at > clock_timestamp()";
    else if (backend == "mysql") live = "expires_at > UTC_TIMESTAMP(6)";
    else live = "expires_ms > " + now_ms();
    return "SELECT lock_key, COALESCE(owner, ''), COALESCE(mode, ''), CASE WHEN owner IS NOT NULL AND owner <> '' AND " +
           live + " THEN 1 ELSE 0 END FROM " + t.locks() + " ORDER BY lock_key";
}

std::string dialect_sql::holder_rows(const tables& t) const {
    std::string live;
    if (backend == "postgres") live = "expires_at > clock_timestamp()";
    else if (backend == "mysql") live = "expires_at > UTC_TIMESTAMP(6)";
    else live = "expires_ms > " + now_ms();
    return "SELECT kind, lock_key, owner, CASE WHEN " + live + " THEN 1 ELSE 0 END FROM " + t.holders() +
           " ORDER BY kind, lock_key";
}

std::string dialect_sql::waiter_rows(const tables& t) const {
    return "SELECT lock_key, owner, COALESCE(holder, '') FROM " + t.waiters() + " ORDER BY ticket";
}

std::string backend_of(const std::string& url) {
    if (url.rfind("sqlite:", 0) == 0) return "sqlite";
    if (url.rfind("postgres", 0) == 0) return "postgres";
    return "mysql";
}

std::string hot_key(int i) { return "k" + std::to_string(i); }

}  // namespace campaign
