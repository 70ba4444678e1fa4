// sqlock_bench: three workloads on every backend given (docs/benchmarks.md).
//
// cycles: uncontended acquire+release cycles per second, for every mode,
// measured in one run beside
//   - raw SQL: the very statements sqlock sends for that mode (read from
//     sql/<dialect>/*.sql, same tables, same order), sent straight through
//     the driver on one connection (two for select_for_update, like the
//     library), with no sqlock code in the loop;
//   - the server's native lock (pg_try_advisory_lock, GET_LOCK), where there is one.
// Every contender runs single-threaded on its own keys, "bench/<ns>/<i % 1000>",
// so rows are reused the way an application reuses its keys. Measurements are
// repeated --reps times, all contenders interleaved (alternating direction), so
// drift on the machine hits them all alike; the tables show the median and the
// min-max spread.
//
// renewal: one client holding N leases (3 s, renewed every second) while its
// watchdog renews them in batches, beside the same N leases each renewed by
// its own renew statement once a second (Redisson's shape) on one raw
// connection: statements per second, and the database server's CPU time read
// from /proc for the pids given (--postgres-pid, --mysql-pid).
//
// fairness: waiter processes (this program, started again in a hidden
// --waiter mode) contending for one key: fair handoff latency with 1, 8 and
// 64 waiters queued; handoffs per second and Jain's fairness index over the
// processes' acquisition counts, fair against not fair, 16 processes.
//
// Writes markdown to --markdown FILE (cycles), --renewal-markdown FILE
// (renewal), --fairness-markdown FILE (fairness) and to stdout; progress goes
// to stderr.
//
//   sqlock_bench [--postgres URL] [--mysql URL] [--sqlite PATH]
//                [--workload cycles,renewal,fairness] [--seconds N] [--reps R]
//                [--renewal-leases N,N,...] [--renewal-rounds K]
//                [--postgres-pid PID] [--mysql-pid PID]
//                [--handoff-waiters N,N,...] [--handoff-seconds S]
//                [--hot-processes N] [--throughput-seconds S] [--fairness-seconds S]
//                [--markdown FILE] [--renewal-markdown FILE] [--fairness-markdown FILE]
//                [--fairness-log DIR] [--sql-dir DIR]

#include <sqlock/sqlock.hpp>

#ifdef SQLOCK_BENCH_POSTGRES
#include <libpq-fe.h>
#include <pqxx/pqxx>
#endif
#ifdef SQLOCK_BENCH_MYSQL
#include <cppconn/connection.h>
#include <cppconn/driver.h>
#include <cppconn/exception.h>
#include <cppconn/prepared_statement.h>
#include <cppconn/resultset.h>
#include <cppconn/statement.h>
#endif
#ifdef SQLOCK_BENCH_SQLITE
#include <sqlite3.h>
#endif

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <csignal>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

namespace {

// The grant statements' queue parameters for an acquisition that is not fair
// and holds no ticket (src/dialects/dialect.hpp).
constexpr std::int64_t no_ticket = std::numeric_limits<std::int64_t>::max();
constexpr std::int64_t not_fair = std::numeric_limits<std::int64_t>::min();

using clock_type = std::chrono::steady_clock;
using sqlock::mode;

constexpr std::size_t key_space = 1000;         // keys per contender family, reused round robin
constexpr std::uint64_t warmup_cycles = 1000;   // enough to create every key's row once
constexpr double warmup_max_seconds = 2.0;
constexpr std::int64_t lease_ms = 30'000;       // lock_options' default lease

// ---------------------------------------------------------------------------
// Small helpers
// ---------------------------------------------------------------------------

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

// The same substitution the library applies to its embedded SQL.
std::string apply_prefix(std::string_view sql, std::string_view prefix) {
    static constexpr std::string_view from = "sqlock_";
    std::string out;
    std::size_t pos = 0;
    for (auto hit = sql.find(from); hit != std::string_view::npos; hit = sql.find(from, pos)) {
        out.append(sql.substr(pos, hit - pos)).append(prefix);
        pos = hit + from.size();
    }
    out.append(sql.substr(pos));
    return out;
}

// Statement texts of one dialect, prefix applied: sql/<dialect>/<name>.sql.
class sql_texts {
public:
    sql_texts(std::filesystem::path dir, std::string prefix) : dir_(std::move(dir)), prefix_(std::move(prefix)) {}
    std::string get(std::string_view name) const {
        return apply_prefix(read_text(dir_ / (std::string(name) + ".sql")), prefix_);
    }
    bool has(std::string_view name) const { return std::filesystem::exists(dir_ / (std::string(name) + ".sql")); }
    const std::string& prefix() const { return prefix_; }

private:
    std::filesystem::path dir_;
    std::string prefix_;
};

std::vector<std::string> make_keys(std::string_view family) {
    std::vector<std::string> keys;
    keys.reserve(key_space);
    for (std::size_t i = 0; i < key_space; ++i) keys.push_back("bench/" + std::string(family) + "/" + std::to_string(i));
    return keys;
}

// Owner ids for the raw baselines: 32 hex digits like sqlock's, unique per
// cycle, but from a counter (sqlock draws its ids from getrandom(); that cost
// is part of what the comparison shows).
class owner_source {
public:
    owner_source() : salt_(std::random_device{}()) {}
    const std::string& next() {
        char buf[40];
        std::snprintf(buf, sizeof buf, "%016llx%016llx", static_cast<unsigned long long>(salt_),
                      static_cast<unsigned long long>(++n_));
        current_.assign(buf, 32);
        return current_;
    }

private:
    std::uint64_t salt_;
    std::uint64_t n_ = 0;
    std::string current_;
};

// "host:pid:tid", the holder text sqlock stores beside a lease.
std::string holder_text() {
    char host[HOST_NAME_MAX + 1] = {};
    if (gethostname(host, sizeof host - 1) != 0) host[0] = '\0';
    return std::string(host) + ":" + std::to_string(getpid()) + ":" + std::to_string(syscall(SYS_gettid));
}

[[noreturn]] void bench_failure(const std::string& what) {
    // An uncontended bench never loses a race: anything else is a bug.
    throw std::runtime_error(what);
}

// ---------------------------------------------------------------------------
// Contenders and measurement
// ---------------------------------------------------------------------------

enum class kind { sqlock, raw, native };

struct contender {
    std::string backend;
    kind what;
    std::string mode;   // the sqlock mode it stands for; "" for the native lock
    std::string label;  // markdown cell
    std::function<void(std::uint64_t cycle)> cycle;
    std::function<std::uint64_t()> statements;  // statements sent so far
    std::uint64_t next = 0;                     // next cycle number (picks the key)

    std::vector<double> rates;      // cycles/s, one per rep
    std::uint64_t cycles = 0;       // measured cycles, all reps
    std::uint64_t sent = 0;         // statements in measured cycles, all reps
    std::uint64_t switches = 0;     // context switches of the whole process (all threads), all reps
    double cpu_us = 0;              // user + system CPU of the whole process, all reps
    std::vector<double> latencies;  // µs, every measured cycle
};

void warm_up(contender& c) {
    const auto end = clock_type::now() + std::chrono::duration<double>(warmup_max_seconds);
    for (std::uint64_t n = 0; n < warmup_cycles && clock_type::now() < end; ++n) c.cycle(c.next++);
}

// What this process (every thread: sqlock's watchdog too) has used so far.
struct process_usage {
    std::uint64_t switches;  // voluntary + involuntary context switches
    double cpu_us;           // user + system CPU time

    static process_usage now() {
        rusage u{};
        getrusage(RUSAGE_SELF, &u);
        auto us = [](const timeval& t) { return static_cast<double>(t.tv_sec) * 1e6 + static_cast<double>(t.tv_usec); };
        return {static_cast<std::uint64_t>(u.ru_nvcsw + u.ru_nivcsw), us(u.ru_utime) + us(u.ru_stime)};
    }
};

void measure(contender& c, double seconds) {
    const std::uint64_t sent0 = c.statements();
    const process_usage usage0 = process_usage::now();
    const auto start = clock_type::now();
    const auto end = start + std::chrono::duration_cast<clock_type::duration>(std::chrono::duration<double>(seconds));
    auto last = start;
    std::uint64_t n = 0;
    // Grow the latency log before the clock runs, not during a measured cycle.
    if (!c.rates.empty()) c.latencies.reserve(c.latencies.size() + static_cast<std::size_t>(c.rates.back() * seconds * 2));
    do {
        const auto before = clock_type::now();
        c.cycle(c.next++);
        last = clock_type::now();
        c.latencies.push_back(std::chrono::duration<double, std::micro>(last - before).count());
        ++n;
    } while (last < end);
    c.rates.push_back(static_cast<double>(n) / std::chrono::duration<double>(last - start).count());
    c.cycles += n;
    c.sent += c.statements() - sent0;
    const process_usage usage1 = process_usage::now();
    c.switches += usage1.switches - usage0.switches;
    c.cpu_us += usage1.cpu_us - usage0.cpu_us;
}

double median(std::vector<double> v) {
    if (v.empty()) return 0;
    std::sort(v.begin(), v.end());
    const std::size_t m = v.size() / 2;
    return v.size() % 2 ? v[m] : (v[m - 1] + v[m]) / 2;
}

double percentile(std::vector<double>& v, double p) {
    if (v.empty()) return 0;
    auto k = static_cast<std::size_t>(p * static_cast<double>(v.size() - 1));
    std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(k), v.end());
    return v[k];
}

// ---------------------------------------------------------------------------
// Backends
// ---------------------------------------------------------------------------

// One database: a sqlock client on a fresh table prefix, plus a raw driver
// connection (two for select_for_update's pinned transaction) on the same tables.
class backend {
public:
    virtual ~backend() = default;
    virtual std::string title() const = 0;
    virtual std::vector<mode> modes() const = 0;
    // Server facts for the report: one markdown line each.
    virtual std::vector<std::string> facts() = 0;
    // One acquire + release of `key` by the raw statements of mode `m`.
    virtual void raw_cycle(mode m, const std::string& key) = 0;
    // "" when the backend has no native lock to compare with.
    virtual std::string native_label() const { return {}; }
    virtual void native_cycle(const std::string&) {}
    // The renewal baseline: grant `key` to `owner` with the library's grant
    // statements (conditional_update), and renew it with its single-lease
    // renew.sql. raw_renew returns false when no live lease of `owner` matched.
    virtual void raw_grant(const std::string& key, const std::string& owner, std::int64_t lease) = 0;
    virtual bool raw_renew(const std::string& key, const std::string& owner, std::int64_t lease) = 0;
    // Around many raw_grant calls: one transaction where that saves a disk
    // flush per grant (SQLite).
    virtual void raw_bulk_begin() {}
    virtual void raw_bulk_end() {}
    // One writer at a time for the whole database (SQLite).
    virtual bool single_writer() const { return false; }
    std::uint64_t raw_statements() const { return raw_statements_; }
    virtual void drop_tables() = 0;

    void adopt_client(sqlock::client c, std::string url) {
        client_.emplace(std::move(c));
        url_ = std::move(url);
    }
    sqlock::client& client() { return *client_; }
    void close_client() { client_.reset(); }
    // The library URL of this database, for further clients.
    const std::string& url() const { return url_; }
    // An owner id in sqlock's shape, for rows the bench grants itself.
    std::string new_owner() { return owners_.next(); }

protected:
    std::uint64_t raw_statements_ = 0;
    owner_source owners_;
    const std::string holder_ = holder_text();
    const std::string note_;  // sqlock's default note: empty

private:
    std::optional<sqlock::client> client_;
    std::string url_;
};

#ifdef SQLOCK_BENCH_POSTGRES
class postgres_backend final : public backend {
public:
    postgres_backend(const std::string& url, const sql_texts& sql)
        : main_(url), second_(url), prefix_(sql.prefix()) {
        // The library's per-connection setup, with its default timeouts.
        for (auto* c : {&main_, &second_}) {
            pqxx::nontransaction tx(*c);
            tx.exec_params(sql.get("session_setup"), "200", "10000");
        }
        for (const char* name : {"grant", "release_delete", "release_clear", "lock_row", "renew"})
            main_.prepare(name, sql.get(name));
        for (const char* name : {"bump_token", "ensure_row"}) second_.prepare(name, sql.get(name));
        if (sql.has("pin_session")) {
            // What the library runs once on a connection it pins for select_for_update.
            pqxx::nontransaction tx(main_);
            tx.exec_params(sql.get("pin_session"), std::to_string(lease_ms));
        }
        main_.prepare("native_lock", "SELECT pg_try_advisory_lock(hashtext($1))");
        main_.prepare("native_unlock", "SELECT pg_advisory_unlock(hashtext($1))");
    }

    std::string title() const override { return "PostgreSQL"; }
    std::vector<mode> modes() const override {
        return {mode::unique_insert, mode::conditional_update, mode::select_for_update};
    }

    std::vector<std::string> facts() override {
        pqxx::nontransaction tx(main_);
        auto one = [&](const std::string& q) { return std::string(tx.exec(q)[0][0].c_str()); };
        const std::string addr = one("SELECT coalesce(host(inet_server_addr()), 'unix socket')");
        const int libpq = PQlibVersion();
        return {
            "Server: " + one("SELECT version()"),
            "Settings: fsync=" + one("SHOW fsync") + ", synchronous_commit=" +
                one("SHOW synchronous_commit") + ", full_page_writes=" + one("SHOW full_page_writes") +
                ", wal_sync_method=" + one("SHOW wal_sync_method"),
            "Connection: " + (addr == "unix socket" ? addr : "TCP to " + addr) + ", libpqxx " PQXX_VERSION
                ", libpq " + std::to_string(libpq / 10000) + "." + std::to_string(libpq % 10000),
        };
    }

