// MariaDB contenders through Connector/C++ 1.1: raw SQL, GET_LOCK, ShedLock's
// and Spring's statements.

#include "lockers.hpp"

#ifdef SQLOCK_BENCH_MYSQL

#include <cppconn/connection.h>
#include <cppconn/driver.h>
#include <cppconn/exception.h>
#include <cppconn/prepared_statement.h>
#include <cppconn/resultset.h>
#include <cppconn/statement.h>

#include <map>
#include <optional>
#include <set>

namespace bench {

namespace {

constexpr int duplicate_key = 1062;
constexpr int lock_wait_timeout = 1205;  // also NOWAIT's answer on MariaDB
constexpr int deadlock = 1213;           // two grants' gap locks: contention too

// Binds the arguments to placeholders 1, 2, ... in order.
void bind_one(sql::PreparedStatement& ps, unsigned i, const std::string& v) { ps.setString(i, v); }
void bind_one(sql::PreparedStatement& ps, unsigned i, std::int64_t v) { ps.setInt64(i, v); }
template <class... Args>
sql::PreparedStatement& bound(sql::PreparedStatement& ps, const Args&... args) {
    unsigned i = 1;
    (bind_one(ps, i++, args), ...);
    return ps;
}

bool contention(const sql::SQLException& e) {
    return e.getErrorCode() == lock_wait_timeout || e.getErrorCode() == duplicate_key || e.getErrorCode() == deadlock;
}

struct mysql_url {
    std::string host;   // tcp://host:port or unix://path, for the connector
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

// One connection with its prepared statements and a statement counter.
class session {
public:
    session(const std::string& url, std::uint64_t& counter) : counter_(counter) {
        const mysql_url u = parse_mysql_url(url);
        sql::ConnectOptionsMap opts;
        opts["hostName"] = sql::SQLString(u.host);
        opts["userName"] = sql::SQLString(u.user);
        opts["password"] = sql::SQLString(u.password);
        opts["schema"] = sql::SQLString(u.database);
        opts["OPT_CHARSET_NAME"] = sql::SQLString("utf8mb4");
        opts["CLIENT_FOUND_ROWS"] = true;
        conn_.reset(get_driver_instance()->connect(opts));
        stmt_.reset(conn_->createStatement());
    }
    void prepare(const std::string& name, const std::string& text) {
        prepared_[name].reset(conn_->prepareStatement(text));
    }
    sql::PreparedStatement& ps(const std::string& name) {
        ++counter_;
        return *prepared_.at(name);
    }
    void exec(const std::string& text) {
        ++counter_;
        stmt_->execute(text);
    }
    // A one-row, one-column query's integer.
    std::int64_t scalar(sql::PreparedStatement& p) {
        std::unique_ptr<sql::ResultSet> rs(p.executeQuery());
        if (!rs->next()) failure("a statement returned no row");
        return rs->isNull(1) ? -1 : rs->getInt64(1);
    }
    sql::Connection& conn() { return *conn_; }

private:
    std::uint64_t& counter_;
    std::unique_ptr<sql::Connection> conn_;
    std::unique_ptr<sql::Statement> stmt_;
    std::map<std::string, std::unique_ptr<sql::PreparedStatement>, std::less<>> prepared_;
};

// What the library runs on each new connection, with its default timeouts.
void library_setup(session& s, const sql_texts& texts) {
    std::unique_ptr<sql::PreparedStatement> p(s.conn().prepareStatement(texts.get("session_setup")));
    p->setInt(1, 1);
    p->setDouble(2, 10.0);
    p->setInt(3, 10);
    p->execute();
    std::unique_ptr<sql::Statement> st(s.conn().createStatement());
    st->execute(texts.get("session_isolation"));
}

// The statements sqlock sends for one mode, with the library's session setup.
class raw_locker final : public counted_locker {
public:
    raw_locker(const contender& c, const target& t, const locker_settings& s)
        : sql_(std::filesystem::path(t.sql_dir) / "mysql", t.prefix),
          main_(t.mysql, statements_),
          mode_(c.mode),
          lease_ms_(s.lease.count()) {
        library_setup(main_, sql_);
        for (const char* name :
             {"grant", "grant_lean", "release", "release_lean", "lock_row", "lock_row_state", "read_token",
              "release_row_lock", "renew"})
            main_.prepare(name, sql_.get(name));
        if (mode_ == "select_for_update") {
            second_.emplace(t.mysql, statements_);
            library_setup(*second_, sql_);
            for (const char* name : {"bump_row_lock_token", "first_row_lock_token", "ensure_row"})
                second_->prepare(name, sql_.get(name));
            // What the library runs once on a connection it pins for select_for_update.
            std::unique_ptr<sql::PreparedStatement> pin(main_.conn().prepareStatement(sql_.get("pin_session")));
            pin->setInt(1, static_cast<int>(lease_ms_ / 1000));
            pin->execute();
        }
        statements_ = 0;
    }

