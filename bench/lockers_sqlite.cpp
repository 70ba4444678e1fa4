// SQLite contenders: raw SQL, ShedLock's and Spring's statements. SQLite has
// no named lock of its own.

#include "lockers.hpp"

#ifdef SQLOCK_BENCH_SQLITE

#include <sqlite3.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <ctime>
#include <map>
#include <optional>
#include <set>

namespace bench {

namespace {

// The statements in sql/sqlite/ read the clock through <prefix>now_ms(), which
// every connection must register; the library's reads the real-time clock by
// raw system call, and so does this one, at the same cost.
void now_ms(sqlite3_context* context, int, sqlite3_value**) {
    timespec ts{};
    syscall(SYS_clock_gettime, CLOCK_REALTIME, &ts);
    sqlite3_result_int64(context, static_cast<sqlite3_int64>(ts.tv_sec) * 1000 + ts.tv_nsec / 1'000'000);
}

// One connection with the library's flags and pragmas, its prepared
// statements and a statement counter.
class session {
public:
    session(const target& t, bool relaxed, std::uint64_t& counter) : counter_(counter) {
        if (sqlite3_open_v2(t.sqlite.c_str(), &db_, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX,
                            nullptr) != SQLITE_OK)
            failure("cannot open sqlite database '" + t.sqlite + "'");
        sqlite3_busy_timeout(db_, 10'000);
        const std::string fn = t.prefix + "now_ms";
        sqlite3_create_function_v2(db_, fn.c_str(), 0, SQLITE_UTF8, nullptr, now_ms, nullptr, nullptr, nullptr);
        exec("PRAGMA journal_mode=WAL");
        exec("PRAGMA foreign_keys=ON");
        exec("PRAGMA temp_store=MEMORY");
        if (relaxed) exec(sql_texts(std::filesystem::path(t.sql_dir) / "sqlite", t.prefix).get("relaxed_durability"));
    }
    ~session() {
        for (auto& [name, st] : statements_) sqlite3_finalize(st);
        sqlite3_close_v2(db_);
    }
    session(const session&) = delete;
    session& operator=(const session&) = delete;

    void prepare(const std::string& name, const std::string& text) {
        sqlite3_stmt* st = nullptr;
        if (sqlite3_prepare_v3(db_, text.c_str(), static_cast<int>(text.size()), SQLITE_PREPARE_PERSISTENT, &st,
                               nullptr) != SQLITE_OK)
            failure("preparing " + name + ": " + sqlite3_errmsg(db_));
        statements_[name] = st;
    }

    // Runs a prepared statement with text and integer arguments; returns the
    // first column of its first row (or nullopt for no row) and sets changes().
    template <typename... Args>
    std::optional<std::int64_t> run(const std::string& name, const Args&... args) {
        sqlite3_stmt* st = statements_.at(name);
        int i = 0;
        (bind(st, ++i, args), ...);
        ++counter_;
        std::optional<std::int64_t> first;
        int rc = sqlite3_step(st);
        if (rc == SQLITE_ROW) {
            first = sqlite3_column_int64(st, 0);
            // Drain: RETURNING rows are produced before the statement completes.
            while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
            }
        }
        changes_ = sqlite3_changes(db_);
        const int err = sqlite3_extended_errcode(db_);
        sqlite3_reset(st);
        sqlite3_clear_bindings(st);
        if (rc != SQLITE_DONE) {
            if ((err & 0xff) == SQLITE_CONSTRAINT) throw constraint{};
            failure(name + ": " + sqlite3_errstr(err));
        }
        return first;
    }
    int changes() const { return changes_; }
    void exec(const std::string& text) {
        if (sqlite3_exec(db_, text.c_str(), nullptr, nullptr, nullptr) != SQLITE_OK)
            failure(text + ": " + sqlite3_errmsg(db_));
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

    struct constraint {};  // a UNIQUE or PRIMARY KEY violation

private:
    static void bind(sqlite3_stmt* st, int i, const std::string& v) {
        sqlite3_bind_text(st, i, v.data(), static_cast<int>(v.size()), SQLITE_STATIC);
    }
    static void bind(sqlite3_stmt* st, int i, std::int64_t v) { sqlite3_bind_int64(st, i, v); }

    std::uint64_t& counter_;
    sqlite3* db_ = nullptr;
    std::map<std::string, sqlite3_stmt*, std::less<>> statements_;
    int changes_ = 0;
};

// The statements sqlock sends for one mode: one upsert grants (triggers copy
// the token into the fence table), one statement releases.
class raw_locker final : public counted_locker {
public:
    raw_locker(const contender& c, const target& t, const locker_settings& s)
        : main_(t, c.relaxed, statements_), mode_(c.mode), lease_ms_(s.lease.count()), relaxed_(c.relaxed) {
        const sql_texts sql(std::filesystem::path(t.sql_dir) / "sqlite", t.prefix);
        for (const char* name : {"grant", "release_delete", "release_clear", "renew"}) main_.prepare(name, sql.get(name));
    }

