#include "lockers.hpp"

#include <sqlock/sqlock.hpp>

#include <cstdio>
#include <ctime>
#include <functional>
#include <map>
#include <optional>
#include <stdexcept>
#include <thread>

namespace bench {

namespace {

std::vector<std::string> split(const std::string& s, char sep) {
    std::vector<std::string> out;
    std::size_t pos = 0;
    for (auto hit = s.find(sep); hit != std::string::npos; hit = s.find(sep, pos)) {
        out.push_back(s.substr(pos, hit - pos));
        pos = hit + 1;
    }
    out.push_back(s.substr(pos));
    return out;
}

const char* short_mode(const std::string& mode) {
    if (mode == "unique_insert") return "insert";
    if (mode == "conditional_update") return "update";
    return "for-update";
}

}  // namespace

std::string backend_title(const std::string& backend) {
    if (backend == "postgres") return "PostgreSQL";
    if (backend == "mysql") return "MariaDB";
    if (backend == "sqlite") return "SQLite";
    return "Redis";
}

contender contender::parse(const std::string& id) {
    const auto parts = split(id, '.');
    contender c;
    c.id = id;
    c.backend = parts[0];
    const bool redis = c.backend == "redis" || c.backend == "redis-aof";
    if (!redis && c.backend != "postgres" && c.backend != "mysql" && c.backend != "sqlite")
        throw std::invalid_argument("unknown backend in contender '" + id + "'");
    if (parts.size() < 2) throw std::invalid_argument("contender '" + id + "' names no kind");
    std::string kind = parts[1];
    if (kind.ends_with("-relaxed")) {
        c.relaxed = true;
        kind.resize(kind.size() - 8);
    }
    const std::string mode = parts.size() > 2 ? parts[2] : "";
    for (const char* p : {"shared", "permit", "set3"}) {
        if (kind == std::string("sqlock-") + p && !c.relaxed) {
            c.primitive = p;
            kind = "sqlock";
        }
    }
    if (kind == "sqlock" || kind == "raw") {
        if (mode != "unique_insert" && mode != "conditional_update" && mode != "select_for_update")
            throw std::invalid_argument("contender '" + id + "' needs a mode");
        c.kind = kind == "sqlock" ? family::sqlock : family::raw;
        c.mode = mode;
        c.label = std::string(kind == "sqlock" ? "sqlock " : "raw ") +
                  (c.primitive == "shared"   ? "shared "
                   : c.primitive == "permit" ? "permit "
                   : c.primitive == "set3"   ? "3 keys "
                                             : "") +
                  short_mode(mode) + (c.relaxed ? " relaxed" : "");
        if (!c.primitive.empty() && mode == "select_for_update")
            throw std::invalid_argument("contender '" + id + "': shared locks, permits and sets are leases");
    } else if (kind == "native" && !redis && c.backend != "sqlite") {
        c.kind = family::native;
        c.label = c.backend == "postgres" ? "advisory lock" : "GET_LOCK";
    } else if (kind == "shedlock" && !redis) {
        c.kind = family::shedlock;
        c.label = "ShedLock SQL";
    } else if (kind == "spring" && !redis) {
        c.kind = family::spring;
        c.label = "Spring SQL";
    } else if (kind == "ceiling" && c.backend == "postgres") {
        c.kind = family::ceiling;
        c.label = "counter in the lock row (shape)";
    } else if (kind == "redis" && redis) {
        c.kind = family::redis;
        c.label = c.backend == "redis" ? "Redis" : "Redis fsync always";
    } else {
        throw std::invalid_argument("unknown contender '" + id + "'");
    }
    if (c.relaxed && c.kind != family::sqlock && c.kind != family::raw)
        throw std::invalid_argument("only sqlock and raw contenders have a relaxed variant: '" + id + "'");
    return c;
}

bool locker::lock(const std::string& key, std::int64_t deadline) {
    // Contenders without a way to wait poll, once a millisecond.
    for (;;) {
        if (try_lock(key)) return true;
        if (monotonic_ns() >= deadline) return false;
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
}

namespace {

// The library: one client per locker, the defaults but for the sweeper (its
// statements would count towards the lock's) and the table prefix.
class sqlock_locker final : public locker {
public:
    sqlock_locker(const contender& c, const target& t, const locker_settings& s)
        : client_(std::make_shared<sqlock::client>(open_client(c, t))),
          options_{.mode = c.mode == "unique_insert"        ? sqlock::mode::unique_insert
                           : c.mode == "conditional_update" ? sqlock::mode::conditional_update
                                                            : sqlock::mode::select_for_update,
                   .lease = s.lease,
                   .reentrant = false,
                   .fair = s.fair},
          primitive_(c.primitive) {}

    bool try_lock(const std::string& key) override { return take(key, std::nullopt); }

    bool lock(const std::string& key, std::int64_t deadline) override {
        const std::int64_t left = deadline - monotonic_ns();
        if (left <= 0) return try_lock(key);
        try {
            return take(key, std::chrono::milliseconds((left + 999'999) / 1'000'000));
        } catch (const sqlock::timeout_error&) {
            return false;
        }
    }

    void unlock(const std::string& key) override {
        if (auto it = sets_.find(key); it != sets_.end()) {
            it->second.release();
            sets_.erase(it);
            return;
        }
        auto it = held_.find(key);
        if (it == held_.end()) failure("sqlock: unlock of '" + key + "', which is not held");
        it->second.release();
        held_.erase(it);
    }

    // The watchdog renews; the renewal workload measures it on its own.
    bool renew(const std::string& key) override { return held_.contains(key); }
    bool needs_renewal() const override { return false; }
    std::uint64_t statements() const override { return counts_ ? client_->stats().statements : 0; }

    std::unique_ptr<locker> share() override {
        return std::unique_ptr<locker>(new sqlock_locker(client_, options_, primitive_));
    }
    std::int64_t token() const override { return token_; }

private:
    sqlock_locker(std::shared_ptr<sqlock::client> c, const sqlock::lock_options& o, std::string primitive)
        : client_(std::move(c)), counts_(false), options_(o), primitive_(std::move(primitive)) {}

    // The contender's primitive on key: one try (no wait), else acquire with that timeout.
    bool take(const std::string& key, std::optional<std::chrono::milliseconds> wait) {
        if (primitive_ == "set3") {
            const std::vector<std::string> keys{key + "#1", key + "#2", key + "#3"};
            auto set = wait ? std::optional(client_->acquire_all(keys, *wait, options_))
                            : client_->try_acquire_all(keys, options_);
            if (!set) return false;
            token_ = set->tokens().front();
            sets_.insert_or_assign(key, std::move(*set));
            return true;
        }
        std::optional<sqlock::lease> l;
        if (primitive_ == "shared")
            l = wait ? std::optional(client_->acquire_shared(key, *wait, options_))
                     : client_->try_acquire_shared(key, options_);
        else if (primitive_ == "permit")
            l = wait ? std::optional(client_->acquire_permit(key, 1, *wait, options_))
                     : client_->try_acquire_permit(key, 1, options_);
        else
            l = wait ? std::optional(client_->acquire(key, *wait, options_)) : client_->try_acquire(key, options_);
        if (!l) return false;
        token_ = l->token();
        held_.insert_or_assign(key, std::move(*l));
        return true;
    }

    static sqlock::client open_client(const contender& c, const target& t) {
        sqlock::client_options o;
        o.table_prefix = t.prefix;
        o.sweep = false;
        if (c.relaxed) o.durability = sqlock::durability::relaxed;
        const std::string url = c.backend == "postgres" ? t.postgres
                                : c.backend == "mysql"  ? t.mysql
                                                        : "sqlite:" + t.sqlite;
        return sqlock::client::open(url, o);
    }

    std::shared_ptr<sqlock::client> client_;  // shared by the handles share() made
    bool counts_ = true;                       // statements(): the first handle reports the client's
    sqlock::lock_options options_;
    std::string primitive_;
    std::map<std::string, sqlock::lease, std::less<>> held_;
    std::map<std::string, sqlock::multi_lease, std::less<>> sets_;
    std::int64_t token_ = 0;
};

using opener = std::unique_ptr<locker> (*)(const contender&, const target&, const locker_settings&);

opener backend_opener(const std::string& backend) {
    if (backend == "postgres") return open_postgres_locker;
    if (backend == "mysql") return open_mysql_locker;
    if (backend == "sqlite") return open_sqlite_locker;
    return open_redis_locker;
}

}  // namespace

std::unique_ptr<locker> open_sqlock_locker(const contender& c, const target& t, const locker_settings& s) {
    return std::make_unique<sqlock_locker>(c, t, s);
}

std::unique_ptr<locker> open_locker(const contender& c, const target& t, const locker_settings& s) {
    if (c.kind == family::sqlock) return open_sqlock_locker(c, t, s);
    return backend_opener(c.backend)(c, t, s);
}

void create_tables(const std::string& backend, const target& t) {
    if (backend == "postgres") postgres_tables(t, true);
    else if (backend == "mysql") mysql_tables(t, true);
    else if (backend == "sqlite") sqlite_tables(t, true);
    else redis_flush(t, backend);
}

void drop_tables(const std::string& backend, const target& t) {
    if (backend == "postgres") postgres_tables(t, false);
    else if (backend == "mysql") mysql_tables(t, false);
    else if (backend == "sqlite") sqlite_tables(t, false);
    else redis_flush(t, backend);
}

std::vector<std::string> server_facts(const std::string& backend, const target& t) {
    if (backend == "postgres") return postgres_facts(t);
    if (backend == "mysql") return mysql_facts(t);
    if (backend == "sqlite") return sqlite_facts(t);
    return redis_facts(t, backend);
}

std::string client_time(std::int64_t offset_ms) {
    timespec ts{};
    clock_gettime(CLOCK_REALTIME, &ts);
    const std::int64_t ms = static_cast<std::int64_t>(ts.tv_sec) * 1000 + ts.tv_nsec / 1'000'000 + offset_ms;
    const std::time_t secs = static_cast<std::time_t>(ms / 1000);
    std::tm tm{};
    gmtime_r(&secs, &tm);
    char buf[40];
    const std::size_t n = std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S", &tm);
    std::snprintf(buf + n, sizeof buf - n, ".%03d", static_cast<int>(ms % 1000));
    return buf;
}

std::string uuid_of(const std::string& key) {
    // Not Spring's name-based UUID (MD5), but the same shape: 36 characters,
    // distinct per key.
    const std::size_t h1 = std::hash<std::string>{}(key);
    const std::size_t h2 = std::hash<std::string>{}(key + "#");
    char buf[40];
    std::snprintf(buf, sizeof buf, "%08x-%04x-%04x-%04x-%012llx", static_cast<unsigned>(h1 >> 32),
                  static_cast<unsigned>((h1 >> 16) & 0xffff), static_cast<unsigned>(h1 & 0xffff),
                  static_cast<unsigned>(h2 >> 48), static_cast<unsigned long long>(h2 & 0xffffffffffffULL));
    return buf;
}

}  // namespace bench
