// PostgreSQL contenders through libpqxx: raw SQL, advisory locks, ShedLock's
// and Spring's statements.

#include "lockers.hpp"

#ifdef SQLOCK_BENCH_POSTGRES

#include <libpq-fe.h>
#include <pqxx/pqxx>

#include <map>
#include <optional>
#include <set>

namespace bench {

namespace {

constexpr const char* lock_not_available = "55P03";  // NOWAIT, lock_timeout

// One connection with a statement counter.
class session {
public:
    session(const std::string& url, std::uint64_t& counter) : conn_(url), counter_(counter) {}
    pqxx::connection& conn() { return conn_; }
    template <typename... Args>
    pqxx::result run(const std::string& name, Args&&... args) {
        pqxx::nontransaction tx(conn_);
        ++counter_;
        return tx.exec_prepared(name, std::forward<Args>(args)...);
    }
    void exec(const std::string& text) {
        pqxx::nontransaction tx(conn_);
        ++counter_;
        tx.exec(text);
    }

private:
    pqxx::connection conn_;
    std::uint64_t& counter_;
};

// What the library runs on each new connection, with its default timeouts.
void library_setup(session& s, const sql_texts& texts, bool relaxed) {
    pqxx::nontransaction tx(s.conn());
    tx.exec_params(texts.get("session_setup"), "200", "10000", relaxed);
}

// The statements sqlock sends for one mode, with the library's session setup.
class raw_locker final : public counted_locker {
public:
    raw_locker(const contender& c, const target& t, const locker_settings& s)
        : sql_(std::filesystem::path(t.sql_dir) / "postgres", t.prefix),
          main_(t.postgres, statements_),
          mode_(c.mode),
          lease_ms_(s.lease.count()) {
        library_setup(main_, sql_, c.relaxed);
        for (const char* name :
             {"grant_try", "release_delete", "release_clear", "lock_row", "read_token", "release_row_lock", "renew"})
            main_.conn().prepare(name, sql_.get(name));
        if (mode_ == "select_for_update") {
            second_.emplace(t.postgres, statements_);
            library_setup(*second_, sql_, c.relaxed);
            for (const char* name : {"bump_token", "ensure_row"}) second_->conn().prepare(name, sql_.get(name));
            // What the library runs once on a connection it pins for select_for_update.
            pqxx::nontransaction tx(main_.conn());
            tx.exec_params(sql_.get("pin_session"), std::to_string(lease_ms_));
        }
        statements_ = 0;
    }

    bool try_lock(const std::string& key) override {
        if (mode_ == "select_for_update") return lock_row(key);
        const std::string& owner = owners_.next();
        // The library's try_acquire: no ticket, no remaining lease wanted.
        auto r = main_.run("grant_try", key, owner, mode_, lease_ms_, holder_, note_, no_ticket, not_fair);
        if (r[0][0].is_null()) return false;
        token_ = r[0][0].as<std::int64_t>();
        held_[key] = owner;
        return true;
    }

    void unlock(const std::string& key) override {
        if (mode_ == "select_for_update") {
            if (!held_tx_) failure("raw select_for_update: unlock without a lock");
            // The library's release: the next waiter's NOTIFY in the held
            // transaction, then COMMIT, which ends the row lock and sends it.
            statements_ += 2;
            held_tx_->exec_prepared("release_row_lock", key);
            held_tx_->commit();
            held_tx_.reset();
            return;
        }
        auto it = held_.find(key);
        if (it == held_.end()) failure("raw: unlock of '" + key + "', which is not held");
        auto r = main_.run(mode_ == "unique_insert" ? "release_delete" : "release_clear", key, it->second);
        held_.erase(it);
        if (r[0][0].as<std::int64_t>() != 1) failure("raw release did not find '" + key + "'");
    }