    bool try_lock(const std::string& key) override {
        if (mode_ == "select_for_update") return lock_row(key);
        const std::string& owner = owners_.next();
        try {
            if (!grant(key, owner)) return false;
        } catch (const sql::SQLException& e) {
            if (contention(e)) return false;
            throw;
        }
        held_[key] = owner;
        return true;
    }

    void unlock(const std::string& key) override {
        if (mode_ == "select_for_update") {
            // The library's release: one CALL that rolls back, then wakes
            // the next waiter (migrations/mysql/0011_row_lock_release.sql).
            auto& release = main_.ps("release_row_lock");
            release.setString(1, key);
            release.executeUpdate();
            return;
        }
        auto it = held_.find(key);
        if (it == held_.end()) failure("raw: unlock of '" + key + "', which is not held");
        // As the library: the lean release while the key was lean at its
        // grant (migrations/mysql/0014_lean_grants.sql), else the CALL.
        if (auto seen = seen_.find(key); mode_ == "conditional_update" && seen != seen_.end() && seen->second.lean) {
            if (bound(main_.ps("release_lean"), key, it->second).executeUpdate() == 1) {
                held_.erase(it);
                return;
            }
            seen->second.lean = false;
        }
        // A CALL (migrations/mysql/0013_ring_counts.sql): its row, then its status.
        auto& release = main_.ps("release");
        release.setString(1, key);
        release.setString(2, it->second);
        release.setBoolean(3, mode_ == "unique_insert");
        held_.erase(it);
        bool released = false;
        {
            std::unique_ptr<sql::ResultSet> rs(release.executeQuery());
            released = rs->next() && rs->getInt(1) == 1;
        }
        while (release.getMoreResults()) std::unique_ptr<sql::ResultSet> more(release.getResultSet());
        if (!released) failure("raw release did not find '" + key + "'");
    }

    bool renew(const std::string& key) override {
        auto it = held_.find(key);
        if (it == held_.end()) return false;
        auto& renew = main_.ps("renew");  // a CALL: one row, 1 when renewed
        renew.setString(1, key);
        renew.setString(2, it->second);
        renew.setInt64(3, lease_ms_);
        bool renewed = false;
        {
            std::unique_ptr<sql::ResultSet> rs(renew.executeQuery());
            renewed = rs->next() && rs->getInt(1) == 1;
        }
        while (renew.getMoreResults()) std::unique_ptr<sql::ResultSet> more(renew.getResultSet());
        return renewed;
    }

private:
    // As the library: the lean grant, one UPDATE that bumps the token this
    // locker last saw, while the key was lean then
    // (migrations/mysql/0014_lean_grants.sql); else one CALL of the grant
    // procedure, which runs the whole transaction.
    bool grant(const std::string& key, const std::string& owner) {
        auto seen = seen_.find(key);
        if (mode_ == "conditional_update" && seen != seen_.end() && seen->second.lean &&
            bound(main_.ps("grant_lean"), owner, lease_ms_, holder_, note_, key, seen->second.token)
                    .executeUpdate() == 1) {
            token_ = ++seen->second.token;
            return true;
        }
        auto& call = bound(main_.ps("grant"), key, owner, mode_, lease_ms_, holder_, note_, no_ticket, not_fair);
        std::unique_ptr<sql::ResultSet> rs(call.executeQuery());
        const bool granted = rs->next() && !rs->isNull(1);
        if (granted) {
            token_ = rs->getInt64(1);
            seen_[key] = {token_, rs->getBoolean(3)};
        }
        rs.reset();
        while (call.getMoreResults()) std::unique_ptr<sql::ResultSet> more(call.getResultSet());
        return granted;
    }

