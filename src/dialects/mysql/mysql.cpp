// MySQL / MariaDB dialect on Connector/C++ 1.1 (the legacy cppconn API).
// MySQL has no data-modifying CTEs and no UPDATE ... RETURNING, so a lease
// grant is a stored procedure (migrations/mysql/0004_grant_procedure.sql):
// one CALL runs the whole transaction inside the server.
//
// This file connects a session, translates driver errors, migrates, runs the
// wake-up listener and makes the dialect; the session's other operations are
// in leases.cpp, holders.cpp and admin.cpp (see session.hpp).

#include "dialects/mysql/session.hpp"

#include <cppconn/driver.h>

#include <chrono>
#include <cstdio>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>

namespace sqlock::detail::mysql {

namespace {

// How long migrate() waits for a concurrent migrate() to finish.
constexpr std::chrono::seconds migrate_wait{120};

bool is_connection_error(int code) {
    switch (code) {
        case 1053:  // server shutdown in progress
        case 1927:  // connection was killed
        case 2002:  // can't connect through socket
        case 2003:  // can't connect to server
        case 2005:  // unknown host
        case 2006:  // server has gone away
        case 2013:  // lost connection during query
        case 2055:  // lost connection at reading
        case 2014:  // commands out of sync: the protocol state is unknown
        case 4031:  // disconnected by the server because of inactivity
            return true;
        default:
            return false;
    }
}

sql::Driver* driver() {
    // get_driver_instance() is not safe to race on its first call.
    static std::once_flag once;
    static sql::Driver* instance = nullptr;
    std::call_once(once, [] { instance = get_driver_instance(); });
    return instance;
}

}  // namespace

std::string galera_no_row_locks() {
    return "the server is a Galera cluster node (wsrep_on), where SELECT ... FOR UPDATE locks the row on one "
           "node only and a conflicting commit elsewhere breaks it at certification; use conditional_update or "
           "unique_insert, whose grants Galera certifies cluster-wide";
}

std::string galera_no_shared_locks() {
    return "reader-writer (shared) locks are not available on a Galera cluster node (wsrep_on): a reader that "
           "joins a live group writes no row that the group's last release on another node writes, so "
           "certification lets both commit and a writer could be granted while that reader holds the key; use "
           "exclusive locks, or semaphore permits, whose grants write the semaphore's row";
}

my_session::my_session(const my_setup& setup) : setup_(setup), ctx_(setup.ctx) {
    const auto& t = setup.target;
    // ConnectOptionsMap must be a named lvalue, and unknown keys are
    // silently ignored: every key here is one the connector knows.
    sql::ConnectOptionsMap opts;
    opts["hostName"] = sql::SQLString(t.socket.empty() ? "tcp://" + t.host + ":" + std::to_string(t.port ? t.port : 3306)
                                                        : "unix://" + t.socket);
    opts["userName"] = sql::SQLString(t.user);
    opts["password"] = sql::SQLString(t.password);
    opts["schema"] = sql::SQLString(t.database);
    opts["OPT_CHARSET_NAME"] = sql::SQLString("utf8mb4");
    // Affected rows count matched rows, so a same-value UPDATE is not 0.
    opts["CLIENT_FOUND_ROWS"] = true;
    opts["OPT_CONNECT_TIMEOUT"] = seconds_up(ctx_.options.connect_timeout);
    opts["OPT_READ_TIMEOUT"] = seconds_up(ctx_.options.statement_timeout) + 1;
    opts["OPT_WRITE_TIMEOUT"] = seconds_up(ctx_.options.statement_timeout) + 1;
    try {
        conn_.reset(driver()->connect(opts));
        stmt_.reset(conn_->createStatement());
        statements_.emplace(*conn_, setup_.sql);
        auto& setup_ps = prepared("session_setup");
        bind_all(setup_ps, seconds_up(ctx_.options.row_lock_timeout), seconds_up(ctx_.options.statement_timeout),
             seconds_up(ctx_.options.statement_timeout));
        // max_statement_time takes fractions of a second.
        setup_ps.setDouble(2, static_cast<double>(ctx_.options.statement_timeout.count()) / 1000.0);
        count();
        setup_ps.execute();
        exec(setup_.sql.get("session_isolation"));
        galera_ = read_wsrep_on();
        setup_.galera.store(galera_ ? wsrep::on : wsrep::off);
        if (galera_) exec(setup_.sql.get("session_galera"));
    } catch (const sql::SQLException& e) {
        throw connection_error("cannot connect to MySQL at " + ctx_.redacted_url + ": " +
                               scrub(e.what(), ctx_.secrets) + " (error " + std::to_string(e.getErrorCode()) + ")");
    }
}

std::int64_t my_session::now_ms() {
    return guarded("reading the clock", [&] { return scalar("now").value_or(0); });
}

int my_session::schema_version() {
    try {
        return guarded("schema_version", [&] { return read_version(); });
    } catch (const schema_error&) {
        return 0;
    }
}

void my_session::migrate() {
    guarded("migrate", [&] {
        // DDL commits implicitly in MySQL, so a transaction cannot make an
        // upgrade atomic; a named lock serialises migrators and every
        // statement is written to be safe to run again.
        // GET_LOCK(name, 0) in a loop rather than one long GET_LOCK: a
        // statement may not outlast max_statement_time nor the client's
        // read timeout (both from statement_timeout), and migrations on
        // a slow server can take longer than either.
        const auto give_up = std::chrono::steady_clock::now() + migrate_wait;
        if (galera_) exec(setup_.sql.get("migrate_lock_table"));
        while (!lock_migration()) {
            if (std::chrono::steady_clock::now() >= give_up)
                throw db_error(dialect_name, "",
                               "waited 2 minutes for another process's migrate() (the named lock '" +
                                   setup_.sql.prefix() + "migrate') to finish; try again");
            std::this_thread::sleep_for(std::chrono::milliseconds(100));
        }
        try {
            int current = 0;
            try {
                current = read_version();
            } catch (const sql::SQLException& e) {
                if (e.getErrorCode() != er_no_such_table) throw;
            }
            for (const auto& m : setup_.sql.migrations()) {
                if (m.version <= current) continue;
                for (const auto& statement : split_statements(m.text)) exec(statement);
            }
        } catch (...) {
            unlock_migration();
            throw;
        }
        unlock_migration();
        statements_->clear();
    });
}

namespace {

connection_error listener_failed(const sql::SQLException& e) {
    return connection_error(std::string("MySQL wake-up listener failed: ") + e.what() + " (error " +
                            std::to_string(e.getErrorCode()) + ")");
}

}  // namespace

heard my_session::doze(const std::string& channel, std::chrono::milliseconds timeout, std::int64_t& seen) {
    // A release finds this connection by the named lock it holds
    // (hold_doorbell); the channel in the text is for people reading the
    // process list. It is the client's own (prefix and hex), checked here
    // anyway because it is written into the statement.
    for (char c : channel)
        if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_'))
            throw config_error("wake-up channel '" + channel + "' is not [a-z0-9_]*");
    // SLEEP only while the count is `seen`: a ring counted before the
    // statement began ends it at once, one counted after it began is followed
    // by its KILL QUERY. The count is read without a lock, so the SLEEP keeps
    // no release waiting. No row (the sweeper took it while this listener
    // was reconnecting): -1.
    auto text = [&](std::chrono::milliseconds ms) {
        char seconds[32];
        std::snprintf(seconds, sizeof seconds, "%.3f", static_cast<double>(ms.count()) / 1000.0);
        return std::string("SELECT SLEEP(IF(t.rung = ") + std::to_string(seen) + ", " + seconds + ", 0)), '" +
               channel + "', t.rung FROM (SELECT COALESCE(MAX(rung), -1) AS rung FROM " + setup_.sql.prefix() +
               "rings WHERE channel = '" + channel + "') t";
    };
    // Interrupted: a hint, and the waiters try at once; the ring's count was
    // committed before its KILL, so their attempts find the release. The
    // next call reads the count (at once: it is no longer `seen`) and
    // reports the ring, which wakes them a second time. Not a duplicate to
    // drop: a KILL can come late, for a ring whose count an earlier
    // statement already saw, and a ring counted just after such a late KILL
    // is caught only by that second wake. Reading the count before waking
    // anybody, as this did until now, put a round trip into every handoff
    // between processes (docs/backends.md has what that cost).
    std::int64_t rung = 0;
    try {
        // Armed at `seen` before the count is read: a release that moves the
        // count past `seen` interrupts the holder of that name only, and one
        // that found no holder committed its count before this.
        if (armed_ != seen) {
            arm(channel, seen);
            armed_ = seen;
        }
        std::unique_ptr<sql::ResultSet> rs(stmt_->executeQuery(text(timeout)));
        if (!rs->next()) return heard::nothing;
        rung = rs->getInt64(3);
        if (rung == seen && rs->getInt(1) == 1) return heard::hint;  // SLEEP returns 1 when interrupted
    } catch (const sql::SQLException& e) {
        if (e.getErrorCode() == er_query_interrupted) return heard::hint;
        throw listener_failed(e);
    }
    if (rung == seen) return heard::nothing;
    if (rung < 0) {
        seen = hold_doorbell(channel);
        return heard::ring;  // rings may have gone uncounted meanwhile
    }
    seen = rung;
    return heard::ring;
}

std::int64_t my_session::hold_doorbell(const std::string& channel) {
    try {
        // 1; 0 only if another connection held the name (a random one of this
        // client), and then releases cannot find this listener: its waiters
        // poll, as without a doorbell. The name first: the sweeper keeps the
        // count of a channel whose name is held.
        scalar("doorbell_hold", channel);
        // The name of count -1, held for the connection's life, tells a
        // release that this listener arms (an older library's does not).
        arm(channel, -1);
        armed_ = no_arm;
        update("doorbell_register", channel);
        return scalar("doorbell_count", channel).value_or(0);
    } catch (const sql::SQLException& e) {
        throw listener_failed(e);
    }
}

void my_session::arm(const std::string& channel, std::int64_t seen) {
    // Not counted: the listener's connection runs no operation's statements.
    auto& ps = prepared("doorbell_arm");
    bind_all(ps, channel, armed_, channel, seen);
    {
        std::unique_ptr<sql::ResultSet> rs(ps.executeQuery());
        while (rs->next()) {
        }
    }
    drain(ps);
}

bool my_session::lock_migration() {
    if (!galera_) return scalar("migrate_lock").value_or(0) == 1;
    if (migrator_.empty()) migrator_ = random_owner();
    try {
        update("migrate_lock_row", migrator_);
    } catch (const sql::SQLException& e) {
        // Another node's migrator took it first (certification or the key).
        if (!is_contention(e.getErrorCode()) && e.getErrorCode() != er_dup_entry) throw;
        return false;
    }
    return scalar("migrate_lock_owner", migrator_).value_or(0) == 1;
}

void my_session::unlock_migration() {
    try {
        if (galera_) update("migrate_unlock_row", migrator_);
        else scalar("migrate_unlock");
    } catch (...) {
        // The named lock dies with the connection anyway; the row expires.
    }
}

std::string my_session::random_owner() {
    std::random_device rd;
    return std::to_string(rd()) + "-" + std::to_string(rd()) + "-" + std::to_string(rd());
}

bool my_session::read_wsrep_on() {
    try {
        count();
        std::unique_ptr<sql::ResultSet> rs(stmt_->executeQuery(setup_.sql.get("wsrep_on")));
        return rs->next() && rs->getInt(1) == 1;
    } catch (const sql::SQLException& e) {
        if (e.getErrorCode() == er_unknown_system_variable) return false;
        throw;
    }
}

int my_session::read_version() {
    count();
    std::unique_ptr<sql::ResultSet> rs(stmt_->executeQuery(setup_.sql.get("schema_version")));
    return rs->next() ? rs->getInt(1) : 0;
}

[[noreturn]] void my_session::fail(const char* what, const sql::SQLException& e) {
    {
        const int code = e.getErrorCode();
        if (is_connection_error(code)) {
            in_tx_ = false;
            throw connection_error(std::string("MySQL connection lost during ") + what + ": " + e.what() +
                                   " (error " + std::to_string(code) + ")");
        }
        // Leave no transaction open on a session that goes back to the pool.
        if (in_tx_) {
            try {
                rollback();
            } catch (const sql::SQLException&) {
                throw connection_error(std::string("MySQL connection unusable after ") + what);
            }
        }
        if (code == er_no_such_table) throw_schema_missing(ctx_.redacted_url, e.what());
        throw db_error(dialect_name, std::to_string(code),
                       std::string("MySQL error during ") + what + ": " + e.what());
    }
}

class my_notifier final : public notifier {
public:
    my_notifier(const my_setup& setup, std::string channel) : session_(setup), channel_(std::move(channel)) {
        seen_ = session_.hold_doorbell(channel_);
    }
    heard wait(std::chrono::milliseconds timeout) override { return session_.doze(channel_, timeout, seen_); }

private:
    my_session session_;
    std::string channel_;
    std::int64_t seen_ = 0;  // the channel's ring count at the last wake-up
};

class my_dialect final : public dialect {
public:
    explicit my_dialect(const dialect_context& ctx)
        : dialect(dialect_name, ctx.options.table_prefix, ctx.redacted_url),
          setup_{ctx, sql(), parse_mysql_url(ctx.url)},
          quiet_ctx_(uncounted(ctx)),
          listener_setup_{quiet_ctx_, sql(), setup_.target} {
        // MySQL/MariaDB have no per-session equivalent of PostgreSQL's
        // synchronous_commit: innodb_flush_log_at_trx_commit and sync_binlog
        // are global (SET SESSION fails with error 1229), and setting them
        // would relax every database on the server, not just sqlock's commits.
        if (ctx.options.durability == durability::relaxed)
            throw config_error(
                "relaxed durability is not available on MySQL/MariaDB: innodb_flush_log_at_trx_commit and "
                "sync_binlog can only be set for the whole server, so set them there if that is acceptable for "
                "every database on it, or use strict durability");
    }
    client_capabilities capabilities() const override {
        // The client connects when it opens, so a Galera node is known by the
        // time anyone asks. There the doorbell cannot reach a waiter on
        // another node (thread ids are per node): waiters poll.
        const bool galera = setup_.galera.load() == wsrep::on;
        return {.row_locks = !galera, .wake_ups = !galera, .shared_locks = !galera, .sql_fence = true,
                .relaxed_durability = false, .embedded = false};
    }
    std::string no_row_locks_reason() const override { return galera_no_row_locks(); }
    std::unique_ptr<session> connect() override { return std::make_unique<my_session>(setup_); }
    std::unique_ptr<notifier> listen(const std::string& channel) override {
        return std::make_unique<my_notifier>(listener_setup_, channel);
    }
    std::string fence_sql() const override { return "SELECT " + sql().prefix() + "assert_held(?, ?)"; }

private:
    // The listener's context: its statements are not counted, and its
    // statement timeout leaves room for its sleep (250 ms at a time). With
    // the client's statement_timeout at or under that, max_statement_time
    // cut every sleep (1969), and the listener reconnected every 0.75 s.
    static dialect_context uncounted(const dialect_context& ctx) {
        dialect_context out = ctx;
        out.statements = nullptr;
        out.options.statement_timeout = std::max(ctx.options.statement_timeout, std::chrono::milliseconds(2000));
        return out;
    }

    my_setup setup_;
    // The listener's connection: its statements belong to no operation, so
    // they are not counted (as PostgreSQL's LISTEN connection's are not).
    dialect_context quiet_ctx_;
    my_setup listener_setup_;
};

}  // namespace sqlock::detail::mysql

namespace sqlock::detail {

std::unique_ptr<dialect> make_mysql(const dialect_context& ctx) { return std::make_unique<mysql::my_dialect>(ctx); }

}  // namespace sqlock::detail