    void raw_cycle(mode m, const std::string& key) override {
        if (m == mode::select_for_update) return row_lock_cycle(key);
        const std::string& owner = owners_.next();
        pqxx::nontransaction tx(main_);
        ++raw_statements_;
        auto granted = tx.exec_prepared("grant", key, owner, std::string(sqlock::to_string(m)), lease_ms, holder_, note_,
                                        no_ticket, not_fair);
        if (granted[0][0].is_null()) bench_failure("raw grant found '" + key + "' held");
        ++raw_statements_;
        auto released = tx.exec_prepared(m == mode::unique_insert ? "release_delete" : "release_clear", key, owner);
        if (released[0][0].as<std::int64_t>() != 1) bench_failure("raw release did not find '" + key + "'");
    }

    void raw_grant(const std::string& key, const std::string& owner, std::int64_t lease) override {
        pqxx::nontransaction tx(main_);
        ++raw_statements_;
        auto granted = tx.exec_prepared("grant", key, owner, std::string(sqlock::to_string(mode::conditional_update)),
                                        lease, holder_, note_, no_ticket, not_fair);
        if (granted[0][0].is_null()) bench_failure("raw grant found '" + key + "' held");
    }

    bool raw_renew(const std::string& key, const std::string& owner, std::int64_t lease) override {
        pqxx::nontransaction tx(main_);
        ++raw_statements_;
        return tx.exec_prepared("renew", key, owner, lease).affected_rows() == 1;
    }

    std::string native_label() const override { return "`pg_try_advisory_lock` + `pg_advisory_unlock`"; }
    void native_cycle(const std::string& key) override {
        pqxx::nontransaction tx(main_);
        raw_statements_ += 2;
        if (!tx.exec_prepared("native_lock", key)[0][0].as<bool>()) bench_failure("advisory lock busy");
        if (!tx.exec_prepared("native_unlock", key)[0][0].as<bool>()) bench_failure("advisory unlock failed");
    }

    void drop_tables() override {
        pqxx::nontransaction tx(main_);
        tx.exec("DROP TABLE IF EXISTS " + prefix_ + "locks, " + prefix_ + "fences, " + prefix_ + "waiters, " + prefix_ +
                "schema_version");
    }

private:
    // select_for_update: BEGIN; lock the row without waiting (creating it
    // first if missing, as the library does); bump the fence on the second
    // connection; ROLLBACK, which is the release.
    void row_lock_cycle(const std::string& key) {
        for (int attempt = 0; attempt < 2; ++attempt) {
            pqxx::work held(main_);
            ++raw_statements_;  // BEGIN
            ++raw_statements_;
            auto row = held.exec_prepared("lock_row", key, no_ticket, not_fair);
            if (row.empty()) {
                ++raw_statements_;  // ROLLBACK
                held.abort();
                pqxx::nontransaction tx(second_);
                ++raw_statements_;
                tx.exec_prepared("ensure_row", key);
                continue;
            }
            if (!row[0][0].as<bool>()) bench_failure("raw lock_row found '" + key + "' held");
            {
                pqxx::nontransaction tx(second_);
                ++raw_statements_;
                tx.exec_prepared("bump_token", key)[0][0].as<std::int64_t>();
            }
            ++raw_statements_;  // ROLLBACK
            held.abort();
            return;
        }
        bench_failure("raw ensure_row did not create '" + key + "'");
    }

    pqxx::connection main_;
    pqxx::connection second_;  // select_for_update's fence bump, outside the held transaction
    std::string prefix_;
};
#endif

#ifdef SQLOCK_BENCH_MYSQL
struct mysql_url {
    std::string host;  // tcp://host:port or unix://path, for the connector
    std::string where;  // for the report
    std::string user, password, database;
};

std::string percent_decode(std::string_view s) {
    std::string out;
    for (std::size_t i = 0; i < s.size(); ++i) {
        if (s[i] == '%' && i + 2 < s.size()) {
            out.push_back(static_cast<char>(std::stoi(std::string(s.substr(i + 1, 2)), nullptr, 16)));
            i += 2;
        } else {
            out.push_back(s[i]);
        }
    }
    return out;
}

// mysql://user:pass@host:port/db or mysql://user:pass@localhost/db?socket=/path
mysql_url parse_mysql_url(std::string_view url) {
    for (std::string_view scheme : {"mysql://", "mariadb://"})
        if (url.starts_with(scheme)) url.remove_prefix(scheme.size());
    mysql_url u;
    std::string socket;
    if (auto q = url.find('?'); q != std::string_view::npos) {
        std::string_view query = url.substr(q + 1);
        url = url.substr(0, q);
        while (!query.empty()) {
            auto amp = query.find('&');
            std::string_view pair = query.substr(0, amp);
            if (pair.starts_with("socket=")) socket = percent_decode(pair.substr(7));
            query = amp == std::string_view::npos ? std::string_view() : query.substr(amp + 1);
        }
    }
    if (auto slash = url.find('/'); slash != std::string_view::npos) {
        u.database = percent_decode(url.substr(slash + 1));
        url = url.substr(0, slash);
    }
    if (auto at = url.rfind('@'); at != std::string_view::npos) {
        std::string_view userinfo = url.substr(0, at);
        url = url.substr(at + 1);
        auto colon = userinfo.find(':');
        u.user = percent_decode(userinfo.substr(0, colon));
        if (colon != std::string_view::npos) u.password = percent_decode(userinfo.substr(colon + 1));
    }
    std::string host(url), port = "3306";
    if (auto colon = url.rfind(':'); colon != std::string_view::npos) {
        host = url.substr(0, colon);
        port = url.substr(colon + 1);
    }
    u.host = socket.empty() ? "tcp://" + host + ":" + port : "unix://" + socket;
    u.where = socket.empty() ? "TCP to " + host : "unix socket";
    return u;
}

class mysql_backend final : public backend {
public:
    mysql_backend(const std::string& url, const sql_texts& sql) : url_(parse_mysql_url(url)), prefix_(sql.prefix()) {
        main_ = connect(sql);
        second_ = connect(sql);
        for (const char* name :
             {"grant_lock", "grant_update", "grant_insert", "bump_token", "release_delete", "release_clear", "lock_row",
              "renew"})
            main_.prepared[name].reset(main_.conn->prepareStatement(sql.get(name)));
        for (const char* name : {"bump_token", "ensure_row"})
            second_.prepared[name].reset(second_.conn->prepareStatement(sql.get(name)));
        if (sql.has("pin_session")) {
            // What the library runs once on a connection it pins for select_for_update.
            std::unique_ptr<sql::PreparedStatement> pin(main_.conn->prepareStatement(sql.get("pin_session")));
            pin->setInt(1, static_cast<int>(lease_ms / 1000));
            pin->execute();
        }
        main_.prepared["native_lock"].reset(main_.conn->prepareStatement("SELECT GET_LOCK(?, 0)"));
        main_.prepared["native_unlock"].reset(main_.conn->prepareStatement("SELECT RELEASE_LOCK(?)"));
    }

    std::string title() const override { return "MariaDB"; }
    std::vector<mode> modes() const override {
        return {mode::unique_insert, mode::conditional_update, mode::select_for_update};
    }

    std::vector<std::string> facts() override {
        std::unique_ptr<sql::ResultSet> rs(main_.stmt->executeQuery(
            "SELECT VERSION(), @@version_comment, @@innodb_flush_log_at_trx_commit, @@innodb_doublewrite, "
            "@@log_bin, @@sync_binlog, @@innodb_buffer_pool_size"));
        rs->next();
        auto col = [&](int i) { return std::string(rs->getString(static_cast<std::uint32_t>(i)).asStdString()); };
        sql::Driver* d = get_driver_instance();
        return {
            "Server: MariaDB " + col(1) + " (" + col(2) + ")",
            "Settings: innodb_flush_log_at_trx_commit=" + col(3) + ", innodb_doublewrite=" + col(4) +
                ", log_bin=" + col(5) + ", sync_binlog=" + col(6) + ", innodb_buffer_pool_size=" +
                std::to_string(std::stoll(col(7)) >> 20) + " MiB",
            "Connection: " + url_.where + ", Connector/C++ " + std::to_string(d->getMajorVersion()) + "." +
                std::to_string(d->getMinorVersion()) + "." + std::to_string(d->getPatchVersion()),
        };
    }

    // Lease modes: MariaDB has no data-modifying CTE and no UPDATE ... RETURNING,
    // so the grant is START TRANSACTION; lock the row NOWAIT; UPDATE or INSERT;
    // bump the fence (INSERT ... RETURNING the token); COMMIT. Then the release.
    void raw_cycle(mode m, const std::string& key) override {
        if (m == mode::select_for_update) return row_lock_cycle(key);
        const std::string& owner = owners_.next();
        grant(m, key, owner, lease_ms);
        auto& release = ps(main_, m == mode::unique_insert ? "release_delete" : "release_clear");
        release.setString(1, key);
        release.setString(2, owner);
        ++raw_statements_;
        if (release.executeUpdate() != 1) bench_failure("raw release did not find '" + key + "'");
    }

    void raw_grant(const std::string& key, const std::string& owner, std::int64_t lease) override {
        grant(mode::conditional_update, key, owner, lease);
    }

    bool raw_renew(const std::string& key, const std::string& owner, std::int64_t lease) override {
        auto& renew = ps(main_, "renew");
        renew.setInt64(1, lease);
        renew.setString(2, key);
        renew.setString(3, owner);
        ++raw_statements_;
        return renew.executeUpdate() == 1;  // CLIENT_FOUND_ROWS: rows matched
    }

    std::string native_label() const override { return "`GET_LOCK(key, 0)` + `RELEASE_LOCK`"; }
    void native_cycle(const std::string& key) override {
        for (const char* name : {"native_lock", "native_unlock"}) {
            auto& s = ps(main_, name);
            s.setString(1, key);
            ++raw_statements_;
            std::unique_ptr<sql::ResultSet> rs(s.executeQuery());
            if (!rs->next() || rs->getInt(1) != 1) bench_failure(std::string(name) + " did not return 1");
        }
    }

    void drop_tables() override {
        main_.stmt->execute("DROP TABLE IF EXISTS " + prefix_ + "locks, " + prefix_ + "fences, " + prefix_ +
                            "waiters, " + prefix_ + "schema_version");
    }

private:
    struct connection {
        std::unique_ptr<sql::Connection> conn;
        std::unique_ptr<sql::Statement> stmt;
        std::map<std::string, std::unique_ptr<sql::PreparedStatement>, std::less<>> prepared;
    };

    // The lease modes' grant, committed: START TRANSACTION; lock the row
    // NOWAIT; UPDATE or INSERT; bump the fence; COMMIT.
    void grant(mode m, const std::string& key, const std::string& owner, std::int64_t lease) {
        exec(main_, "START TRANSACTION");
        auto& lock = ps(main_, "grant_lock");
        lock.setString(1, owner);
        lock.setString(2, key);
        lock.setInt64(3, not_fair);
        lock.setInt64(4, not_fair);
        lock.setInt64(5, no_ticket);
        lock.setString(6, key);
        ++raw_statements_;
        std::unique_ptr<sql::ResultSet> rs(lock.executeQuery());
        rs->next();  // one row: present, free, remaining, waiter ahead
        if (rs->getBoolean(1)) {
            if (!rs->getBoolean(2) || rs->getBoolean(4)) bench_failure("raw grant_lock found '" + key + "' held");
            auto& update = ps(main_, "grant_update");
            update.setString(1, owner);
            update.setString(2, sqlock::to_string(m));
            update.setInt64(3, lease);
            update.setString(4, holder_);
            update.setString(5, note_);
            update.setString(6, key);
            ++raw_statements_;
            update.executeUpdate();
        } else {
            auto& insert = ps(main_, "grant_insert");
            insert.setString(1, key);
            insert.setString(2, owner);
            insert.setString(3, sqlock::to_string(m));
            insert.setInt64(4, lease);
            insert.setString(5, holder_);
            insert.setString(6, note_);
            ++raw_statements_;
            insert.executeUpdate();
        }
        bump(main_, key);
        exec(main_, "COMMIT");
    }

    // Same connect options and session setup as the library.
    connection connect(const sql_texts& sql) {
        sql::ConnectOptionsMap opts;
        opts["hostName"] = sql::SQLString(url_.host);
        opts["userName"] = sql::SQLString(url_.user);
        opts["password"] = sql::SQLString(url_.password);
        opts["schema"] = sql::SQLString(url_.database);
        opts["OPT_CHARSET_NAME"] = sql::SQLString("utf8mb4");
        opts["CLIENT_FOUND_ROWS"] = true;
        connection c;
        c.conn.reset(get_driver_instance()->connect(opts));
        c.stmt.reset(c.conn->createStatement());
        std::unique_ptr<sql::PreparedStatement> setup(c.conn->prepareStatement(sql.get("session_setup")));
        setup->setInt(1, 1);
        setup->setDouble(2, 10.0);
        setup->setInt(3, 10);
        setup->execute();
        c.stmt->execute(sql.get("session_isolation"));
        return c;
    }

    static sql::PreparedStatement& ps(connection& c, std::string_view name) { return *c.prepared.find(name)->second; }