    bool try_lock(const std::string& key) override {
        const std::string& owner = owners_.next();
        auto token = main_.run("grant", key, owner, mode_, lease_ms_, holder_, note_, no_ticket, not_fair);
        if (!token) return false;
        token_ = *token;
        held_[key] = owner;
        return true;
    }
    void unlock(const std::string& key) override {
        auto it = held_.find(key);
        if (it == held_.end()) failure("raw: unlock of '" + key + "', which is not held");
        // As the library does: a release's commit does not wait for the disk
        // (src/dialects/sqlite/session.hpp, unflushed()).
        if (!relaxed_) main_.exec("PRAGMA synchronous = NORMAL");
        main_.run(mode_ == "unique_insert" ? "release_delete" : "release_clear", key, it->second);
        if (!relaxed_) main_.exec("PRAGMA synchronous = FULL");
        held_.erase(it);
        if (main_.changes() != 1) failure("raw release did not find '" + key + "'");
    }
    bool renew(const std::string& key) override {
        auto it = held_.find(key);
        if (it == held_.end()) return false;
        main_.run("renew", key, it->second, lease_ms_);
        return main_.changes() == 1;
    }

private:
    session main_;
    std::string mode_;
    std::int64_t lease_ms_;
    bool relaxed_;
    owner_source owners_;
    std::map<std::string, std::string, std::less<>> held_;
    const std::string holder_ = holder_text();
    const std::string note_;
};

// ShedLock's statements; see lockers_postgres.cpp. Timestamps are ISO text,
// which compares in time order.
class shedlock_locker final : public counted_locker {
public:
    shedlock_locker(const target& t, const locker_settings& s) : main_(t, false, statements_), lease_ms_(s.lease.count()) {
        const std::string table = t.prefix + "shedlock";
        main_.prepare("insert", "INSERT INTO " + table + " (name, lock_until, locked_at, locked_by) VALUES (?, ?, ?, ?)");
        main_.prepare("update", "UPDATE " + table +
                                    " SET lock_until = ?2, locked_at = ?3, locked_by = ?4 WHERE name = ?1 AND lock_until <= ?3");
        main_.prepare("unlock", "UPDATE " + table + " SET lock_until = ?2 WHERE name = ?1");
        main_.prepare("extend", "UPDATE " + table + " SET lock_until = ?2 WHERE name = ?1 AND locked_by = ?3 AND lock_until > ?4");
    }
    bool try_lock(const std::string& key) override {
        const std::string now = client_time(0), until = client_time(lease_ms_);
        if (!known_.contains(key)) {
            try {
                main_.run("insert", key, until, now, me_);
                known_.insert(key);
                return true;
            } catch (const session::constraint&) {
                known_.insert(key);
            }
        }
        main_.run("update", key, until, now, me_);
        return main_.changes() == 1;
    }
    void unlock(const std::string& key) override { main_.run("unlock", key, client_time(0)); }
    bool renew(const std::string& key) override {
        main_.run("extend", key, client_time(lease_ms_), me_, client_time(0));
        return main_.changes() == 1;
    }

private:
    session main_;
    std::int64_t lease_ms_;
    const std::string me_ = holder_text() + ":" + owner_source().next().substr(16);  // one per locker
    std::set<std::string, std::less<>> known_;
};

// Spring's DefaultLockRepository; see lockers_postgres.cpp.
class spring_locker final : public counted_locker {
public:
    spring_locker(const target& t, const locker_settings& s) : main_(t, false, statements_), ttl_ms_(s.lease.count()) {
        const std::string table = t.prefix + "int_lock";
        main_.prepare("begin", "BEGIN");
        main_.prepare("commit", "COMMIT");
        main_.prepare("rollback", "ROLLBACK");
        main_.prepare("update", "UPDATE " + table +
                                    " SET client_id = ?1, created_date = ?2 WHERE region = ?3 AND lock_key = ?4 AND "
                                    "(client_id = ?1 OR created_date < ?5)");
        main_.prepare("insert", "INSERT INTO " + table + " (region, lock_key, client_id, created_date) VALUES (?, ?, ?, ?)");
        main_.prepare("delete", "DELETE FROM " + table + " WHERE region = ? AND lock_key = ? AND client_id = ?");
        main_.prepare("renew", "UPDATE " + table + " SET created_date = ? WHERE region = ? AND lock_key = ? AND client_id = ?");
    }
    bool try_lock(const std::string& key) override {
        const std::string lock_key = uuid_of(key);
        main_.run("begin");
        bool ok = false;
        try {
            main_.run("update", id_, client_time(0), region_, lock_key, client_time(-ttl_ms_));
            if (main_.changes() > 0) {
                ok = true;
            } else {
                main_.run("insert", region_, lock_key, id_, client_time(0));
                ok = true;
            }
        } catch (const session::constraint&) {
        }
        main_.run(ok ? "commit" : "rollback");
        return ok;
    }
    void unlock(const std::string& key) override {
        main_.run("delete", region_, uuid_of(key), id_);
        if (main_.changes() != 1) failure("spring: delete found no lock '" + key + "'");
    }
    bool renew(const std::string& key) override {
        main_.run("renew", client_time(0), region_, uuid_of(key), id_);
        return main_.changes() == 1;
    }

private:
    session main_;
    std::int64_t ttl_ms_;
    const std::string id_ = uuid_of(owner_source().next());  // one per locker, like a repository per process
    const std::string region_ = "DEFAULT";
};

}  // namespace

std::unique_ptr<locker> open_sqlite_locker(const contender& c, const target& t, const locker_settings& s) {
    switch (c.kind) {
        case family::raw: return std::make_unique<raw_locker>(c, t, s);
        case family::shedlock: return std::make_unique<shedlock_locker>(t, s);
        case family::spring: return std::make_unique<spring_locker>(t, s);
        default: failure("no SQLite contender '" + c.id + "'");
    }
}

void sqlite_tables(const target& t, bool create) {
    std::uint64_t n = 0;
    session s(t, false, n);
    if (create) {
        s.exec("CREATE TABLE IF NOT EXISTS " + t.prefix +
               "shedlock (name VARCHAR(64) NOT NULL PRIMARY KEY, lock_until TEXT NOT NULL, locked_at TEXT NOT NULL, "
               "locked_by VARCHAR(255) NOT NULL)");
        s.exec("CREATE TABLE IF NOT EXISTS " + t.prefix +
               "int_lock (lock_key CHAR(36) NOT NULL, region VARCHAR(100) NOT NULL, client_id CHAR(36), "
               "created_date TEXT NOT NULL, PRIMARY KEY (lock_key, region))");
        return;
    }
    for (const char* table : bench_tables)
        s.exec("DROP TABLE IF EXISTS " + t.prefix + table);
}

std::vector<std::string> sqlite_facts(const target& t) {
    std::uint64_t n = 0;
    session s(t, false, n);
    static const char* const sync_names[] = {"OFF", "NORMAL", "FULL", "EXTRA"};
    const auto sync = s.pragma("synchronous");
    return {
        std::string("Library: SQLite ") + sqlite3_libversion() + ", in process",
        "Settings: journal_mode=" + s.pragma("journal_mode") + ", synchronous=" +
            (sync.size() == 1 && sync[0] >= '0' && sync[0] <= '3' ? sync_names[sync[0] - '0'] : sync) +
            " (the build default, which strict keeps; relaxed uses NORMAL), temp_store=" +
            (s.pragma("temp_store") == "2" ? std::string("MEMORY") : s.pragma("temp_store")),
    };
}

}  // namespace bench

#else

namespace bench {
std::unique_ptr<locker> open_sqlite_locker(const contender&, const target&, const locker_settings&) {
    failure("this bench was built without SQLite (SQLOCK_WITH_SQLITE=OFF)");
}
void sqlite_tables(const target&, bool) { failure("this bench was built without SQLite"); }
std::vector<std::string> sqlite_facts(const target&) { failure("this bench was built without SQLite"); }
}  // namespace bench

#endif