    // From the counter the held transaction read, as the library does
    // (compare-and-set); 0 when it moved, which nothing else here causes.
    static std::int64_t bump(session& s, const std::string& key, std::int64_t counter) {
        if (counter == 0) {
            auto& first = s.ps("first_row_lock_token");
            first.setString(1, key);
            first.executeUpdate();
            return 1;
        }
        auto& b = s.ps("bump_row_lock_token");
        b.setString(1, key);
        b.setInt64(2, counter);
        return b.executeUpdate() == 1 ? counter + 1 : 0;
    }

    // START TRANSACTION; lock the row without waiting (creating it first if
    // missing, as the library does); bump the fence on the second connection;
    // read it back in the held transaction.
    // The open transaction holds the key; ROLLBACK releases it.
    bool lock_row(const std::string& key) {
        for (int attempt = 0; attempt < 2; ++attempt) {
            main_.exec("START TRANSACTION");
            auto& lock = bound(main_.ps("lock_row"), key, key, not_fair, not_fair, no_ticket, not_fair, no_ticket);
            try {
                if (lock.executeUpdate() == 1) {
                    // As the library: the key's counter read in the held
                    // transaction, the bump from it, the token read back.
                    auto read_token = [&] {
                        auto& read = main_.ps("read_token");
                        read.setString(1, key);
                        return main_.scalar(read);
                    };
                    token_ = bump(*second_, key, read_token());
                    if (const std::int64_t back = read_token(); back != token_)
                        failure("raw select_for_update: the token changed under the row lock of '" + key +
                                "' (bumped to " + std::to_string(token_) + ", read back " + std::to_string(back) +
                                ")");
                    return true;
                }
            } catch (const sql::SQLException& e) {
                main_.exec("ROLLBACK");
                if (contention(e)) return false;
                throw;
            }
            auto& state = main_.ps("lock_row_state");
            state.setString(1, key);
            const bool present = main_.scalar(state) == 1;
            main_.exec("ROLLBACK");
            if (present) return false;
            auto& ensure = second_->ps("ensure_row");
            ensure.setString(1, key);
            ensure.executeUpdate();
        }
        failure("raw ensure_row did not create '" + key + "'");
    }

    sql_texts sql_;
    session main_;
    std::optional<session> second_;  // select_for_update's fence bump, outside the held transaction
    std::string mode_;
    std::int64_t lease_ms_;
    owner_source owners_;
    std::map<std::string, std::string, std::less<>> held_;  // key → owner
    struct seen_key {
        std::int64_t token;
        bool lean;
    };
    std::map<std::string, seen_key, std::less<>> seen_;  // as the library's lean_memo
    const std::string holder_ = holder_text();
    const std::string note_;
};

// GET_LOCK(key, timeout) + RELEASE_LOCK on a session of its own.
class native_locker final : public counted_locker {
public:
    explicit native_locker(const target& t) : main_(t.mysql, statements_) {
        main_.prepare("lock", "SELECT GET_LOCK(?, ?)");
        main_.prepare("unlock", "SELECT RELEASE_LOCK(?)");
    }
    bool try_lock(const std::string& key) override { return get(key, 0); }
    bool lock(const std::string& key, std::int64_t deadline) override {
        // GET_LOCK waits in the server, up to a timeout in (fractional) seconds.
        return get(key, std::max<double>(0, static_cast<double>(deadline - monotonic_ns()) * 1e-9));
    }
    void unlock(const std::string& key) override {
        auto& p = main_.ps("unlock");
        p.setString(1, key);
        if (main_.scalar(p) != 1) failure("RELEASE_LOCK: '" + key + "' was not held");
    }
    bool renew(const std::string&) override { return true; }
    bool needs_renewal() const override { return false; }

private:
    bool get(const std::string& key, double seconds) {
        auto& p = main_.ps("lock");
        p.setString(1, key);
        p.setDouble(2, seconds);
        return main_.scalar(p) == 1;
    }
    session main_;
};

// ShedLock's statements; see lockers_postgres.cpp.
class shedlock_locker final : public counted_locker {
public:
    shedlock_locker(const target& t, const locker_settings& s)
        : main_(t.mysql, statements_), lease_ms_(s.lease.count()) {
        const std::string table = t.prefix + "shedlock";
        main_.prepare("insert", "INSERT INTO " + table + " (name, lock_until, locked_at, locked_by) VALUES (?, ?, ?, ?)");
        main_.prepare("update", "UPDATE " + table +
                                    " SET lock_until = ?, locked_at = ?, locked_by = ? WHERE name = ? AND lock_until <= ?");
        main_.prepare("unlock", "UPDATE " + table + " SET lock_until = ? WHERE name = ?");
        main_.prepare("extend", "UPDATE " + table +
                                    " SET lock_until = ? WHERE name = ? AND locked_by = ? AND lock_until > ?");
    }