    bool renew(const std::string& key) override {
        auto it = held_.find(key);
        return it != held_.end() && main_.run("renew", key, it->second, lease_ms_)[0][0].as<bool>();
    }

private:
    // BEGIN; lock the row NOWAIT (creating it first if missing, as the
    // library does); bump the fence on the second connection; read it back
    // in the held transaction. The open
    // transaction holds the key; ROLLBACK releases it.
    bool lock_row(const std::string& key) {
        if (held_tx_) failure("raw select_for_update holds one key at a time");
        for (int attempt = 0; attempt < 2; ++attempt) {
            held_tx_.emplace(main_.conn());
            statements_ += 2;  // BEGIN, lock_row
            pqxx::result row;
            try {
                row = held_tx_->exec_prepared("lock_row", key, no_ticket, not_fair);
            } catch (const pqxx::sql_error& e) {
                ++statements_;
                held_tx_->abort();
                held_tx_.reset();
                if (e.sqlstate() == lock_not_available) return false;
                throw;
            }
            // One row: present, locked (free and now ours), remaining, counter.
            if (!row[0][1].as<bool>()) {
                ++statements_;  // ROLLBACK
                held_tx_->abort();
                held_tx_.reset();
                if (row[0][0].as<bool>()) return false;
                second_->run("ensure_row", key);
                continue;
            }
            // As the library: the bump from the counter lock_row read (a compare-and-set).
            const auto bumped = second_->run("bump_token", key, row[0][3].as<std::int64_t>());
            if (bumped.empty()) failure("raw select_for_update: the counter moved under the row lock");
            token_ = bumped[0][0].as<std::int64_t>();
            // As the library: the token read back in the held transaction.
            ++statements_;
            if (held_tx_->exec_prepared1("read_token", key)[0].as<std::int64_t>() != token_)
                failure("raw select_for_update: the token changed under the row lock");
            return true;
        }
        failure("raw ensure_row did not create '" + key + "'");
    }

    sql_texts sql_;
    session main_;
    std::optional<session> second_;  // select_for_update's fence bump, outside the held transaction
    std::optional<pqxx::work> held_tx_;
    std::string mode_;
    std::int64_t lease_ms_;
    owner_source owners_;
    std::map<std::string, std::string, std::less<>> held_;  // key → owner
    const std::string holder_ = holder_text();
    const std::string note_;
};

// sqlock's conditional_update grant as it would be with the fencing counter
// kept in the lock row (lockers.hpp): one UPDATE that checks the waiter
// table, takes the row and returns the bumped counter; the first grant of a
// key inserts the row first. The release is sqlock's release_clear statement
// on this table.
class ceiling_locker final : public counted_locker {
public:
    ceiling_locker(const target& t, const locker_settings& s)
        : main_(t.postgres, statements_), lease_ms_(s.lease.count()) {
        const sql_texts sql(std::filesystem::path(t.sql_dir) / "postgres", t.prefix);
        const std::string table = t.prefix + "ceiling";
        library_setup(main_, sql, false);
        main_.conn().prepare("grant", "UPDATE " + table + " AS l SET owner = $2, mode = 'conditional_update', "
                                      "expires_at = clock_timestamp() + $3::bigint * interval '1 millisecond', "
                                      "acquired_at = clock_timestamp(), holder = $4, note = $5, token = l.token + 1 "
                                      "WHERE l.lock_key = $1 AND (l.owner IS NULL OR l.expires_at <= clock_timestamp() "
                                      "OR l.owner = $2) AND NOT EXISTS (SELECT 1 FROM " + t.prefix + "waiters w "
                                      "WHERE w.lock_key = $1 AND w.expires_at > clock_timestamp()) RETURNING l.token");
        main_.conn().prepare("create", "INSERT INTO " + table + " (lock_key) VALUES ($1) ON CONFLICT DO NOTHING");
        main_.conn().prepare("release", replace_table(sql.get("release_clear"), t.prefix + "locks", table));
        main_.conn().prepare("renew", "UPDATE " + table + " SET expires_at = clock_timestamp() + $3::bigint * "
                                      "interval '1 millisecond' WHERE lock_key = $1 AND owner = $2");
        statements_ = 0;
    }