    void exec(connection& c, const char* text) {
        ++raw_statements_;
        c.stmt->execute(text);
    }

    // INSERT ... ON DUPLICATE KEY UPDATE ... RETURNING: bumps and reads the token.
    void bump(connection& c, const std::string& key) {
        auto& b = ps(c, "bump_token");
        b.setString(1, key);
        ++raw_statements_;
        std::unique_ptr<sql::ResultSet> rs(b.executeQuery());
        if (!rs->next()) bench_failure("raw fence bump returned no token for '" + key + "'");
        rs->getInt64(1);
    }

    // select_for_update: START TRANSACTION; lock the row NOWAIT (creating it
    // first if missing, as the library does); bump the fence on the second
    // connection; ROLLBACK, which is the release.
    void row_lock_cycle(const std::string& key) {
        for (int attempt = 0; attempt < 2; ++attempt) {
            exec(main_, "START TRANSACTION");
            auto& lock = ps(main_, "lock_row");
            lock.setString(1, key);
            lock.setInt64(2, not_fair);
            lock.setInt64(3, not_fair);
            lock.setInt64(4, no_ticket);
            lock.setString(5, key);
            ++raw_statements_;
            std::unique_ptr<sql::ResultSet> rs(lock.executeQuery());
            if (!rs->next()) {
                exec(main_, "ROLLBACK");
                auto& ensure = ps(second_, "ensure_row");
                ensure.setString(1, key);
                ++raw_statements_;
                ensure.executeUpdate();
                continue;
            }
            if (!rs->getBoolean(1)) bench_failure("raw lock_row found '" + key + "' held");
            bump(second_, key);
            exec(main_, "ROLLBACK");
            return;
        }
        bench_failure("raw ensure_row did not create '" + key + "'");
    }

    mysql_url url_;
    std::string prefix_;
    connection main_;
    connection second_;
};
#endif

#ifdef SQLOCK_BENCH_SQLITE
// The statements in sql/sqlite/ read the clock through <prefix>now_ms(), which
// every connection must register: the library's reads the real-time clock by
// raw system call, and so does this one, at the same cost.
void now_ms(sqlite3_context* context, int, sqlite3_value**) {
    timespec ts{};
    syscall(SYS_clock_gettime, CLOCK_REALTIME, &ts);
    sqlite3_result_int64(context, static_cast<sqlite3_int64>(ts.tv_sec) * 1000 + ts.tv_nsec / 1'000'000);
}

std::string filesystem_of(const std::filesystem::path& file) {
    struct statfs fs {};
    if (statfs(file.parent_path().empty() ? "." : file.parent_path().c_str(), &fs) != 0) return "unknown";
    switch (static_cast<unsigned long>(fs.f_type)) {
        case 0xEF53: return "ext2/3/4";
        case 0x01021994: return "tmpfs";
        case 0x794c7630: return "overlayfs";
        case 0x58465342: return "xfs";
        case 0x9123683e: return "btrfs";
        case 0x2fc12fc1: return "zfs";
        default: return "f_type " + std::to_string(fs.f_type);
    }
}

class sqlite_backend final : public backend {
public:
    sqlite_backend(const std::string& path, const sql_texts& sql) : path_(path), prefix_(sql.prefix()) {
        // Same flags and pragmas as the library's connections.
        if (sqlite3_open_v2(path.c_str(), &db_, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX,
                            nullptr) != SQLITE_OK)
            throw std::runtime_error("cannot open sqlite database '" + path + "'");
        sqlite3_busy_timeout(db_, 10'000);
        const std::string now_fn = prefix_ + "now_ms";
        sqlite3_create_function_v2(db_, now_fn.c_str(), 0, SQLITE_UTF8, nullptr, now_ms, nullptr, nullptr, nullptr);
        exec("PRAGMA journal_mode=WAL");
        exec("PRAGMA foreign_keys=ON");
        for (const char* name : {"grant", "release_delete", "release_clear", "renew"}) {
            const std::string text = sql.get(name);
            sqlite3_stmt* st = nullptr;
            if (sqlite3_prepare_v3(db_, text.c_str(), static_cast<int>(text.size()), SQLITE_PREPARE_PERSISTENT, &st,
                                   nullptr) != SQLITE_OK)
                throw std::runtime_error(std::string("preparing ") + name + ": " + sqlite3_errmsg(db_));
            statements_[name] = st;
        }
    }
    ~sqlite_backend() override {
        for (auto& [name, st] : statements_) sqlite3_finalize(st);
        sqlite3_close_v2(db_);
    }

    std::string title() const override { return "SQLite"; }
    std::vector<mode> modes() const override { return {mode::unique_insert, mode::conditional_update}; }

    std::vector<std::string> facts() override {
        static const char* const sync_names[] = {"OFF", "NORMAL", "FULL", "EXTRA"};
        const auto sync = pragma("synchronous");
        return {
            std::string("Library: SQLite ") + sqlite3_libversion() + ", in process",
            "Settings: journal_mode=" + pragma("journal_mode") + ", synchronous=" +
                (sync.size() == 1 && sync[0] >= '0' && sync[0] <= '3' ? sync_names[sync[0] - '0'] : sync) +
                " (synchronous is this build's default: the library leaves it alone)",
            "File system of the database file: " + filesystem_of(path_),
        };
    }

    // One statement grants (the upsert, with triggers bumping the fence), one releases.
    void raw_cycle(mode m, const std::string& key) override {
        const std::string& owner = owners_.next();
        const char* mode_name = sqlock::to_string(m);
        sqlite3_stmt* grant = statements_.at("grant");
        bind(grant, 1, key);
        bind(grant, 2, owner);
        bind(grant, 3, mode_name);
        sqlite3_bind_int64(grant, 4, lease_ms);
        bind(grant, 5, holder_);
        bind(grant, 6, note_);
        sqlite3_bind_int64(grant, 7, no_ticket);
        sqlite3_bind_int64(grant, 8, not_fair);
        ++raw_statements_;
        if (sqlite3_step(grant) != SQLITE_ROW) fail("raw grant did not return a token for '" + key + "'");
        while (sqlite3_step(grant) == SQLITE_ROW) {
        }
        sqlite3_reset(grant);
        sqlite3_clear_bindings(grant);

        sqlite3_stmt* release = statements_.at(m == mode::unique_insert ? "release_delete" : "release_clear");
        bind(release, 1, key);
        bind(release, 2, owner);
        ++raw_statements_;
        if (sqlite3_step(release) != SQLITE_DONE) fail("raw release failed");
        const int changed = sqlite3_changes(db_);
        sqlite3_reset(release);
        sqlite3_clear_bindings(release);
        if (changed != 1) bench_failure("raw release did not find '" + key + "'");
    }

    void raw_grant(const std::string& key, const std::string& owner, std::int64_t lease) override {
        sqlite3_stmt* grant = statements_.at("grant");
        bind(grant, 1, key);
        bind(grant, 2, owner);
        bind(grant, 3, sqlock::to_string(mode::conditional_update));
        sqlite3_bind_int64(grant, 4, lease);
        bind(grant, 5, holder_);
        bind(grant, 6, note_);
        sqlite3_bind_int64(grant, 7, no_ticket);
        sqlite3_bind_int64(grant, 8, not_fair);
        ++raw_statements_;
        if (sqlite3_step(grant) != SQLITE_ROW) fail("raw grant did not return a token for '" + key + "'");
        while (sqlite3_step(grant) == SQLITE_ROW) {
        }
        sqlite3_reset(grant);
        sqlite3_clear_bindings(grant);
    }

    void raw_bulk_begin() override { exec("BEGIN IMMEDIATE"); }
    void raw_bulk_end() override { exec("COMMIT"); }
    bool single_writer() const override { return true; }

    bool raw_renew(const std::string& key, const std::string& owner, std::int64_t lease) override {
        sqlite3_stmt* renew = statements_.at("renew");
        bind(renew, 1, key);
        bind(renew, 2, owner);
        sqlite3_bind_int64(renew, 3, lease);
        ++raw_statements_;
        if (sqlite3_step(renew) != SQLITE_DONE) fail("raw renew failed");
        const int changed = sqlite3_changes(db_);
        sqlite3_reset(renew);
        sqlite3_clear_bindings(renew);
        return changed == 1;
    }

    void drop_tables() override {
        for (auto& [name, st] : statements_) sqlite3_finalize(st);
        statements_.clear();
        for (const char* table : {"locks", "fences", "waiters", "schema_version"})
            exec("DROP TABLE IF EXISTS " + prefix_ + table);
    }

private:
    void bind(sqlite3_stmt* st, int i, std::string_view v) {
        sqlite3_bind_text(st, i, v.data(), static_cast<int>(v.size()), SQLITE_STATIC);
    }
    [[noreturn]] void fail(const std::string& what) { bench_failure(what + ": " + sqlite3_errmsg(db_)); }
    void exec(const std::string& text) {
        if (sqlite3_exec(db_, text.c_str(), nullptr, nullptr, nullptr) != SQLITE_OK) fail(text);
    }
    std::string pragma(const std::string& name) {
        sqlite3_stmt* st = nullptr;
        std::string out;
        if (sqlite3_prepare_v2(db_, ("PRAGMA " + name).c_str(), -1, &st, nullptr) == SQLITE_OK &&
            sqlite3_step(st) == SQLITE_ROW)
            out = reinterpret_cast<const char*>(sqlite3_column_text(st, 0));
        sqlite3_finalize(st);
        return out;
    }

    std::filesystem::path path_;
    std::string prefix_;
    sqlite3* db_ = nullptr;
    std::map<std::string, sqlite3_stmt*, std::less<>> statements_;
};
#endif

// ---------------------------------------------------------------------------
// Machine facts
// ---------------------------------------------------------------------------

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

std::string load_average() {
    std::ifstream in("/proc/loadavg");
    std::string one, five, fifteen;
    in >> one >> five >> fifteen;
    return one + " / " + five + " / " + fifteen;
}

struct machine {
    std::string cpu, ram, os, kernel, load_start, compiler;
    int nproc = 0;
    bool virtualized = false;

    static machine gather() {
        machine m;
        m.cpu = first_field("/proc/cpuinfo", "model name");
        cpu_set_t set;
        CPU_ZERO(&set);
        m.nproc = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set)
                                                              : static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN));
        m.virtualized = first_field("/proc/cpuinfo", "flags").find(" hypervisor") != std::string::npos;
        const std::string mem = first_field("/proc/meminfo", "MemTotal");
        m.ram = format("%.1f GiB", std::stod(mem) / (1024.0 * 1024.0));
        m.os = first_field("/etc/os-release", "PRETTY_NAME");
        utsname u{};
        if (uname(&u) == 0) m.kernel = std::string(u.sysname) + " " + u.release + " " + u.machine;
        m.load_start = load_average();
#if defined(__clang__)
        m.compiler = "clang " __clang_version__;
#elif defined(__GNUC__)
        m.compiler = "g++ " __VERSION__;
#endif
        return m;
    }
};

std::string utc_now() {
    std::time_t t = std::time(nullptr);
    char buf[32];
    std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M UTC", std::gmtime(&t));
    return buf;
}

// ---------------------------------------------------------------------------
// Report
// ---------------------------------------------------------------------------

std::string rate_text(double r) { return format(r >= 100 ? "%.0f" : "%.1f", r); }
std::string micros_text(double us) { return format(us >= 10 ? "%.0f" : "%.1f", us); }

struct options {
    std::string postgres, mysql, sqlite, markdown;
    double seconds = 3;
    int reps = 3;
    std::string sql_dir = SQLOCK_BENCH_SQL_DIR;
    bool cycles = true, renewal = true, fairness = true;  // --workload
    std::vector<std::size_t> renewal_leases{100, 1000, 10000};
    int renewal_rounds = 2;
    int postgres_pid = 0, mysql_pid = 0;  // 0: the server's CPU is not measured
    std::string renewal_markdown;
    // fairness: waiter counts of the handoff-latency runs, processes of the
    // hot-key runs, and the window of each kind of run.
    std::vector<int> handoff_waiters{1, 8, 64};
    int hot_processes = 16;
    double handoff_seconds = 10, throughput_seconds = 10, fairness_seconds = 60;
    std::string fairness_markdown;
    std::string fairness_log;  // directory for every fairness run's raw records
};

// The machine rows of a run table.
std::string machine_rows(const machine& m) {
    std::ostringstream md;
    md << "| CPU | " << m.cpu << "; nproc " << m.nproc << (m.virtualized ? " (virtual machine)" : "") << " |\n"
       << "| RAM | " << m.ram << " |\n"
       << "| OS | " << m.os << ", " << m.kernel << " |\n"
       << "| Build | " << m.compiler << ", CMAKE_BUILD_TYPE=" << SQLOCK_BENCH_BUILD_TYPE << " |\n";
    return md.str();
}