    bool try_lock(const std::string& key) override {
        const std::string now = client_time(0), until = client_time(lease_ms_);
        if (!known_.contains(key)) {
            auto& insert = main_.ps("insert");
            insert.setString(1, key);
            insert.setString(2, until);
            insert.setString(3, now);
            insert.setString(4, me_);
            try {
                insert.executeUpdate();
                known_.insert(key);
                return true;
            } catch (const sql::SQLException& e) {
                if (!contention(e)) throw;
                known_.insert(key);
            }
        }
        auto& update = main_.ps("update");
        update.setString(1, until);
        update.setString(2, now);
        update.setString(3, me_);
        update.setString(4, key);
        update.setString(5, now);
        return update.executeUpdate() == 1;
    }
    void unlock(const std::string& key) override {
        auto& p = main_.ps("unlock");
        p.setString(1, client_time(0));
        p.setString(2, key);
        p.executeUpdate();
    }
    bool renew(const std::string& key) override {
        auto& p = main_.ps("extend");
        p.setString(1, client_time(lease_ms_));
        p.setString(2, key);
        p.setString(3, me_);
        p.setString(4, client_time(0));
        return p.executeUpdate() == 1;
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
    spring_locker(const target& t, const locker_settings& s) : main_(t.mysql, statements_), ttl_ms_(s.lease.count()) {
        const std::string table = t.prefix + "int_lock";
        main_.prepare("update", "UPDATE " + table +
                                    " SET client_id = ?, created_date = ? WHERE region = ? AND lock_key = ? AND "
                                    "(client_id = ? OR created_date < ?)");
        main_.prepare("insert", "INSERT INTO " + table + " (region, lock_key, client_id, created_date) VALUES (?, ?, ?, ?)");
        main_.prepare("delete", "DELETE FROM " + table + " WHERE region = ? AND lock_key = ? AND client_id = ?");
        main_.prepare("renew", "UPDATE " + table + " SET created_date = ? WHERE region = ? AND lock_key = ? AND client_id = ?");
        std::unique_ptr<sql::Statement> st(main_.conn().createStatement());
        st->execute("SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED");
        statements_ = 0;
    }

    bool try_lock(const std::string& key) override {
        const std::string lock_key = uuid_of(key);
        main_.exec("START TRANSACTION");
        auto& update = main_.ps("update");
        update.setString(1, id_);
        update.setString(2, client_time(0));
        update.setString(3, region_);
        update.setString(4, lock_key);
        update.setString(5, id_);
        update.setString(6, client_time(-ttl_ms_));
        bool ok = false;
        try {
            if (update.executeUpdate() > 0) {
                ok = true;
            } else {
                auto& insert = main_.ps("insert");
                insert.setString(1, region_);
                insert.setString(2, lock_key);
                insert.setString(3, id_);
                insert.setString(4, client_time(0));
                ok = insert.executeUpdate() == 1;
            }
        } catch (const sql::SQLException& e) {
            if (!contention(e)) throw;
        }
        main_.exec(ok ? "COMMIT" : "ROLLBACK");
        return ok;
    }
    void unlock(const std::string& key) override {
        auto& p = main_.ps("delete");
        p.setString(1, region_);
        p.setString(2, uuid_of(key));
        p.setString(3, id_);
        if (p.executeUpdate() != 1) failure("spring: delete found no lock '" + key + "'");
    }
    bool renew(const std::string& key) override {
        auto& p = main_.ps("renew");
        p.setString(1, client_time(0));
        p.setString(2, region_);
        p.setString(3, uuid_of(key));
        p.setString(4, id_);
        return p.executeUpdate() == 1;
    }

private:
    session main_;
    std::int64_t ttl_ms_;
    const std::string id_ = uuid_of(owner_source().next());  // one per locker, like a repository per process
    const std::string region_ = "DEFAULT";
};

}  // namespace

std::unique_ptr<locker> open_mysql_locker(const contender& c, const target& t, const locker_settings& s) {
    switch (c.kind) {
        case family::raw: return std::make_unique<raw_locker>(c, t, s);
        case family::native: return std::make_unique<native_locker>(t);
        case family::shedlock: return std::make_unique<shedlock_locker>(t, s);
        case family::spring: return std::make_unique<spring_locker>(t, s);
        default: failure("no MariaDB contender '" + c.id + "'");
    }
}

void mysql_tables(const target& t, bool create) {
    std::uint64_t n = 0;
    session s(t.mysql, n);
    if (create) {
        // The schemas ShedLock's and Spring's documentation give for MySQL.
        s.exec("CREATE TABLE IF NOT EXISTS " + t.prefix +
               "shedlock (name VARCHAR(64) NOT NULL, lock_until TIMESTAMP(3) NOT NULL, "
               "locked_at TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3), locked_by VARCHAR(255) NOT NULL, "
               "PRIMARY KEY (name)) ENGINE=InnoDB");
        s.exec("CREATE TABLE IF NOT EXISTS " + t.prefix +
               "int_lock (LOCK_KEY CHAR(36) NOT NULL, REGION VARCHAR(100) NOT NULL, CLIENT_ID CHAR(36), "
               "CREATED_DATE DATETIME(6) NOT NULL, CONSTRAINT " + t.prefix +
               "int_lock_pk PRIMARY KEY (LOCK_KEY, REGION)) ENGINE=InnoDB");
        return;
    }
    for (const char* table : bench_tables)
        s.exec("DROP TABLE IF EXISTS " + t.prefix + table);
}

std::vector<std::string> mysql_facts(const target& t) {
    std::uint64_t n = 0;
    session s(t.mysql, n);
    std::unique_ptr<sql::Statement> st(s.conn().createStatement());
    std::unique_ptr<sql::ResultSet> rs(st->executeQuery(
        "SELECT VERSION(), @@version_comment, @@innodb_flush_log_at_trx_commit, @@innodb_doublewrite, "
        "@@log_bin, @@sync_binlog, @@innodb_buffer_pool_size, @@max_connections"));
    rs->next();
    auto col = [&](int i) { return std::string(rs->getString(static_cast<std::uint32_t>(i)).asStdString()); };
    sql::Driver* d = get_driver_instance();
    return {
        "Server: MariaDB " + col(1) + " (" + col(2) + ")",
        "Settings: innodb_flush_log_at_trx_commit=" + col(3) + ", innodb_doublewrite=" + col(4) + ", log_bin=" +
            col(5) + ", sync_binlog=" + col(6) + ", innodb_buffer_pool_size=" + std::to_string(std::stoll(col(7)) >> 20) +
            " MiB, max_connections=" + col(8),
        "Connection: " + parse_mysql_url(t.mysql).where + ", Connector/C++ " + std::to_string(d->getMajorVersion()) +
            "." + std::to_string(d->getMinorVersion()) + "." + std::to_string(d->getPatchVersion()),
    };
}

}  // namespace bench

#else

namespace bench {
std::unique_ptr<locker> open_mysql_locker(const contender&, const target&, const locker_settings&) {
    failure("this bench was built without MariaDB (SQLOCK_WITH_MYSQL=OFF)");
}
void mysql_tables(const target&, bool) { failure("this bench was built without MariaDB"); }
std::vector<std::string> mysql_facts(const target&) { failure("this bench was built without MariaDB"); }
}  // namespace bench

#endif