    bool try_lock(const std::string& key) override {
        const std::string& owner = owners_.next();
        if (!known_.contains(key)) {
            main_.run("create", key);
            known_.insert(key);
        }
        auto r = main_.run("grant", key, owner, lease_ms_, holder_, note_);
        if (r.empty()) return false;
        token_ = r[0][0].as<std::int64_t>();
        held_[key] = owner;
        return true;
    }
    void unlock(const std::string& key) override {
        auto it = held_.find(key);
        if (it == held_.end()) failure("ceiling: unlock of '" + key + "', which is not held");
        auto r = main_.run("release", key, it->second);
        held_.erase(it);
        if (r[0][0].as<std::int64_t>() != 1) failure("ceiling release did not find '" + key + "'");
    }
    bool renew(const std::string& key) override {
        auto it = held_.find(key);
        return it != held_.end() && main_.run("renew", key, it->second, lease_ms_).affected_rows() == 1;
    }

private:
    // `text` with every `from` (a table name followed by a space or a line end) replaced by `to`.
    static std::string replace_table(std::string text, const std::string& from, const std::string& to) {
        for (auto at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size())) {
            const auto end = at + from.size();
            if (end < text.size() && text[end] != ' ' && text[end] != '\n') continue;
            text.replace(at, from.size(), to);
        }
        return text;
    }

    session main_;
    std::int64_t lease_ms_;
    owner_source owners_;
    std::set<std::string, std::less<>> known_;              // keys whose row exists
    std::map<std::string, std::string, std::less<>> held_;  // key → owner
    const std::string holder_ = holder_text();
    const std::string note_;
};

// pg_try_advisory_lock / pg_advisory_lock + pg_advisory_unlock on a session
// of its own (no sqlock setup: the server's defaults).
class native_locker final : public counted_locker {
public:
    native_locker(const target& t) : main_(t.postgres, statements_) {
        main_.conn().prepare("try", "SELECT pg_try_advisory_lock(hashtext($1))");
        // set_config runs before the lock call in the same statement, so the
        // wait is bounded by the caller's deadline.
        main_.conn().prepare("wait", "SELECT set_config('lock_timeout', $2 || 'ms', false), "
                                     "pg_advisory_lock(hashtext($1))");
        main_.conn().prepare("unlock", "SELECT pg_advisory_unlock(hashtext($1))");
    }

    bool try_lock(const std::string& key) override { return main_.run("try", key)[0][0].as<bool>(); }

    bool lock(const std::string& key, std::int64_t deadline) override {
        const std::int64_t left_ms = (deadline - monotonic_ns()) / 1'000'000;
        if (left_ms <= 0) return try_lock(key);
        try {
            main_.run("wait", key, std::to_string(left_ms));
            return true;
        } catch (const pqxx::sql_error& e) {
            if (e.sqlstate() == lock_not_available) return false;
            throw;
        }
    }

    void unlock(const std::string& key) override {
        if (!main_.run("unlock", key)[0][0].as<bool>()) failure("pg_advisory_unlock: '" + key + "' was not held");
    }
    bool renew(const std::string&) override { return true; }
    bool needs_renewal() const override { return false; }

private:
    session main_;
};

// ShedLock's statements (JdbcTemplateStorageAccessor with its default client
// clock): the first lock of a name INSERTs its row, later ones UPDATE it
// where lock_until <= now; unlock sets lock_until to now; KeepAliveLockProvider
// extends a held lock with UPDATE ... WHERE locked_by = me AND lock_until > now.
class shedlock_locker final : public counted_locker {
public:
    shedlock_locker(const target& t, const locker_settings& s)
        : main_(t.postgres, statements_), lease_ms_(s.lease.count()) {
        const std::string table = t.prefix + "shedlock";
        main_.conn().prepare("insert", "INSERT INTO " + table +
                                           " (name, lock_until, locked_at, locked_by) "
                                           "VALUES ($1, $2::timestamp, $3::timestamp, $4)");
        main_.conn().prepare("update", "UPDATE " + table +
                                           " SET lock_until = $2::timestamp, locked_at = $3::timestamp, "
                                           "locked_by = $4 WHERE name = $1 AND lock_until <= $3::timestamp");
        main_.conn().prepare("unlock", "UPDATE " + table + " SET lock_until = $2::timestamp WHERE name = $1");
        main_.conn().prepare("extend", "UPDATE " + table +
                                           " SET lock_until = $2::timestamp WHERE name = $1 AND locked_by = $3 "
                                           "AND lock_until > $4::timestamp");
    }