std::string render(const machine& m, const options& opt, const std::string& load_end,
                   const std::vector<std::unique_ptr<backend>>& backends,
                   const std::vector<std::vector<std::string>>& facts, std::vector<contender>& all) {
    std::ostringstream md;
    md << "### Machine and run\n\n"
       << "| | |\n|---|---|\n"
       << machine_rows(m)
       << "| Load average (1/5/15 min) | " << m.load_start << " at start, " << load_end << " at end |\n"
       << "| Run | " << utc_now() << "; " << opt.reps << " reps × " << format("%g", opt.seconds)
       << " s per contender, interleaved; warm-up " << warmup_cycles << " cycles (at most "
       << format("%g", warmup_max_seconds) << " s); one thread; " << key_space
       << " keys per contender family; lease " << lease_ms / 1000 << " s |\n\n";

    for (std::size_t b = 0; b < backends.size(); ++b) {
        const std::string title = backends[b]->title();
        md << "### " << title << "\n\n";
        for (const auto& f : facts[b]) md << "- " << f << "\n";
        md << "\n| contender | cycles/s, median (min–max) | p50 µs | p99 µs | statements/cycle "
              "| client CPU µs/cycle | context switches/cycle | ÷ raw SQL | ÷ native lock |\n"
              "|---|---:|---:|---:|---:|---:|---:|---:|---:|\n";
        std::vector<contender*> rows;
        for (auto& c : all)
            if (c.backend == title) rows.push_back(&c);
        const contender* native = nullptr;
        for (auto* c : rows)
            if (c->what == kind::native) native = c;
        for (auto* c : rows) {
            const double med = median(c->rates);
            const auto [lo, hi] = std::minmax_element(c->rates.begin(), c->rates.end());
            std::string vs_raw = "—";
            if (c->what == kind::raw) vs_raw = "(baseline)";
            if (c->what == kind::sqlock)
                for (auto* r : rows)
                    if (r->what == kind::raw && r->mode == c->mode) vs_raw = format("%.2f", med / median(r->rates));
            std::string vs_native = "—";
            if (native) vs_native = c == native ? "(baseline)" : format("%.2f", med / median(native->rates));
            md << "| " << c->label << " | " << rate_text(med) << " (" << rate_text(*lo) << "–" << rate_text(*hi)
               << ") | " << micros_text(percentile(c->latencies, 0.50)) << " | "
               << micros_text(percentile(c->latencies, 0.99)) << " | "
               << format("%.2f", static_cast<double>(c->sent) / static_cast<double>(c->cycles)) << " | "
               << format("%.1f", c->cpu_us / static_cast<double>(c->cycles)) << " | "
               << format("%.2f", static_cast<double>(c->switches) / static_cast<double>(c->cycles)) << " | " << vs_raw
               << " | " << vs_native << " |\n";
        }
        md << "\n";
    }
    md << "Ratios divide median cycles/s: below 1 is slower than the baseline. Statements per cycle "
          "count what each contender sends in its measured cycles; for sqlock it is the client's own "
          "`stats().statements` counter. Client CPU and context switches are the whole bench "
          "process's (every thread, sqlock's watchdog included; from `getrusage`) per measured "
          "cycle; the database's own work is not in them, except SQLite's, which runs in process. "
          "A blocking round trip costs about one context switch.\n";
    return md.str();
}

// ---------------------------------------------------------------------------
// Renewal: the watchdog's batched renewal against one statement per lease
// ---------------------------------------------------------------------------

// Leases of 3 s, which the watchdog renews every second (a third of the lease,
// the default), so a window of K rounds lasts K seconds.
constexpr std::chrono::milliseconds renewal_lease{3000};
constexpr std::chrono::milliseconds renewal_interval{1000};
// The per-lease baseline's rows are granted, and renewed, for an hour, so they
// stay owned across windows whatever the baseline's pace. The statement costs
// the database the same whatever length it writes.
constexpr std::int64_t per_lease_ms = 3'600'000;

double seconds_of(clock_type::duration d) { return std::chrono::duration<double>(d).count(); }