    bool try_lock(const std::string& key) override {
        const std::string now = client_time(0), until = client_time(lease_ms_);
        if (!known_.contains(key)) {
            try {
                main_.run("insert", key, until, now, me_);
                known_.insert(key);
                return true;
            } catch (const pqxx::unique_violation&) {
                known_.insert(key);
            }
        }
        return main_.run("update", key, until, now, me_).affected_rows() == 1;
    }
    void unlock(const std::string& key) override { main_.run("unlock", key, client_time(0)); }
    bool renew(const std::string& key) override {
        return main_.run("extend", key, client_time(lease_ms_), me_, client_time(0)).affected_rows() == 1;
    }

private:
    session main_;
    std::int64_t lease_ms_;
    const std::string me_ = holder_text() + ":" + owner_source().next().substr(16);  // one per locker
    std::set<std::string, std::less<>> known_;  // names whose row exists
};

// Spring Integration's DefaultLockRepository: acquire in a READ COMMITTED
// transaction (UPDATE where the row is mine or expired by the client clock,
// else INSERT; a duplicate key means taken), release by DELETE, renew by
// UPDATE of created_date.
class spring_locker final : public counted_locker {
public:
    spring_locker(const target& t, const locker_settings& s)
        : main_(t.postgres, statements_), ttl_ms_(s.lease.count()) {
        const std::string table = t.prefix + "int_lock";
        main_.conn().prepare("update", "UPDATE " + table +
                                           " SET client_id = $1, created_date = $2::timestamp "
                                           "WHERE region = $3 AND lock_key = $4 AND (client_id = $1 OR "
                                           "created_date < $5::timestamp)");
        main_.conn().prepare("insert", "INSERT INTO " + table +
                                           " (region, lock_key, client_id, created_date) "
                                           "VALUES ($1, $2, $3, $4::timestamp)");
        main_.conn().prepare("delete", "DELETE FROM " + table + " WHERE region = $1 AND lock_key = $2 AND client_id = $3");
        main_.conn().prepare("renew", "UPDATE " + table +
                                          " SET created_date = $1::timestamp WHERE region = $2 AND lock_key = $3 "
                                          "AND client_id = $4");
    }

    bool try_lock(const std::string& key) override {
        const std::string lock_key = uuid_of(key);
        pqxx::work tx(main_.conn());
        statements_ += 2;  // BEGIN, UPDATE
        if (tx.exec_prepared("update", id_, client_time(0), region_, lock_key, client_time(-ttl_ms_))
                .affected_rows() > 0) {
            ++statements_;
            tx.commit();
            return true;
        }
        try {
            ++statements_;
            tx.exec_prepared("insert", region_, lock_key, id_, client_time(0));
        } catch (const pqxx::unique_violation&) {
            ++statements_;  // ROLLBACK
            tx.abort();
            return false;
        }
        ++statements_;
        tx.commit();
        return true;
    }
    void unlock(const std::string& key) override {
        if (main_.run("delete", region_, uuid_of(key), id_).affected_rows() != 1)
            failure("spring: delete found no lock '" + key + "'");
    }
    bool renew(const std::string& key) override {
        return main_.run("renew", client_time(0), region_, uuid_of(key), id_).affected_rows() == 1;
    }

private:
    session main_;
    std::int64_t ttl_ms_;
    const std::string id_ = uuid_of(owner_source().next());  // one per locker, like a repository per process
    const std::string region_ = "DEFAULT";
};

}  // namespace