double thread_cpu_seconds() {
    timespec ts{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

// Fields of /proc/<pid>/stat after "(comm)": [0] is field 3 (state).
std::vector<std::string> proc_stat_fields(int pid) {
    std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
    std::string line;
    std::getline(in, line);
    std::vector<std::string> out;
    const auto close = line.rfind(')');
    if (close == std::string::npos) return out;
    std::istringstream rest(line.substr(close + 1));
    for (std::string f; rest >> f;) out.push_back(f);
    return out;
}

// CPU time a database server uses. Read from each process's CPU-time clock
// (clock_getcpuclockid: every thread of the process, in nanoseconds), which is
// the utime + stime of /proc/<pid>/stat without its 10 ms ticks: a small
// batch costs the server less than one tick per window.
class server_cpu {
public:
    // PostgreSQL: the postmaster and every process it forked (a backend per
    // connection, the WAL writer, the checkpointer ...). MariaDB: mariadbd,
    // whose connections are threads.
    server_cpu(int pid, bool with_children) : root_(pid), children_(with_children) {
        if (!std::filesystem::exists("/proc/" + std::to_string(pid)))
            throw std::runtime_error("no process " + std::to_string(pid) + " to read the server's CPU time from");
        std::ifstream comm("/proc/" + std::to_string(pid) + "/comm");
        std::getline(comm, name_);
    }

    struct sample {
        std::map<int, double> seconds;  // per live process
        double reaped = 0;              // children that exited and were waited for, whole lives
    };

    sample take() const {
        sample s;
        read(root_, s);
        if (children_) {
            for (int child : children()) read(child, s);
            const auto f = proc_stat_fields(root_);
            if (f.size() > 14) s.reaped = (std::stod(f[13]) + std::stod(f[14])) / static_cast<double>(sysconf(_SC_CLK_TCK));
        }
        return s;
    }

    // CPU seconds between two samples. A process that exited in between
    // counts with its whole life (from the reaped total) minus what it had
    // used before the first sample.
    static double between(const sample& a, const sample& b) {
        double total = b.reaped - a.reaped;
        for (const auto& [pid, t] : b.seconds) {
            auto before = a.seconds.find(pid);
            total += t - (before == a.seconds.end() ? 0.0 : before->second);
        }
        for (const auto& [pid, t] : a.seconds)
            if (!b.seconds.contains(pid)) total -= t;
        return std::max(total, 0.0);
    }

    std::string describe() const {
        return "`" + name_ + "` pid " + std::to_string(root_) +
               (children_ ? " and every process whose parent it is" : ", all threads");
    }

private:
    static void read(int pid, sample& s) {
        clockid_t clock{};
        timespec ts{};
        if (clock_getcpuclockid(pid, &clock) != 0 || clock_gettime(clock, &ts) != 0) return;  // gone
        s.seconds[pid] = static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
    }

    std::vector<int> children() const {
        std::vector<int> out;
        // The kernel's list when it keeps one (CONFIG_PROC_CHILDREN), else a scan of /proc.
        std::ifstream list("/proc/" + std::to_string(root_) + "/task/" + std::to_string(root_) + "/children");
        if (list) {
            for (int pid; list >> pid;) out.push_back(pid);
            return out;
        }
        for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
            const std::string name = entry.path().filename().string();
            if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
            const auto f = proc_stat_fields(std::stoi(name));
            if (f.size() > 1 && f[1] == std::to_string(root_)) out.push_back(std::stoi(name));
        }
        return out;
    }

    int root_;
    bool children_;
    std::string name_;
};

// One window's counters, taken at its start and at its end.
struct renewal_sample {
    clock_type::time_point at;
    std::uint64_t statements = 0;
    std::uint64_t renewals = 0;
    std::uint64_t rounds = 0;
    std::uint64_t troubles = 0;  // sqlock: leases lost + renewal failures
    double process_cpu = 0;      // seconds, every thread of the bench
    double main_cpu = 0;         // seconds, the calling (main) thread
    std::optional<server_cpu::sample> server;
};

struct renewal_window {
    double seconds = 0;
    double statements = 0;
    double renewals = 0;
    double rounds = 0;
    double troubles = 0;
    double client_cpu = 0;             // seconds
    std::optional<double> server_cpu;  // seconds
    double worst_lag = 0;              // seconds behind schedule, per-lease baseline only
};

// Reading the server's CPU costs the bench a little: at a window's start it is
// read before the bench's own counters, at its end after them.
enum class sample_at { start, end };

renewal_sample take_sample(const server_cpu* probe, sample_at when,
                           const std::function<void(renewal_sample&)>& counters) {
    renewal_sample s;
    if (probe && when == sample_at::start) s.server = probe->take();
    s.at = clock_type::now();
    counters(s);
    s.process_cpu = process_usage::now().cpu_us * 1e-6;
    s.main_cpu = thread_cpu_seconds();
    if (probe && when == sample_at::end) s.server = probe->take();
    return s;
}

// `exclude_main`: the main thread only waited (sqlock's watchdog did the work).
renewal_window window_between(const renewal_sample& a, const renewal_sample& b, bool exclude_main) {
    renewal_window w;
    w.seconds = seconds_of(b.at - a.at);
    w.statements = static_cast<double>(b.statements - a.statements);
    w.renewals = static_cast<double>(b.renewals - a.renewals);
    w.rounds = static_cast<double>(b.rounds - a.rounds);
    w.troubles = static_cast<double>(b.troubles - a.troubles);
    w.client_cpu = (b.process_cpu - a.process_cpu) - (exclude_main ? b.main_cpu - a.main_cpu : 0.0);
    if (a.server && b.server) w.server_cpu = server_cpu::between(*a.server, *b.server);
    return w;
}

// Progress on stderr, after the window.
void log_window(const std::string& what, int rep, int reps, const renewal_window& w) {
    std::cerr << "sqlock_bench: renewal  " << what << ", window " << rep + 1 << "/" << reps << ": "
              << format("%.3f", w.seconds) << " s, " << format("%.0f", w.rounds) << " rounds, "
              << format("%.0f", w.statements) << " statements, " << format("%.0f", w.renewals) << " renewals, "
              << format("%.0f", w.troubles) << " lost/failed, client CPU " << format("%.1f", w.client_cpu * 1e3)
              << " ms, server CPU " << (w.server_cpu ? format("%.1f", *w.server_cpu * 1e3) + " ms" : "-")
              << ", worst lag " << format("%.0f", w.worst_lag * 1e3) << " ms\n";
}

struct renewal_row {
    std::size_t leases = 0;
    std::vector<renewal_window> batched, per_lease;
};

struct renewal_report {
    std::string backend;
    std::string cpu_source;  // "" when the server's CPU was not measured
    double idle_cpu_ms = 0;  // the server's CPU per second while nothing is renewed
    bool in_process = false;  // SQLite: the database's work is the bench's CPU
    std::vector<std::string> facts;  // server facts, when no cycles report gives them
    std::vector<renewal_row> rows;
};

struct renewal_plan {
    std::vector<std::size_t> leases;
    int reps = 3;
    int rounds = 2;
};

// Waits, sleeping until `not_before` and then polling every millisecond, until
// the watchdog has finished `target` rounds that renewed something.
void wait_rounds(sqlock::client& c, std::uint64_t target, clock_type::time_point not_before) {
    std::this_thread::sleep_until(not_before);
    const auto give_up = clock_type::now() + std::chrono::seconds(60);
    while (c.stats().watchdog_ticks < target) {
        if (clock_type::now() > give_up) bench_failure("the watchdog finished no renewal round for 60 s");
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
}

// On SQLite the watchdog's renewals wait for the one write lock, and a thread
// granting or releasing in a tight loop holds them off: SQLite's busy handler
// sleeps (up to 100 ms) and retries, it does not queue, so the watchdog
// rarely finds the lock free and the leases pass their deadline. The bench's
// own grants and releases therefore pause for 150 ms after every 200 ms there.
class pacer {
public:
    explicit pacer(bool on) : on_(on), since_(clock_type::now()) {}
    void step() {
        if (!on_ || clock_type::now() - since_ < std::chrono::milliseconds(200)) return;
        std::this_thread::sleep_for(std::chrono::milliseconds(150));
        since_ = clock_type::now();
    }

private:
    bool on_;
    clock_type::time_point since_;
};

// sqlock: `n` leases held by one client; its watchdog renews them. Measured
// over whole rounds: each window starts just after one round has finished
// and ends just after the `rounds`-th next one has.
std::vector<renewal_window> measure_batched(sqlock::client& c, std::size_t n, const renewal_plan& plan,
                                            const server_cpu* probe, const std::string& what, bool single_writer) {
    std::vector<sqlock::lease> held;
    held.reserve(n);
    const sqlock::lock_options options{.lease = renewal_lease, .reentrant = false};
    const std::uint64_t lost_before = c.stats().leases_lost;
    pacer pace(single_writer);
    for (std::size_t i = 0; i < n; ++i) {
        const std::string key = "renewal/sqlock/" + std::to_string(i);
        auto l = c.try_acquire(key, options);
        if (!l) bench_failure("sqlock found '" + key + "' held");
        held.push_back(std::move(*l));
        pace.step();
    }
    if (const auto lost = c.stats().leases_lost - lost_before; lost > 0)
        bench_failure(std::to_string(lost) + " sqlock lease(s) lost while the bench acquired them");
    // Warm-up. The first round after the last grant renews every lease (each
    // falls due within the gap to the next round), so from the second on they
    // share one round.
    wait_rounds(c, c.stats().watchdog_ticks + 2, clock_type::now());
    auto counters = [&c](renewal_sample& s) {
        const auto st = c.stats();
        s.statements = st.statements;
        s.renewals = st.renewals;
        s.rounds = st.watchdog_ticks;
        s.troubles = st.leases_lost + st.renewal_failures;
    };
    std::vector<renewal_window> out;
    renewal_sample a = take_sample(probe, sample_at::start, counters);
    for (int rep = 0; rep < plan.reps; ++rep) {
        const auto interval = std::chrono::duration_cast<clock_type::duration>(renewal_interval);
        wait_rounds(c, a.rounds + static_cast<std::uint64_t>(plan.rounds), a.at + plan.rounds * interval - interval / 2);
        renewal_sample b = take_sample(probe, sample_at::end, counters);
        out.push_back(window_between(a, b, true));
        a = std::move(b);
        log_window(what, rep, plan.reps, out.back());
    }
    for (auto& l : held) {
        l.release();
        pace.step();
    }
    return out;
}

// Redisson's shape: each lease renewed by its own statement (renew.sql) once
// per interval, the `n` renewals spread evenly over it as independent
// per-lease timers would fire, all on one connection. Renewals that fall
// behind their schedule go out at once; the window ends on time regardless.
std::vector<renewal_window> measure_per_lease(backend& b, const std::vector<std::pair<std::string, std::string>>& rows,
                                              std::size_t n, const renewal_plan& plan, const server_cpu* probe,
                                              const std::string& what) {
    const auto interval = std::chrono::duration_cast<clock_type::duration>(renewal_interval);
    const std::chrono::duration<double> spacing = std::chrono::duration<double>(renewal_interval) / static_cast<double>(n);
    std::uint64_t renewed = 0;
    auto counters = [&](renewal_sample& s) {
        s.statements = b.raw_statements();
        s.renewals = renewed;
    };
    std::vector<renewal_window> out;
    for (int rep = 0; rep < plan.reps; ++rep) {
        const renewal_sample a = take_sample(probe, sample_at::start, counters);
        const auto end = a.at + plan.rounds * interval;
        double worst = 0;
        for (std::uint64_t j = 0;; ++j) {
            const auto due = a.at + std::chrono::duration_cast<clock_type::duration>(spacing * static_cast<double>(j));
            if (due >= end) break;
            const auto now = clock_type::now();
            if (now >= end) break;
            if (now < due) std::this_thread::sleep_until(due);
            else worst = std::max(worst, seconds_of(now - due));
            const auto& [key, owner] = rows[j % n];
            if (!b.raw_renew(key, owner, per_lease_ms)) bench_failure("per-lease renewal found '" + key + "' not held");
            ++renewed;
        }
        std::this_thread::sleep_until(end);
        renewal_window w = window_between(a, take_sample(probe, sample_at::end, counters), false);
        w.worst_lag = worst;
        out.push_back(w);
        log_window(what, rep, plan.reps, w);
    }
    return out;
}

renewal_report run_renewal(backend& b, const std::string& prefix, const renewal_plan& plan, const server_cpu* probe) {
    renewal_report report;
    report.backend = b.title();
    report.cpu_source = probe ? probe->describe() : "";
    report.in_process = b.title() == "SQLite";

    // The per-lease baseline's rows: granted once, by the library's own grant
    // statements, and never released (the bench drops the tables at the end).
    const std::size_t most = *std::max_element(plan.leases.begin(), plan.leases.end());
    std::vector<std::pair<std::string, std::string>> rows;
    rows.reserve(most);
    std::cerr << "sqlock_bench: renewal  " << b.title() << ": granting " << most << " leases for the per-lease baseline\n";
    b.raw_bulk_begin();
    for (std::size_t i = 0; i < most; ++i) {
        rows.emplace_back("renewal/per-lease/" + std::to_string(i), b.new_owner());
        b.raw_grant(rows.back().first, rows.back().second, per_lease_ms);
    }
    b.raw_bulk_end();
    for (std::size_t i = 0; i < std::min<std::size_t>(most, 100); ++i)  // warm-up: prepares the statement
        if (!b.raw_renew(rows[i].first, rows[i].second, per_lease_ms)) bench_failure("per-lease warm-up renewal failed");

    if (probe) {
        // What the server spends with nothing to renew (background workers,
        // the bench's idle connections), over one window.
        auto none = [](renewal_sample&) {};
        const renewal_sample a = take_sample(probe, sample_at::start, none);
        std::this_thread::sleep_for(plan.rounds * renewal_interval);
        const renewal_window idle = window_between(a, take_sample(probe, sample_at::end, none), false);
        report.idle_cpu_ms = idle.server_cpu.value_or(0) * 1e3 / idle.seconds;
        std::cerr << "sqlock_bench: renewal  " << b.title() << " idle: server CPU "
                  << format("%.2f", report.idle_cpu_ms) << " ms/s\n";
    }

    // One client, all defaults (renew_batch_size 500) but the sweeper, which
    // would add its own statements to the window.
    sqlock::client_options options;
    options.table_prefix = prefix;
    options.sweep = false;
    auto client = sqlock::client::open(b.url(), options);

    for (std::size_t k = 0; k < plan.leases.size(); ++k) {
        renewal_row row;
        row.leases = plan.leases[k];
        auto batched = [&] {
            const std::string what = b.title() + " sqlock, " + std::to_string(row.leases) + " leases";
            std::cerr << "sqlock_bench: renewal  " << what << ": acquiring\n";
            row.batched = measure_batched(client, row.leases, plan, probe, what, b.single_writer());
        };
        auto per_lease = [&] {
            const std::string what = b.title() + " per-lease, " + std::to_string(row.leases) + " leases";
            row.per_lease = measure_per_lease(b, rows, row.leases, plan, probe, what);
        };
        // Alternate which goes first, so drift on the machine falls on both.
        if (k % 2 == 0) {
            batched();
            per_lease();
        } else {
            per_lease();
            batched();
        }
        report.rows.push_back(std::move(row));
    }
    return report;
}

// "median (min–max)" of one quantity over the windows.
struct spread {
    double med = 0, lo = 0, hi = 0;
};
spread spread_of(const std::vector<renewal_window>& ws, const std::function<double(const renewal_window&)>& f) {
    std::vector<double> v;
    for (const auto& w : ws) v.push_back(f(w));
    if (v.empty()) return {};
    const auto [lo, hi] = std::minmax_element(v.begin(), v.end());
    return {median(v), *lo, *hi};
}
// Three significant digits or more; the thresholds sit where rounding would add one.
std::string number_text(double v) { return format(v >= 99.95 ? "%.0f" : v >= 9.995 ? "%.1f" : "%.2f", v); }
std::string spread_text(const spread& s) {
    return number_text(s.med) + " (" + number_text(s.lo) + "–" + number_text(s.hi) + ")";
}
std::string ratio_text(double num, double den) { return den > 0 ? format(num / den >= 10 ? "%.0f" : "%.1f", num / den) : "—"; }

std::string render_renewal(const renewal_plan& plan, const std::string& machine_table, const std::string& when,
                           const std::string& load_start, const std::string& load_end,
                           const std::vector<renewal_report>& reports) {
    std::ostringstream md;
    std::string counts;
    for (auto n : plan.leases) counts += (counts.empty() ? "" : ", ") + std::to_string(n);
    md << "### Renewal: machine and run\n\n"
       << "| | |\n|---|---|\n"
       << machine_table
       << "| Load average (1/5/15 min) | " << load_start << " at start, " << load_end << " at end |\n"
       << "| Run | " << when << "; " << counts << " held leases; lease " << renewal_lease.count() / 1000
       << " s, renewed every " << renewal_interval.count() / 1000 << " s; renew_batch_size 500 (the default); "
       << plan.reps << " windows × " << plan.rounds << " rounds (" << plan.rounds * renewal_interval.count() / 1000
       << " s) per contender and lease count |\n";
    for (const auto& r : reports)
        if (!r.cpu_source.empty())
            md << "| " << r.backend << " server CPU | " << r.cpu_source << "; " << number_text(r.idle_cpu_ms)
               << " ms/s while nothing is renewed |\n";
    md << "\n";

    for (const auto& r : reports) {
        md << "### Renewal: " << r.backend << "\n\n";
        for (const auto& f : r.facts) md << "- " << f << "\n";
        if (!r.facts.empty()) md << "\n";
        const bool server = !r.cpu_source.empty();
        const std::string cpu_name = r.in_process ? "process CPU (SQLite included)" : "server CPU";
        md << "| held leases | sqlock statements/s | per-lease statements/s | ÷ | sqlock " << cpu_name
           << " ms/s | per-lease " << cpu_name << " ms/s | ÷ | " << cpu_name << " µs per renewal, sqlock / per-lease |"
           << (r.in_process ? "" : " client CPU ms/s, sqlock / per-lease |")
           << " leases renewed/s, sqlock / per-lease | per-lease worst lag ms |\n"
           << "|---:|---:|---:|---:|---:|---:|---:|---:|" << (r.in_process ? "" : "---:|") << "---:|---:|\n";
        for (const auto& row : r.rows) {
            auto per_s = [](double renewal_window::*m) {
                return [m](const renewal_window& w) { return w.*m / w.seconds; };
            };
            auto cpu_ms = [&r](const renewal_window& w) {
                return (r.in_process ? w.client_cpu : w.server_cpu.value_or(0)) * 1e3 / w.seconds;
            };
            auto cpu_us_per = [&r](const std::vector<renewal_window>& ws) {
                return spread_of(ws, [&r](const renewal_window& w) {
                           const double cpu = r.in_process ? w.client_cpu : w.server_cpu.value_or(0);
                           return w.renewals > 0 ? cpu * 1e6 / w.renewals : 0.0;
                       }).med;
            };
            auto client_ms = [](const renewal_window& w) { return w.client_cpu * 1e3 / w.seconds; };
            const spread s_b = spread_of(row.batched, per_s(&renewal_window::statements));
            const spread s_p = spread_of(row.per_lease, per_s(&renewal_window::statements));
            const bool have_cpu = server || r.in_process;
            const spread c_b = spread_of(row.batched, cpu_ms);
            const spread c_p = spread_of(row.per_lease, cpu_ms);
            double lag = 0;
            for (const auto& w : row.per_lease) lag = std::max(lag, w.worst_lag);
            md << "| " << row.leases << " | " << spread_text(s_b) << " | " << spread_text(s_p) << " | "
               << ratio_text(s_p.med, s_b.med) << " | " << (have_cpu ? spread_text(c_b) : "—") << " | "
               << (have_cpu ? spread_text(c_p) : "—") << " | " << (have_cpu ? ratio_text(c_p.med, c_b.med) : "—")
               << " | "
               << (have_cpu ? number_text(cpu_us_per(row.batched)) + " / " + number_text(cpu_us_per(row.per_lease))
                            : "—")
               << " | ";
            if (!r.in_process)
                md << number_text(spread_of(row.batched, client_ms).med) << " / "
                   << number_text(spread_of(row.per_lease, client_ms).med) << " | ";
            md << number_text(spread_of(row.batched, per_s(&renewal_window::renewals)).med) << " / "
               << number_text(spread_of(row.per_lease, per_s(&renewal_window::renewals)).med) << " | "
               << format("%.0f", lag * 1e3) << " |\n";
        }
        md << "\n";
        // Anything that would make a row misleading is said under its table.
        for (const auto& row : r.rows) {
            double troubles = 0, rounds = 0, statements = 0;
            for (const auto& w : row.batched) {
                troubles += w.troubles;
                rounds += w.rounds;
                statements += w.statements;
            }
            const double expected = std::ceil(static_cast<double>(row.leases) / 500.0);
            if (troubles > 0)
                md << "- " << row.leases << " leases: sqlock lost or failed to renew " << format("%.0f", troubles)
                   << " lease(s) during the windows.\n";
            if (rounds > 0 && std::abs(statements / rounds - expected) > 0.01)
                md << "- " << row.leases << " leases: sqlock sent " << format("%.2f", statements / rounds)
                   << " statements per round, not " << format("%.0f", expected) << ".\n";
        }
    }
    md << "Each cell is the median of the windows, with their min–max where given. sqlock's statements and "
          "renewals are the client's own `stats()` counters. A sqlock window starts "
          "just after a watchdog round has finished and ends when the watchdog has finished "
       << plan.rounds
       << " more, so it holds whole rounds. The per-lease baseline sends `renew.sql` through the driver on "
          "one connection, each lease once per second at its own evenly spread moment. \"Worst lag\" is how "
          "far behind that schedule its latest renewal went out; a baseline that renews fewer than N leases "
          "a second falls further behind the longer it runs. ÷ divides per-lease by sqlock (medians). Server "
          "CPU is the database server's CPU time over the window, every process and thread of it, background "
          "work included. Client CPU is the bench process's: for sqlock every thread but the main one, which "
          "only waits while the watchdog works; for per-lease the whole process.\n";
    return md.str();
}

// ---------------------------------------------------------------------------
// Fairness: handoffs between waiter processes on one hot key
// ---------------------------------------------------------------------------
//
// Every contender is a child process: this program re-executed in its hidden
// --waiter mode, with one sqlock client and one thread. Waiters must be
// separate processes: a release wakes the releasing process's own waiters at
// once through a condition variable shared by its clients, so waiters in one
// process would not show how a release reaches another process (NOTIFY on
// PostgreSQL, polling elsewhere). Each child loops over acquire(key) → hold →
// release() for a window fixed by the parent, keeps a record per grant
// (timestamps from CLOCK_MONOTONIC, which all processes of one machine share)
// and sends its records over a pipe when the window is over.

constexpr std::chrono::milliseconds fairness_lease{5000};
constexpr std::chrono::microseconds fairness_hold{1000};
// Contention before the measured window: the first grants, every child's
// first statements and (PostgreSQL) its LISTEN connection fall in it.
constexpr std::chrono::milliseconds fairness_warmup{1000};

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

void write_all(int fd, std::string_view text) {
    while (!text.empty()) {
        const ssize_t n = ::write(fd, text.data(), text.size());
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) throw std::runtime_error("cannot write to the pipe: " + std::string(std::strerror(errno)));
        text.remove_prefix(static_cast<std::size_t>(n));
    }
}

// Reads from fd into `buffer` until it holds a newline (true) or the pipe is
// closed (false); gives up at `deadline` (monotonic ns).
bool read_line(int fd, std::string& buffer, std::string& line, std::int64_t deadline) {
    for (;;) {
        if (const auto nl = buffer.find('\n'); nl != std::string::npos) {
            line = buffer.substr(0, nl);
            buffer.erase(0, nl + 1);
            return true;
        }
        const std::int64_t left_ms = (deadline - monotonic_ns()) / 1'000'000;
        if (left_ms <= 0) throw std::runtime_error("a waiter process did not answer in time");
        pollfd p{fd, POLLIN, 0};
        const int ready = ::poll(&p, 1, static_cast<int>(std::min<std::int64_t>(left_ms, 1000)));
        if (ready < 0 && errno != EINTR) throw std::runtime_error("poll: " + std::string(std::strerror(errno)));
        if (ready <= 0) continue;
        char chunk[65536];
        const ssize_t n = ::read(fd, chunk, sizeof chunk);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) throw std::runtime_error("cannot read from a waiter process: " + std::string(std::strerror(errno)));
        if (n == 0) {
            line = std::move(buffer);
            buffer.clear();
            return !line.empty();
        }
        buffer.append(chunk, static_cast<std::size_t>(n));
    }
}