std::unique_ptr<locker> open_postgres_locker(const contender& c, const target& t, const locker_settings& s) {
    switch (c.kind) {
        case family::raw: return std::make_unique<raw_locker>(c, t, s);
        case family::native: return std::make_unique<native_locker>(t);
        case family::shedlock: return std::make_unique<shedlock_locker>(t, s);
        case family::spring: return std::make_unique<spring_locker>(t, s);
        case family::ceiling: return std::make_unique<ceiling_locker>(t, s);
        default: failure("no PostgreSQL contender '" + c.id + "'");
    }
}

void postgres_tables(const target& t, bool create) {
    pqxx::connection conn(t.postgres);
    pqxx::nontransaction tx(conn);
    if (create) {
        // The schemas ShedLock's and Spring's documentation give.
        tx.exec("CREATE TABLE IF NOT EXISTS " + t.prefix +
                "shedlock (name VARCHAR(64) NOT NULL, lock_until TIMESTAMP NOT NULL, "
                "locked_at TIMESTAMP NOT NULL, locked_by VARCHAR(255) NOT NULL, PRIMARY KEY (name))");
        tx.exec("CREATE TABLE IF NOT EXISTS " + t.prefix +
                "int_lock (lock_key CHAR(36) NOT NULL, region VARCHAR(100) NOT NULL, client_id CHAR(36), "
                "created_date TIMESTAMP NOT NULL, CONSTRAINT " + t.prefix + "int_lock_pk PRIMARY KEY (lock_key, region))");
        // The ceiling contender's: sqlock's lock table with the counter in it.
        // LIKE copies no storage parameters: the fillfactor is the lock
        // table's (migrations/postgres/0001_core.sql), room for HOT updates.
        tx.exec("CREATE TABLE IF NOT EXISTS " + t.prefix + "ceiling (LIKE " + t.prefix +
                "locks INCLUDING ALL) WITH (fillfactor = 70)");
        tx.exec("ALTER TABLE " + t.prefix + "ceiling ADD COLUMN IF NOT EXISTS token BIGINT NOT NULL DEFAULT 0");
        return;
    }
    for (const char* table : bench_tables)
        tx.exec("DROP TABLE IF EXISTS " + t.prefix + table + " CASCADE");
}

std::vector<std::string> postgres_facts(const target& t) {
    pqxx::connection conn(t.postgres);
    pqxx::nontransaction tx(conn);
    auto one = [&](const std::string& q) { return std::string(tx.exec(q)[0][0].c_str()); };
    const std::string addr = one("SELECT coalesce(host(inet_server_addr()), 'unix socket')");
    const int libpq = PQlibVersion();
    return {
        "Server: " + one("SELECT version()"),
        "Settings: fsync=" + one("SHOW fsync") + ", synchronous_commit=" + one("SHOW synchronous_commit") +
            ", full_page_writes=" + one("SHOW full_page_writes") + ", wal_sync_method=" + one("SHOW wal_sync_method") +
            ", shared_buffers=" + one("SHOW shared_buffers") + ", max_connections=" + one("SHOW max_connections"),
        "Connection: " + (addr == "unix socket" ? addr : "TCP to " + addr) + ", libpqxx " PQXX_VERSION ", libpq " +
            std::to_string(libpq / 10000) + "." + std::to_string(libpq % 10000),
    };
}

}  // namespace bench

#else

namespace bench {
std::unique_ptr<locker> open_postgres_locker(const contender&, const target&, const locker_settings&) {
    failure("this bench was built without PostgreSQL (SQLOCK_WITH_POSTGRES=OFF)");
}
void postgres_tables(const target&, bool) { failure("this bench was built without PostgreSQL"); }
std::vector<std::string> postgres_facts(const target&) { failure("this bench was built without PostgreSQL"); }
}  // namespace bench

#endif