// The hidden --waiter mode:
//   sqlock_bench --waiter URL PREFIX KEY FAIR(0|1)
// Says "ready" on stdout once its client works, reads "go START END" (monotonic
// ns) from stdin, contends for KEY from START until END, then writes one line
// per grant and closes:
//   G start granted released release_done token   (ns; start = acquire() called)
//   U start                                        (an acquire() still waiting at END)
//   S waits wakeups statements                     (the client's stats())
int run_waiter(int argc, char** argv) {
    // Nothing of the parent's (its database sockets, other children's pipes) stays open here.
    close_range(3, ~0U, 0);
    if (argc != 6) {
        std::cerr << "sqlock_bench --waiter: needs URL PREFIX KEY FAIR\n";
        return 2;
    }
    try {
        sqlock::client_options client_options;
        client_options.table_prefix = argv[3];
        auto client = sqlock::client::open(argv[2], client_options);
        const std::string key = argv[4];
        const bool fair = std::string_view(argv[5]) == "1";
        {
            // The schema check and the first connection, on a key of its own.
            auto warm = client.try_acquire(key + "/warm-up/" + std::to_string(getpid()), {.reentrant = false});
            if (warm) warm->release();
        }
        write_all(1, "ready\n");
        std::string buffer, line;
        if (!read_line(0, buffer, line, monotonic_ns() + 600'000'000'000LL)) return 0;  // parent gave up
        std::int64_t start = 0, end = 0;
        {
            std::istringstream go(line);
            std::string word;
            go >> word >> start >> end;
            if (word != "go" || end <= start) throw std::runtime_error("bad go line '" + line + "'");
        }
        const sqlock::lock_options options{.lease = fairness_lease, .reentrant = false, .fair = fair};
        std::ostringstream out;
        sleep_until_monotonic(start);
        for (;;) {
            const std::int64_t asked = monotonic_ns();
            if (asked >= end) break;
            const auto timeout = std::chrono::milliseconds((end - asked + 999'999) / 1'000'000);
            std::optional<sqlock::lease> held;
            try {
                held.emplace(client.acquire(key, timeout, options));
            } catch (const sqlock::timeout_error&) {
                out << "U " << asked << "\n";
                break;
            }
            const std::int64_t granted = monotonic_ns();
            std::this_thread::sleep_for(fairness_hold);
            const std::int64_t released = monotonic_ns();
            const std::int64_t token = held->token();
            held->release();
            out << "G " << asked << " " << granted << " " << released << " " << monotonic_ns() << " " << token << "\n";
        }
        const auto st = client.stats();
        out << "S " << st.waits << " " << st.wakeups << " " << st.statements << "\n";
        write_all(1, out.str());
        return 0;
    } catch (const std::exception& e) {
        std::string what = e.what();
        std::replace(what.begin(), what.end(), '\n', ' ');
        try {
            write_all(1, "E " + what + "\n");
        } catch (...) {
        }
        return 1;
    }
}

std::string self_executable() {
    char path[PATH_MAX + 1] = {};
    const ssize_t n = readlink("/proc/self/exe", path, PATH_MAX);
    if (n <= 0) throw std::runtime_error("cannot find this program's path in /proc/self/exe");
    return std::string(path, static_cast<std::size_t>(n));
}

struct grant_record {
    int process = 0;
    std::int64_t asked = 0, granted = 0, released = 0, release_done = 0, token = 0;
    bool first = false;  // the process's first acquire(): all of those start together
};

// One run: `processes` waiter processes contending for one key.
struct contention_run {
    std::string backend;
    bool fair = false;
    int processes = 0;
    double seconds = 0;
    std::int64_t start = 0, from = 0, to = 0;  // contention starts; measured window [from, to)
    std::vector<grant_record> grants;          // every grant, in token order
    std::vector<grant_record> unfinished;      // acquire() calls still waiting at the end (granted = 0)
    std::int64_t final_token = 0;              // the key's last token, read from the database afterwards
    std::uint64_t waits = 0, wakeups = 0, statements = 0;
    std::string load_start, load_end;
};

// Children of one run. Kills (SIGKILL) and reaps whatever is left if the run fails.
class waiter_group {
public:
    waiter_group(const std::string& exe, const std::string& url, const std::string& prefix, const std::string& key,
                 bool fair, int n) {
        for (int i = 0; i < n; ++i) spawn(exe, url, prefix, key, fair);
    }
    waiter_group(const waiter_group&) = delete;
    waiter_group& operator=(const waiter_group&) = delete;
    ~waiter_group() {
        for (auto& c : children_) {
            if (c.to >= 0) ::close(c.to);
            if (c.from >= 0) ::close(c.from);
            if (c.pid > 0) {
                ::kill(c.pid, SIGKILL);
                ::waitpid(c.pid, nullptr, 0);
            }
        }
    }

    void await_ready() {
        const std::int64_t deadline = monotonic_ns() + 120'000'000'000LL;
        for (auto& c : children_) {
            std::string line;
            if (!read_line(c.from, c.buffer, line, deadline) || line != "ready")
                bench_failure("a waiter process failed to start: " + (line.empty() ? "(no answer)" : line));
        }
    }

    void go(std::int64_t start, std::int64_t end) {
        const std::string line = "go " + std::to_string(start) + " " + std::to_string(end) + "\n";
        for (auto& c : children_) {
            write_all(c.to, line);
            ::close(c.to);
            c.to = -1;
        }
    }

    // Every child's records; waits for every child to exit.
    void collect(contention_run& run, std::int64_t deadline) {
        for (std::size_t i = 0; i < children_.size(); ++i) {
            auto& c = children_[i];
            bool first = true;
            std::string line;
            while (read_line(c.from, c.buffer, line, deadline)) {
                std::istringstream in(line);
                std::string tag;
                in >> tag;
                grant_record g;
                g.process = static_cast<int>(i);
                if (tag == "G") {
                    in >> g.asked >> g.granted >> g.released >> g.release_done >> g.token;
                    g.first = std::exchange(first, false);
                    run.grants.push_back(g);
                } else if (tag == "U") {
                    in >> g.asked;
                    g.first = first;
                    run.unfinished.push_back(g);
                } else if (tag == "S") {
                    std::uint64_t waits = 0, wakeups = 0, statements = 0;
                    in >> waits >> wakeups >> statements;
                    run.waits += waits;
                    run.wakeups += wakeups;
                    run.statements += statements;
                } else {
                    bench_failure("waiter process " + std::to_string(i) + ": " + line);
                }
                if (!in) bench_failure("waiter process " + std::to_string(i) + " sent '" + line + "'");
            }
            ::close(c.from);
            c.from = -1;
            int status = 0;
            ::waitpid(c.pid, &status, 0);
            c.pid = -1;
            if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
                bench_failure("waiter process " + std::to_string(i) + " failed (wait status " + std::to_string(status) +
                              ")");
        }
    }

private:
    struct child {
        pid_t pid = -1;
        int to = -1, from = -1;  // its stdin, its stdout
        std::string buffer;
    };

    void spawn(const std::string& exe, const std::string& url, const std::string& prefix, const std::string& key,
               bool fair) {
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
        std::vector<std::string> args{exe, "--waiter", url, prefix, key, fair ? "1" : "0"};
        std::vector<char*> argv;
        for (auto& a : args) argv.push_back(a.data());
        argv.push_back(nullptr);
        pid_t pid = -1;
        const int rc = posix_spawn(&pid, exe.c_str(), &actions, nullptr, argv.data(), environ);
        posix_spawn_file_actions_destroy(&actions);
        ::close(in[0]);
        ::close(out[1]);
        if (rc != 0) {
            ::close(in[1]);
            ::close(out[0]);
            throw std::runtime_error("cannot start a waiter process: " + std::string(std::strerror(rc)));
        }
        children_.push_back({pid, in[1], out[0], {}});
    }

    std::vector<child> children_;
};

contention_run run_contention(backend& b, sqlock::client& inspector, const std::string& prefix,
                              const std::string& key, bool fair, int processes, double seconds) {
    contention_run run;
    run.backend = b.title();
    run.fair = fair;
    run.processes = processes;
    run.seconds = seconds;
    run.load_start = load_average();
    waiter_group group(self_executable(), b.url(), prefix, key, fair, processes);
    group.await_ready();
    run.start = monotonic_ns() + 200'000'000;  // every child is sleeping until then
    run.from = run.start + std::chrono::nanoseconds(fairness_warmup).count();
    run.to = run.from + static_cast<std::int64_t>(seconds * 1e9);
    group.go(run.start, run.to);
    group.collect(run, run.to + 120'000'000'000LL);
    run.load_end = load_average();
    run.final_token = inspector.inspect(key).token;
    std::sort(run.grants.begin(), run.grants.end(),
              [](const grant_record& a, const grant_record& c) { return a.token < c.token; });
    return run;
}

// Fair order is arrival order at the database: a caller is queued once its
// ticket insert has committed, a round trip or two after it called acquire()
// (more when the machine is busy). A caller passed by one that called less
// than this much later may simply not have queued yet.
constexpr std::int64_t overtake_margin_ns = 10'000'000;

// What one run shows, over the grants whose acquire() returned in its window.
struct contention_summary {
    std::size_t acquisitions = 0;
    std::size_t handoffs = 0;         // grants to another process than the previous holder
    std::vector<double> handoff_ms;   // previous holder about to release → this acquire() returns
    std::vector<double> wait_ms;      // acquire() called → returned
    std::vector<std::size_t> per_process;
    double jain = 0;
    double max_wait_ms = 0;
    bool max_wait_unfinished = false;  // the longest wait was still waiting at the end
    std::size_t overtakes = 0;         // grants that passed an earlier caller still waiting
    std::size_t clear_overtakes = 0;   // ... one that had called acquire() at least overtake_margin earlier
    std::size_t order_errors = 0;      // a grant returned before the previous holder began to release
    // Tokens no caller received: the database granted the key, but no
    // acquire() returned the grant. The key then stays held until that lease
    // runs out; `stalled_ms` adds up those gaps (previous release → next grant).
    std::size_t lost_grants = 0;
    double stalled_ms = 0;
};

contention_summary summarize(const contention_run& run) {
    contention_summary s;
    s.per_process.assign(static_cast<std::size_t>(run.processes), 0);
    const auto& g = run.grants;
    auto in_window = [&run](const grant_record& r) { return r.granted >= run.from && r.granted < run.to; };
    for (std::size_t k = 0; k < g.size(); ++k) {
        const bool lost_before = k > 0 && g[k].token > g[k - 1].token + 1;
        if (k > 0) {
            // Exclusion, seen from the clocks: the next grant returns after
            // the previous holder began releasing.
            if (g[k].granted <= g[k - 1].released || g[k].token == g[k - 1].token) ++s.order_errors;
        }
        if (!in_window(g[k])) continue;
        if (lost_before) {
            s.lost_grants += static_cast<std::size_t>(g[k].token - g[k - 1].token - 1);
            s.stalled_ms += static_cast<double>(g[k].granted - g[k - 1].released) / 1e6;
        }
        ++s.acquisitions;
        ++s.per_process[static_cast<std::size_t>(g[k].process)];
        const double wait = static_cast<double>(g[k].granted - g[k].asked) / 1e6;
        s.wait_ms.push_back(wait);
        if (wait > s.max_wait_ms) s.max_wait_ms = wait;
        if (k > 0 && g[k].process != g[k - 1].process) {
            ++s.handoffs;
            s.handoff_ms.push_back(static_cast<double>(g[k].granted - g[k - 1].released) / 1e6);
        }
    }
    // Grants after the last one a caller received: the key stayed held to the end.
    if (!g.empty() && run.final_token > g.back().token && g.back().released < run.to) {
        s.lost_grants += static_cast<std::size_t>(run.final_token - g.back().token);
        s.stalled_ms += static_cast<double>(run.to - g.back().released) / 1e6;
    }
    for (const auto& u : run.unfinished) {
        const double wait = static_cast<double>(run.to - u.asked) / 1e6;
        if (wait > s.max_wait_ms) {
            s.max_wait_ms = wait;
            s.max_wait_unfinished = true;
        }
    }
    // Overtakes: a grant in the window whose acquire() was called after that
    // of another caller who was still waiting. Every process's first call
    // starts at the same instant, so two first calls are not compared.
    constexpr std::int64_t never = std::numeric_limits<std::int64_t>::max();
    std::int64_t earliest_any = never, earliest_later = never;  // among calls granted later (or never)
    for (const auto& u : run.unfinished) {
        earliest_any = std::min(earliest_any, u.asked);
        if (!u.first) earliest_later = std::min(earliest_later, u.asked);
    }
    for (auto it = g.rbegin(); it != g.rend(); ++it) {
        const std::int64_t earliest = it->first ? earliest_later : earliest_any;
        if (in_window(*it) && earliest < it->asked) {
            ++s.overtakes;
            if (earliest < it->asked - overtake_margin_ns) ++s.clear_overtakes;
        }
        earliest_any = std::min(earliest_any, it->asked);
        if (!it->first) earliest_later = std::min(earliest_later, it->asked);
    }
    double sum = 0, squares = 0;
    for (auto n : s.per_process) {
        sum += static_cast<double>(n);
        squares += static_cast<double>(n) * static_cast<double>(n);
    }
    s.jain = squares > 0 ? sum * sum / (static_cast<double>(s.per_process.size()) * squares) : 0;
    return s;
}

void log_run(const contention_run& run, const contention_summary& s) {
    auto handoff = s.handoff_ms;
    std::cerr << "sqlock_bench: fairness " << run.backend << ", " << (run.fair ? "fair" : "not fair") << ", "
              << run.processes << " processes, " << format("%g", run.seconds) << " s: " << s.acquisitions
              << " acquisitions, " << s.handoffs << " handoffs, handoff p50 "
              << format("%.2f", percentile(handoff, 0.5))
              << " ms p99 " << format("%.2f", percentile(handoff, 0.99)) << " ms, Jain "
              << format("%.3f", s.jain) << ", max wait " << format("%.0f", s.max_wait_ms) << " ms"
              << (s.max_wait_unfinished ? " (unfinished)" : "") << ", overtakes " << s.overtakes << " ("
              << s.clear_overtakes << " by 10 ms or more), lost grants " << s.lost_grants << " (stalled "
              << format("%.0f", s.stalled_ms) << " ms), order errors " << s.order_errors << ", wake-ups "
              << run.wakeups << ", load " << run.load_end << "\n";
}

// The raw records of one run, for a closer look: one line per grant in token
// order, then the calls still waiting at the end; times in ms from the start.
void write_run_log(const contention_run& run, const std::string& file) {
    std::ofstream out(file);
    auto ms = [&run](std::int64_t t) { return format("%.3f", static_cast<double>(t - run.start) / 1e6); };
    out << "# " << run.backend << (run.fair ? " fair, " : " not fair, ") << run.processes << " processes; window "
        << ms(run.from) << " to " << ms(run.to) << " ms; start " << run.start
        << " ns (CLOCK_MONOTONIC); last token in the database " << run.final_token << "\n"
        << "token\tprocess\tfirst\tasked\tgranted\treleased\trelease_done\n";
    for (const auto& g : run.grants)
        out << g.token << "\t" << g.process << "\t" << g.first << "\t" << ms(g.asked) << "\t" << ms(g.granted) << "\t"
            << ms(g.released) << "\t" << ms(g.release_done) << "\n";
    for (const auto& u : run.unfinished)
        out << "-\t" << u.process << "\t" << u.first << "\t" << ms(u.asked) << "\t-\t-\t-\n";
    if (!out.flush()) throw std::runtime_error("cannot write " + file);
}

struct fairness_report {
    std::string backend;
    std::vector<std::string> facts;
    std::vector<std::pair<contention_run, contention_summary>> handoff;  // fair, N waiters + 1 holder
    std::vector<std::pair<contention_run, contention_summary>> hot;      // hot key: throughput, then fairness windows
};

fairness_report run_fairness(backend& b, const std::string& prefix, const options& opt) {
    fairness_report r;
    r.backend = b.title();
    // Reads each key's last token once its run is over (no watchdog work, no sweeps).
    sqlock::client_options inspector_options;
    inspector_options.table_prefix = prefix;
    inspector_options.sweep = false;
    auto inspector = sqlock::client::open(b.url(), inspector_options);
    int n = 0;
    auto one = [&](bool fair, int processes, double seconds) {
        const std::string key = "fairness/" + std::to_string(n++);
        std::cerr << "sqlock_bench: fairness " << b.title() << ": " << processes << " processes, "
                  << (fair ? "fair" : "not fair") << ", " << format("%g", seconds) << " s on '" << key << "'\n";
        auto run = run_contention(b, inspector, prefix, key, fair, processes, seconds);
        if (!opt.fairness_log.empty())
            write_run_log(run, opt.fairness_log + "/" + b.title() + "-" + std::to_string(n - 1) + ".tsv");
        auto summary = summarize(run);
        log_run(run, summary);
        return std::make_pair(std::move(run), std::move(summary));
    };
    for (int waiters : opt.handoff_waiters) r.handoff.push_back(one(true, waiters + 1, opt.handoff_seconds));
    // Fair and not fair take turns going first.
    r.hot.push_back(one(true, opt.hot_processes, opt.throughput_seconds));
    r.hot.push_back(one(false, opt.hot_processes, opt.throughput_seconds));
    auto unfair = one(false, opt.hot_processes, opt.fairness_seconds);
    r.hot.push_back(one(true, opt.hot_processes, opt.fairness_seconds));
    r.hot.push_back(std::move(unfair));
    return r;
}

std::string ms_text(double ms) { return format(ms >= 99.95 ? "%.0f" : ms >= 9.995 ? "%.1f" : "%.2f", ms); }

std::string render_fairness(const options& opt, const std::string& machine_table, const std::string& when,
                            const std::string& load_start, const std::string& load_end,
                            std::vector<fairness_report>& reports) {
    std::ostringstream md;
    std::string counts;
    for (int w : opt.handoff_waiters) counts += (counts.empty() ? "" : ", ") + std::to_string(w);
    md << "### Fairness: machine and run\n\n"
       << "| | |\n|---|---|\n"
       << machine_table
       << "| Load average (1/5/15 min) | " << load_start << " at start, " << load_end << " at end |\n"
       << "| Run | " << when << "; every contender a process of its own (one client, one thread), acquiring "
       << "with a lease of " << fairness_lease.count() / 1000 << " s, holding " << fairness_hold.count() / 1000
       << " ms, releasing and calling `acquire()` again at once; " << fairness_warmup.count() / 1000
       << " s of contention before each window |\n"
       << "| Handoff latency | fair; " << counts << " waiters queued (one more process holds); "
       << format("%g", opt.handoff_seconds) << " s per run |\n"
       << "| Hot key | " << opt.hot_processes << " processes, fair and not fair; windows of "
       << format("%g", opt.throughput_seconds) << " s and " << format("%g", opt.fairness_seconds) << " s |\n\n";

    auto lost_text = [](const contention_summary& s) {
        return s.lost_grants == 0 ? std::string("0")
                                  : std::to_string(s.lost_grants) + " (" + format("%.1f", s.stalled_ms / 1e3) + " s)";
    };
    for (auto& r : reports) {
        md << "### Fairness: " << r.backend << "\n\n";
        for (const auto& f : r.facts) md << "- " << f << "\n";
        if (!r.facts.empty()) md << "\n";
        md << "Handoff latency, fair: the holder calls `release()` → the next waiter's `acquire()` returns.\n\n"
              "| waiters queued | handoffs measured | p50 ms | p99 ms | max ms | handoffs/s "
              "| overtakes ≥ 10 ms (all) | grants no caller received (stalled) |\n"
              "|---:|---:|---:|---:|---:|---:|---:|---:|\n";
        for (auto& [run, s] : r.handoff) {
            auto& h = s.handoff_ms;
            const double p50 = percentile(h, 0.50), p99 = percentile(h, 0.99);
            const double most = h.empty() ? 0 : *std::max_element(h.begin(), h.end());
            md << "| " << run.processes - 1 << " | " << s.handoffs << " | " << ms_text(p50) << " | " << ms_text(p99)
               << " | " << ms_text(most) << " | " << rate_text(static_cast<double>(s.handoffs) / run.seconds) << " | "
               << s.clear_overtakes << " (" << s.overtakes << ") | " << lost_text(s) << " |\n";
        }
        md << "\nHot key, " << opt.hot_processes
           << " processes acquiring in a loop (one holds, the others wait):\n\n"
              "| contender | window s | acquisitions/s | handoffs/s (to another process) | handoff p50 / p99 ms "
              "| Jain's index | acquisitions per process, min–max | longest wait s | wait p99 s "
              "| overtakes ≥ 10 ms (all) | grants no caller received (stalled) | wake-ups received |\n"
              "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n";
        for (auto& [run, s] : r.hot) {
            auto& h = s.handoff_ms;
            const auto [lo, hi] = std::minmax_element(s.per_process.begin(), s.per_process.end());
            md << "| " << (run.fair ? "fair" : "not fair") << " | " << format("%g", run.seconds) << " | "
               << rate_text(static_cast<double>(s.acquisitions) / run.seconds) << " | "
               << rate_text(static_cast<double>(s.handoffs) / run.seconds) << " | "
               << (h.empty() ? "—" : ms_text(percentile(h, 0.50)) + " / " + ms_text(percentile(h, 0.99))) << " | "
               << format("%.3f", s.jain) << " | " << *lo << "–" << *hi << " | "
               << (s.max_wait_unfinished ? "≥ " : "") << format("%.2f", s.max_wait_ms / 1e3) << " | "
               << format("%.2f", percentile(s.wait_ms, 0.99) / 1e3) << " | " << s.clear_overtakes << " ("
               << s.overtakes << ") | " << lost_text(s) << " | "
               << (r.backend == "PostgreSQL" ? std::to_string(run.wakeups) : "—") << " |\n";
        }
        md << "\n";
        std::size_t errors = 0;
        for (auto* list : {&r.handoff, &r.hot})
            for (auto& [run, s] : *list) errors += s.order_errors;
        if (errors > 0)
            md << "- **" << errors
               << " grant(s) out of order**: an `acquire()` returned before the previous holder began to release, "
                  "or two grants carried the same token.\n\n";
    }
    md << "Every number counts the grants whose `acquire()` returned inside the window. A *handoff* is a grant to "
          "another process than the previous holder; its latency runs from the moment the previous holder called "
          "`release()` (so it includes the release statement) to the moment the next holder's `acquire()` "
          "returned, both read from CLOCK_MONOTONIC. Jain's index is (Σx)² / (n·Σx²) over the n processes' "
          "acquisition counts: 1 when all got the same, 1/n when one got all. The longest wait is the longest "
          "single `acquire()` call; \"≥\" marks one still waiting when the window closed. An *overtake* is a grant "
          "to a call made after that of another caller who was still waiting (the processes' first calls, made "
          "together at the start, are not compared with each other). Fair order is arrival order at the database, "
          "and a caller arrives there when its ticket insert commits, a round trip or two after it called "
          "`acquire()`; so the first count is of overtakes of a caller that had called at least 10 ms earlier, "
          "and the count in parentheses is of all. *Grants no caller received* are fencing tokens missing from "
          "the sequence the callers saw, or granted after the last grant a caller saw (the key's last token is "
          "read from the database after the run): the database granted the key, but no `acquire()` returned "
          "that grant, so the key stayed held until its lease ran out; *stalled* adds up the time from the "
          "release before each such grant to the next grant (or to the end of the window). Wake-ups received "
          "are the clients' `stats().wakeups`, NOTIFYs on PostgreSQL.\n";
    return md.str();
}

[[noreturn]] void usage(int code) {
    (code ? std::cerr : std::cout)
        << "usage: sqlock_bench [--postgres URL] [--mysql URL] [--sqlite PATH]\n"
           "                    [--workload cycles,renewal,fairness] [--seconds N] [--reps R]\n"
           "                    [--renewal-leases N,N,...] [--renewal-rounds K]\n"
           "                    [--postgres-pid PID] [--mysql-pid PID]\n"
           "                    [--markdown FILE] [--renewal-markdown FILE] [--sql-dir DIR]\n"
           "                    [--handoff-waiters N,N,...] [--handoff-seconds S]\n"
           "                    [--hot-processes N] [--throughput-seconds S] [--fairness-seconds S]\n"
           "                    [--fairness-markdown FILE] [--fairness-log DIR]\n"
           "cycles: uncontended acquire+release cycles per second for each mode and backend\n"
           "given, beside the same SQL sent straight through the driver and the native lock.\n"
           "renewal: the watchdog renewing N held leases in batches, beside one renew\n"
           "statement per lease per interval; statements/s and the database's CPU.\n"
           "fairness: waiter processes on one hot key, fair and not fair: handoff latency,\n"
           "handoffs per second, Jain's fairness index and the longest wait.\n"
           "  --workload W        cycles, renewal, fairness, comma-separated (default all three)\n"
           "  --seconds N         length of one cycles measurement (default 3)\n"
           "  --reps R            measurements per contender (default 3)\n"
           "  --renewal-leases L  held lease counts (default 100,1000,10000)\n"
           "  --renewal-rounds K  renewal rounds (seconds) per renewal measurement (default 2)\n"
           "  --postgres-pid P    the postmaster's pid: measure the server's CPU (its children too)\n"
           "  --mysql-pid P       mariadbd's pid: measure the server's CPU\n"
           "  --markdown F        also write the cycles report to F\n"
           "  --renewal-markdown F  also write the renewal report to F\n"
           "  --handoff-waiters L fair waiters queued in the handoff-latency runs (default 1,8,64)\n"
           "  --handoff-seconds S window of one handoff-latency run (default 10)\n"
           "  --hot-processes N   processes of the hot-key runs (default 16)\n"
           "  --throughput-seconds S  window of the hot-key handoffs-per-second runs (default 10)\n"
           "  --fairness-seconds S    window of the hot-key fairness runs (default 60)\n"
           "  --fairness-markdown F   also write the fairness report to F\n"
           "  --fairness-log D    write every fairness run's grants to D/<backend>-<run>.tsv\n"
           "  --sql-dir D         the library's sql/ directory (default " SQLOCK_BENCH_SQL_DIR ")\n";
    std::exit(code);
}

options parse_args(int argc, char** argv) {
    options o;
    for (int i = 1; i < argc; ++i) {
        const std::string arg = argv[i];
        if (arg == "-h" || arg == "--help") usage(0);
        if (i + 1 >= argc) {
            std::cerr << "sqlock_bench: " << arg << " needs a value\n";
            usage(2);
        }
        const std::string value = argv[++i];
        try {
            if (arg == "--postgres") o.postgres = value;
            else if (arg == "--mysql") o.mysql = value;
            else if (arg == "--sqlite") o.sqlite = value;
            else if (arg == "--markdown") o.markdown = value;
            else if (arg == "--renewal-markdown") o.renewal_markdown = value;
            else if (arg == "--fairness-markdown") o.fairness_markdown = value;
            else if (arg == "--fairness-log") o.fairness_log = value;
            else if (arg == "--workload") {
                o.cycles = o.renewal = o.fairness = false;
                std::istringstream list(value);
                for (std::string w; std::getline(list, w, ',');) {
                    if (w == "cycles") o.cycles = true;
                    else if (w == "renewal") o.renewal = true;
                    else if (w == "fairness") o.fairness = true;
                    else {
                        std::cerr << "sqlock_bench: unknown workload '" << w << "' (cycles, renewal, fairness)\n";
                        usage(2);
                    }
                }
            } else if (arg == "--handoff-waiters") {
                o.handoff_waiters.clear();
                std::istringstream list(value);
                for (std::string n; std::getline(list, n, ',');) {
                    const int v = std::stoi(n);
                    if (v < 1) throw std::invalid_argument(n);
                    o.handoff_waiters.push_back(v);
                }
                if (o.handoff_waiters.empty()) throw std::invalid_argument(value);
            }
            else if (arg == "--handoff-seconds") o.handoff_seconds = std::stod(value);
            else if (arg == "--hot-processes") o.hot_processes = std::stoi(value);
            else if (arg == "--throughput-seconds") o.throughput_seconds = std::stod(value);
            else if (arg == "--fairness-seconds") o.fairness_seconds = std::stod(value);
            else if (arg == "--renewal-leases") {
                o.renewal_leases.clear();
                std::istringstream list(value);
                for (std::string n; std::getline(list, n, ',');) {
                    const long long v = std::stoll(n);
                    if (v < 1) throw std::invalid_argument(n);
                    o.renewal_leases.push_back(static_cast<std::size_t>(v));
                }
                if (o.renewal_leases.empty()) throw std::invalid_argument(value);
            }
            else if (arg == "--renewal-rounds") o.renewal_rounds = std::stoi(value);
            else if (arg == "--postgres-pid") o.postgres_pid = std::stoi(value);
            else if (arg == "--mysql-pid") o.mysql_pid = std::stoi(value);
            else if (arg == "--sql-dir") o.sql_dir = value;
            else if (arg == "--seconds") o.seconds = std::stod(value);
            else if (arg == "--reps") o.reps = std::stoi(value);
            else {
                std::cerr << "sqlock_bench: unknown option " << arg << "\n";
                usage(2);
            }
        } catch (const std::logic_error&) {
            std::cerr << "sqlock_bench: " << arg << " needs a number, got '" << value << "'\n";
            usage(2);
        }
    }
    if (o.seconds <= 0 || o.reps < 1 || o.renewal_rounds < 1) {
        std::cerr << "sqlock_bench: --seconds must be positive, --reps and --renewal-rounds at least 1\n";
        usage(2);
    }
    if (o.handoff_seconds <= 0 || o.throughput_seconds <= 0 || o.fairness_seconds <= 0 || o.hot_processes < 2) {
        std::cerr << "sqlock_bench: the fairness windows must be positive, --hot-processes at least 2\n";
        usage(2);
    }
    if (!o.cycles && !o.renewal && !o.fairness) {
        std::cerr << "sqlock_bench: --workload names no workload\n";
        usage(2);
    }
    if (o.postgres.empty() && o.mysql.empty() && o.sqlite.empty()) {
        std::cerr << "sqlock_bench: give at least one of --postgres, --mysql, --sqlite\n";
        usage(2);
    }
    return o;
}

std::string random_prefix() {
    std::mt19937_64 rng(std::random_device{}());
    char buf[32];
    std::snprintf(buf, sizeof buf, "bench_%08llx_", static_cast<unsigned long long>(rng() & 0xffffffffULL));
    return buf;
}

std::unique_ptr<backend> open_backend(const std::string& dialect, const std::string& where,
                                      const options& opt, const std::string& prefix) {
    const sql_texts sql(std::filesystem::path(opt.sql_dir) / dialect, prefix);
    const std::string url = dialect == "sqlite" ? "sqlite:" + std::filesystem::absolute(where).string() : where;
    // The library creates its schema under the fresh prefix first: the raw
    // connections prepare their statements against those tables.
    sqlock::client_options client_options;
    client_options.table_prefix = prefix;
    auto client = sqlock::client::open(url, client_options);
    client.migrate();
    std::unique_ptr<backend> b;
#ifdef SQLOCK_BENCH_POSTGRES
    if (dialect == "postgres") b = std::make_unique<postgres_backend>(where, sql);
#endif
#ifdef SQLOCK_BENCH_MYSQL
    if (dialect == "mysql") b = std::make_unique<mysql_backend>(where, sql);
#endif
#ifdef SQLOCK_BENCH_SQLITE
    if (dialect == "sqlite") b = std::make_unique<sqlite_backend>(where, sql);
#endif
    if (!b) throw std::runtime_error("the " + dialect + " backend was left out of this build");
    b->adopt_client(std::move(client), url);
    return b;
}

std::vector<contender> contenders_of(backend& b) {
    std::vector<contender> out;
    const std::string title = b.title();
    for (mode m : b.modes()) {
        // sqlock and the raw SQL of one mode share their keys, so they meet
        // the same rows (created by whichever warms up first).
        auto keys = std::make_shared<std::vector<std::string>>(make_keys(sqlock::to_string(m)));
        const std::string name = sqlock::to_string(m);
        contender lib{title, kind::sqlock, name, "sqlock `" + name + "`", {}, {}};
        lib.cycle = [&b, keys, m](std::uint64_t i) {
            auto lease = b.client().try_acquire((*keys)[i % key_space], {.mode = m, .reentrant = false});
            if (!lease) bench_failure("sqlock found '" + (*keys)[i % key_space] + "' held");
            lease->release();
        };
        lib.statements = [&b] { return b.client().stats().statements; };
        out.push_back(std::move(lib));
        contender raw{title, kind::raw, name, "raw SQL `" + name + "`", {}, {}};
        raw.cycle = [&b, keys, m](std::uint64_t i) { b.raw_cycle(m, (*keys)[i % key_space]); };
        raw.statements = [&b] { return b.raw_statements(); };
        out.push_back(std::move(raw));
    }
    if (const std::string label = b.native_label(); !label.empty()) {
        auto keys = std::make_shared<std::vector<std::string>>(make_keys("native"));
        contender native{title, kind::native, "", "native " + label, {}, {}};
        native.cycle = [&b, keys](std::uint64_t i) { b.native_cycle((*keys)[i % key_space]); };
        native.statements = [&b] { return b.raw_statements(); };
        out.push_back(std::move(native));
    }
    return out;
}

void write_report(const std::string& report, const std::string& file) {
    std::cout << report << std::flush;
    if (file.empty()) return;
    std::ofstream out(file);
    out << report;
    if (!out.flush()) throw std::runtime_error("cannot write " + file);
}

void run_cycles(const options& opt, const machine& m, std::vector<std::unique_ptr<backend>>& backends) {
    std::vector<std::vector<std::string>> facts;
    std::vector<contender> all;
    for (auto& b : backends) {
        facts.push_back(b->facts());
        for (auto& c : contenders_of(*b)) all.push_back(std::move(c));
    }

    for (auto& c : all) {
        std::cerr << "sqlock_bench: warm-up  " << c.backend << " " << c.label << "\n";
        warm_up(c);
    }
    for (int rep = 0; rep < opt.reps; ++rep) {
        // Alternate the direction so no contender always follows the same one.
        for (std::size_t k = 0; k < all.size(); ++k) {
            auto& c = all[rep % 2 == 0 ? k : all.size() - 1 - k];
            measure(c, opt.seconds);
            std::cerr << "sqlock_bench: rep " << rep + 1 << "/" << opt.reps << "  " << c.backend << " " << c.label
                      << ": " << rate_text(c.rates.back()) << " cycles/s\n";
        }
    }

    write_report(render(m, opt, load_average(), backends, facts, all), opt.markdown);
}

void run_renewals(const options& opt, const machine& m, std::vector<std::unique_ptr<backend>>& backends,
                  const std::string& prefix) {
    const renewal_plan plan{opt.renewal_leases, opt.reps, opt.renewal_rounds};
    const std::string when = utc_now(), load_start = load_average();
    std::vector<renewal_report> reports;
    for (auto& b : backends) {
        // The cycles client's watchdog and sweeper would add to the windows.
        b->close_client();
        std::optional<server_cpu> probe;
        if (b->title() == "PostgreSQL" && opt.postgres_pid > 0) probe.emplace(opt.postgres_pid, true);
        if (b->title() == "MariaDB" && opt.mysql_pid > 0) probe.emplace(opt.mysql_pid, false);
        std::vector<std::string> facts = opt.cycles ? std::vector<std::string>{} : b->facts();
        reports.push_back(run_renewal(*b, prefix, plan, probe ? &*probe : nullptr));
        reports.back().facts = std::move(facts);
    }
    // Without the cycles report above it, this one names the machine itself.
    const std::string machine_table = opt.cycles ? "| Machine and build | as in the cycles run above |\n" : machine_rows(m);
    write_report(render_renewal(plan, machine_table, when, load_start, load_average(), reports), opt.renewal_markdown);
}

void run_fairness_workload(const options& opt, const machine& m, std::vector<std::unique_ptr<backend>>& backends,
                           const std::string& prefix) {
    // A waiter process that died early must fail the run with a message
    // (EPIPE from write_all), not end this process with SIGPIPE.
    std::signal(SIGPIPE, SIG_IGN);
    const std::string when = utc_now(), load_start = load_average();
    std::vector<fairness_report> reports;
    for (auto& b : backends) {
        // Only the waiter processes touch the database now.
        b->close_client();
        std::vector<std::string> facts = opt.cycles ? std::vector<std::string>{} : b->facts();
        reports.push_back(run_fairness(*b, prefix, opt));
        reports.back().facts = std::move(facts);
    }
    const std::string machine_table =
        opt.cycles ? "| Machine and build | as in the cycles run above |\n" : machine_rows(m);
    write_report(render_fairness(opt, machine_table, when, load_start, load_average(), reports),
                 opt.fairness_markdown);
}

int run(const options& opt) {
    const machine m = machine::gather();
    const std::string prefix = random_prefix();
    std::cerr << "sqlock_bench: table prefix " << prefix << "\n";

    std::vector<std::unique_ptr<backend>> backends;
    // Leave no bench_* tables behind, whether the run finishes or fails.
    struct dropper {
        std::vector<std::unique_ptr<backend>>& backends;
        ~dropper() {
            for (auto& b : backends) {
                try {
                    b->close_client();
                    b->drop_tables();
                } catch (const std::exception& e) {
                    std::cerr << "sqlock_bench: dropping the " << b->title() << " bench tables failed: " << e.what()
                              << "\n";
                }
            }
        }
    } drop_at_exit{backends};
    if (!opt.postgres.empty()) backends.push_back(open_backend("postgres", opt.postgres, opt, prefix));
    if (!opt.mysql.empty()) backends.push_back(open_backend("mysql", opt.mysql, opt, prefix));
    if (!opt.sqlite.empty()) backends.push_back(open_backend("sqlite", opt.sqlite, opt, prefix));

    if (opt.cycles) run_cycles(opt, m, backends);
    if (opt.renewal) run_renewals(opt, m, backends, prefix);
    if (opt.fairness) run_fairness_workload(opt, m, backends, prefix);
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    // A waiter process of the fairness workload (started by this program itself).
    if (argc > 1 && std::string_view(argv[1]) == "--waiter") return run_waiter(argc, argv);
    const options opt = parse_args(argc, argv);
    try {
        return run(opt);
    } catch (const std::exception& e) {
        std::cerr << "sqlock_bench: " << e.what() << "\n";
        return 1;
    }
}
