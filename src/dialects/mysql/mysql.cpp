// MySQL / MariaDB dialect on Connector/C++ 1.1 (the legacy cppconn API).
// MySQL has no data-modifying CTEs and no UPDATE ... RETURNING, so a lease
// grant is a stored procedure (migrations/mysql/0004_grant_procedure.sql):
// one CALL runs the whole transaction inside the server.

#include "core/fault.hpp"
#include "core/sql_library.hpp"
#include "core/url.hpp"
#include "dialects/dialect.hpp"

#include <sqlock/errors.hpp>

#include <cppconn/driver.h>
#include <cppconn/exception.h>
#include <cppconn/prepared_statement.h>
#include <cppconn/resultset.h>
#include <cppconn/statement.h>

#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>

namespace sqlock::detail {
namespace {

constexpr const char* dialect_name = "mysql";

// MariaDB error numbers (include/mysqld_error.h, errmsg.h).
constexpr int er_dup_entry = 1062;
constexpr int er_lock_wait_timeout = 1205;  // also FOR UPDATE NOWAIT on MariaDB
constexpr int er_lock_deadlock = 1213;
constexpr int er_no_such_table = 1146;
constexpr int er_statement_timeout = 1969;  // max_statement_time exceeded

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

bool is_contention(int code) { return code == er_lock_wait_timeout || code == er_lock_deadlock; }

sql::Driver* driver() {
    // get_driver_instance() is not safe to race on its first call.
    static std::once_flag once;
    static sql::Driver* instance = nullptr;
    std::call_once(once, [] { instance = get_driver_instance(); });
    return instance;
}

struct mysql_target {
    std::string host;  // "tcp://host:port" or "unix://path"
    std::string user, password, database;
};

class my_session final : public session {
public:
    my_session(const mysql_target& t, const dialect_context& ctx) : ctx_(ctx) {
        // ConnectOptionsMap must be a named lvalue, and unknown keys are
        // silently ignored: every key here is one the connector knows.
        sql::ConnectOptionsMap opts;
        opts["hostName"] = sql::SQLString(t.host);
        opts["userName"] = sql::SQLString(t.user);
        opts["password"] = sql::SQLString(t.password);
        opts["schema"] = sql::SQLString(t.database);
        opts["OPT_CHARSET_NAME"] = sql::SQLString("utf8mb4");
        // Affected rows count matched rows, so a same-value UPDATE is not 0.
        opts["CLIENT_FOUND_ROWS"] = true;
        opts["OPT_CONNECT_TIMEOUT"] = seconds_up(ctx.options.connect_timeout);
        opts["OPT_READ_TIMEOUT"] = seconds_up(ctx.options.statement_timeout) + 1;
        opts["OPT_WRITE_TIMEOUT"] = seconds_up(ctx.options.statement_timeout) + 1;
        try {
            conn_.reset(driver()->connect(opts));
            stmt_.reset(conn_->createStatement());
            auto& setup = prepared("session_setup");
            setup.setInt(1, seconds_up(ctx.options.row_lock_timeout));
            setup.setDouble(2, static_cast<double>(ctx.options.statement_timeout.count()) / 1000.0);
            setup.setInt(3, seconds_up(ctx.options.statement_timeout));
            count();
            setup.execute();
            exec(ctx_.sql->get("session_isolation"));
        } catch (const sql::SQLException& e) {
            throw connection_error("cannot connect to MySQL at " + ctx_.redacted_url + ": " +
                                   scrub(e.what(), ctx_.secrets) + " (error " + std::to_string(e.getErrorCode()) + ")");
        }
    }

    grant_result grant(const grant_request& r) override {
        return guarded("grant", [&]() -> grant_result {
            auto& call = prepared("grant");
            bind(call, r.key, r.owner, std::string_view(to_string(r.mode)), r.lease_ms, r.holder, r.note, r.ticket,
                 r.priority);
            count();
            try {
                std::unique_ptr<sql::ResultSet> rs(call.executeQuery());
                grant_result out;
                if (rs->next()) {
                    if (!rs->isNull(1)) out.token = rs->getInt64(1);
                    else if (r.want_remaining && !rs->isNull(2)) out.remaining_ms = rs->getInt64(2);
                }
                rs.reset();
                drain(call);
                return out;
            } catch (const sql::SQLException& e) {
                // The procedure rolled back. A grant blocks only on the key's
                // rows; when the statement time limit ends that wait before
                // the lock wait does, it is contention all the same.
                if (is_contention(e.getErrorCode()) || e.getErrorCode() == er_dup_entry ||
                    e.getErrorCode() == er_statement_timeout)
                    return grant_result{};
                throw;
            }
        });
    }

    bool release(std::string_view key, std::string_view owner, sqlock::mode m) override {
        // A lock wait that times out means a select_for_update holder has the
        // row, which it locks only when no lease is live on it: the lease is
        // not ours any more.
        return guarded("release", [&] {
            auto& ps = prepared(m == mode::unique_insert ? "release_delete" : "release_clear");
            bind(ps, key, owner);
            count();
            try {
                return ps.executeUpdate() == 1;
            } catch (const sql::SQLException& e) {
                if (e.getErrorCode() == er_lock_wait_timeout) return false;
                throw;
            }
        });
    }

    renew_result renew(std::string_view key, std::string_view owner, std::int64_t lease_ms, bool wait) override {
        return guarded("renew", [&] {
            auto& ps = prepared(wait ? "renew" : "renew_nowait");
            bind(ps, lease_ms, key, owner);
            count();
            try {
                return ps.executeUpdate() == 1 ? renew_result::renewed : renew_result::not_held;
            } catch (const sql::SQLException& e) {
                if (e.getErrorCode() == er_lock_wait_timeout) return renew_result::row_locked;
                throw;
            }
        });
    }

    // Connector/C++ 1.1 sets its read and write timeouts (statement timeout
    // + 1 s) at connect and cannot change them on an open connection.
    void bound_waits(std::chrono::milliseconds) override {}

    std::vector<bool> renew_batch(const std::vector<renewal>& batch) override {
        return guarded("renew_batch", [&] {
            std::vector<bool> out(batch.size(), true);
            auto& ps = generated("renew_batch", batch.size(),
                                 {{"/*KEYS*/", "?", ", "}, {"/*MS*/", "?", ", "}, {"/*PAIRS*/", "(?, ?)", ", "}});
            unsigned i = 1;
            for (const auto& r : batch) ps.setString(i++, std::string(r.key));
            for (const auto& r : batch) ps.setInt64(i++, r.lease_ms);
            for (const auto& r : batch) {
                ps.setString(i++, std::string(r.key));
                ps.setString(i++, std::string(r.owner));
            }
            count();
            std::size_t renewed;
            try {
                renewed = static_cast<std::size_t>(ps.executeUpdate());
            } catch (const sql::SQLException& e) {
                // A row another transaction kept locked past the lock wait
                // failed the statement (an UPDATE cannot SKIP LOCKED here):
                // nothing was renewed; the caller renews each lease alone.
                if (e.getErrorCode() != er_lock_wait_timeout) throw;
                return std::vector<bool>(batch.size(), false);
            }
            if (renewed == batch.size()) return out;
            // Some were not renewed: ask which owners still hold a live lease.
            auto& check = generated("renewed_owners", batch.size(), {{"/*OWNERS*/", "?", ", "}});
            i = 1;
            for (const auto& r : batch) check.setString(i++, std::string(r.owner));
            count();
            std::unique_ptr<sql::ResultSet> rs(check.executeQuery());
            std::set<std::string> live;
            while (rs->next()) live.insert(rs->getString(1));
            for (std::size_t j = 0; j < batch.size(); ++j) out[j] = live.count(std::string(batch[j].owner)) > 0;
            return out;
        });
    }

    std::int64_t enqueue(const waiter_request& w) override {
        return guarded("enqueue", [&] {
            auto& ps = prepared("enqueue");
            ps.setString(1, std::string(w.key));
            ps.setString(2, std::string(w.owner));
            ps.setBoolean(3, w.fair);
            ps.setInt(4, w.priority);
            ps.setInt64(5, w.lease_ms);
            ps.setString(6, std::string(w.listener));
            ps.setString(7, std::string(w.holder));
            count();
            std::unique_ptr<sql::ResultSet> rs(ps.executeQuery());
            if (!rs->next()) throw db_error(dialect_name, "", "enqueue returned no ticket");
            return rs->getInt64(1);
        });
    }

    void dequeue(std::int64_t ticket) override {
        guarded("dequeue", [&] { dequeue_now(ticket); });
    }

    std::vector<bool> beat_waiters(const std::vector<heartbeat>& batch) override {
        return guarded("beat_waiters", [&] {
            std::vector<bool> out(batch.size(), true);
            auto& ps = generated("beat_waiters", batch.size(),
                                 {{"/*FIELD*/", "?", ", "}, {"/*MS*/", "?", ", "}, {"/*TICKETS*/", "?", ", "}});
            unsigned i = 1;
            for (const auto& h : batch) ps.setInt64(i++, h.ticket);
            for (const auto& h : batch) ps.setInt64(i++, h.lease_ms);
            for (const auto& h : batch) ps.setInt64(i++, h.ticket);
            count();
            if (static_cast<std::size_t>(ps.executeUpdate()) == batch.size()) return out;
            auto& check = generated("live_waiters", batch.size(), {{"/*TICKETS*/", "?", ", "}});
            i = 1;
            for (const auto& h : batch) check.setInt64(i++, h.ticket);
            count();
            std::unique_ptr<sql::ResultSet> rs(check.executeQuery());
            std::set<std::int64_t> live;
            while (rs->next()) live.insert(rs->getInt64(1));
            for (std::size_t j = 0; j < batch.size(); ++j) out[j] = live.count(batch[j].ticket) > 0;
            return out;
        });
    }

    std::size_t sweep_waiters(std::size_t limit) override {
        return guarded("sweep_waiters", [&] {
            auto& ps = prepared("sweep_waiters");
            ps.setInt64(1, static_cast<std::int64_t>(limit));
            count();
            return static_cast<std::size_t>(ps.executeUpdate());
        });
    }

    std::size_t sweep(std::size_t limit) override {
        return guarded("sweep", [&] {
            exec("START TRANSACTION");
            in_tx_ = true;
            std::vector<std::string> keys;
            {
                auto& pick = prepared("sweep_pick");
                pick.setInt64(1, static_cast<std::int64_t>(limit));
                count();
                std::unique_ptr<sql::ResultSet> rs(pick.executeQuery());
                while (rs->next()) keys.push_back(rs->getString(1));
            }
            std::size_t deleted = 0;
            if (!keys.empty()) {
                auto& del = generated("sweep_delete", keys.size(), {{"/*KEYS*/", "?", ", "}});
                for (std::size_t i = 0; i < keys.size(); ++i) del.setString(static_cast<unsigned>(i + 1), keys[i]);
                count();
                deleted = static_cast<std::size_t>(del.executeUpdate());
            }
            exec("COMMIT");
            in_tx_ = false;
            return deleted;
        });
    }

    row_lock lock_row(std::string_view key, std::int64_t lease_ms, std::int64_t ticket, std::int64_t priority,
                      std::optional<std::int64_t>* remaining_ms) override {
        return guarded("lock_row", [&] {
            const int idle_s = seconds_up(std::chrono::milliseconds(lease_ms));
            if (pinned_for_s_ != idle_s) {
                auto& pin = prepared("pin_session");
                pin.setInt(1, idle_s);
                count();
                pin.execute();
                pinned_for_s_ = idle_s;
            }
            exec("START TRANSACTION");
            in_tx_ = true;
            try {
                auto& lock = prepared("lock_row");
                bind(lock, key, key, priority, priority, ticket);
                count();
                if (lock.executeUpdate() == 1) return row_lock::locked;
            } catch (const sql::SQLException& e) {
                if (!is_contention(e.getErrorCode())) throw;
                rollback();
                return row_lock::busy;
            }
            auto& state = prepared("lock_row_state");
            bind(state, key);
            count();
            std::unique_ptr<sql::ResultSet> rs(state.executeQuery());
            rs->next();  // always one row
            const bool present = rs->getBoolean(1);
            if (present && remaining_ms && !rs->isNull(2)) *remaining_ms = rs->getInt64(2);
            rs.reset();
            rollback();
            return present ? row_lock::busy : row_lock::missing;
        });
    }

    void end_row_lock() override {
        guarded("end_row_lock", [&] {
            if (in_tx_) rollback();
        });
    }

    void ensure_row(std::string_view key) override {
        guarded("ensure_row", [&] {
            auto& ps = prepared("ensure_row");
            ps.setString(1, std::string(key));
            count();
            ps.executeUpdate();
        });
    }

    std::optional<std::int64_t> bump_token(std::string_view key) override {
        return guarded("bump_token", [&]() -> std::optional<std::int64_t> {
            try {
                return bump(key, "bump_row_lock_token");
            } catch (const sql::SQLException& e) {
                // An earlier holder's fenced transaction share-locks the fence row.
                if (e.getErrorCode() == er_lock_wait_timeout) return std::nullopt;
                throw;
            }
        });
    }

    std::int64_t fence_token(std::string_view key) override {
        return guarded("ping", [&] { return read_token(key); });
    }

    std::vector<std::string> held_keys(std::string_view prefix, std::string_view after, std::size_t limit) override {
        return guarded("listing held keys", [&] {
            auto& ps = prepared("held_keys");
            ps.setString(1, std::string(prefix));
            ps.setString(2, std::string(prefix));
            ps.setString(3, std::string(after));
            ps.setInt64(4, static_cast<std::int64_t>(limit));
            count();
            std::unique_ptr<sql::ResultSet> rs(ps.executeQuery());
            std::vector<std::string> out;
            while (rs->next()) out.push_back(rs->getString(1));
            return out;
        });
    }

    std::vector<waiter_info> waiters(std::string_view prefix, std::size_t limit) override {
        return guarded("listing waiters", [&] {
            auto& ps = prepared("waiters");
            ps.setString(1, std::string(prefix));
            ps.setString(2, std::string(prefix));
            ps.setInt64(3, static_cast<std::int64_t>(limit));
            count();
            std::unique_ptr<sql::ResultSet> rs(ps.executeQuery());
            std::vector<waiter_info> out;
            while (rs->next())
                out.push_back({.key = rs->getString(1),
                               .ticket = rs->getInt64(2),
                               .owner = rs->getString(3),
                               .holder = rs->isNull(4) ? "" : std::string(rs->getString(4)),
                               .fair = rs->getBoolean(5),
                               .priority = rs->getInt(6),
                               .waited = std::chrono::milliseconds(rs->getInt64(7)),
                               .expires_in = std::chrono::milliseconds(rs->getInt64(8))});
            return out;
        });
    }

    std::optional<std::int64_t> force_release(std::string_view key) override {
        return guarded("force_release", [&]() -> std::optional<std::int64_t> {
            exec("START TRANSACTION");
            in_tx_ = true;
            bool live;
            {
                auto& ps = prepared("force_live");
                ps.setString(1, std::string(key));
                count();
                std::unique_ptr<sql::ResultSet> rs(ps.executeQuery());
                live = rs->next();
            }
            if (live) {
                auto& expire = prepared("force_expire");
                expire.setString(1, std::string(key));
                count();
                expire.executeUpdate();
            }
            auto& bump_ps = prepared("force_bump");
            bump_ps.setString(1, std::string(key));
            count();
            if (bump_ps.executeUpdate() == 0) {
                rollback();
                return std::nullopt;
            }
            const std::int64_t token = read_token(key);
            exec("COMMIT");
            in_tx_ = false;
            return token;
        });
    }

    lock_info inspect(std::string_view key) override {
        return guarded("inspect", [&] {
            lock_info info;
            info.key = std::string(key);
            bool row_exists = false;
            {
                auto& ps = prepared("inspect_lock");
                ps.setString(1, std::string(key));
                count();
                std::unique_ptr<sql::ResultSet> rs(ps.executeQuery());
                if (rs->next()) {
                    row_exists = true;
                    if (!rs->isNull(5)) {
                        info.held = true;
                        info.owner = rs->getString(1);
                        info.mode = rs->isNull(2) ? "" : std::string(rs->getString(2));
                        info.holder = rs->isNull(3) ? "" : std::string(rs->getString(3));
                        info.note = rs->isNull(4) ? "" : std::string(rs->getString(4));
                        info.expires_in = std::chrono::milliseconds(rs->getInt64(5));
                    }
                }
            }
            info.token = read_token(key);
            if (row_exists && !info.held) {
                auto& ps = prepared("inspect_row_free");
                ps.setString(1, std::string(key));
                count();
                std::unique_ptr<sql::ResultSet> rs(ps.executeQuery());
                if (!rs->next()) {
                    info.held = true;
                    info.mode = to_string(mode::select_for_update);
                }
            }
            return info;
        });
    }

    int schema_version() override {
        try {
            return guarded("schema_version", [&] { return read_version(); });
        } catch (const schema_error&) {
            return 0;
        }
    }

    void migrate() override {
        guarded("migrate", [&] {
            // DDL commits implicitly in MySQL, so a transaction cannot make an
            // upgrade atomic; a named lock serialises migrators and every
            // statement is written to be safe to run again.
            // GET_LOCK(name, 0) in a loop rather than one long GET_LOCK: a
            // statement may not outlast max_statement_time nor the client's
            // read timeout (both from statement_timeout), and migrations on
            // a slow server can take longer than either.
            const auto give_up = std::chrono::steady_clock::now() + migrate_wait;
            for (;;) {
                auto& lock = prepared("migrate_lock");
                count();
                std::unique_ptr<sql::ResultSet> rs(lock.executeQuery());
                if (rs->next() && rs->getInt(1) == 1) break;
                if (std::chrono::steady_clock::now() >= give_up)
                    throw db_error(dialect_name, "",
                                   "waited 2 minutes for another process's migrate() (the named lock '" +
                                       ctx_.sql->prefix() + "migrate') to finish; try again");
                std::this_thread::sleep_for(std::chrono::milliseconds(100));
            }
            try {
                int current = 0;
                try {
                    current = read_version();
                } catch (const sql::SQLException& e) {
                    if (e.getErrorCode() != er_no_such_table) throw;
                }
                for (const auto& m : ctx_.sql->migrations()) {
                    if (m.version <= current) continue;
                    for (const auto& statement : split_statements(m.text)) exec(statement);
                }
            } catch (...) {
                unlock_migration();
                throw;
            }
            unlock_migration();
            prepared_.clear();
        });
    }

    fence_result fenced(std::string_view key, std::int64_t token,
                        const std::function<bool(ledger&)>& body) override {
        return guarded("fenced transaction", [&]() -> fence_result {
            exec("START TRANSACTION");
            in_tx_ = true;
            try {
                auto& fence = prepared("fence");
                fence.setString(1, std::string(key));
                fence.setInt64(2, token);
                count();
                std::unique_ptr<sql::ResultSet> rs(fence.executeQuery());
            } catch (const sql::SQLException& e) {
                if (e.getErrorCode() != er_signal_exception) throw;
                rollback();
                std::string msg = e.what();
                if (msg.starts_with("sqlock: ")) msg.erase(0, 8);
                return {false, msg};
            }
            my_ledger l(*this);
            bool commit = false;
            try {
                commit = body(l);
            } catch (const sql::SQLException&) {
                throw;  // guarded() rolls back
            } catch (...) {
                rollback();
                throw;
            }
            if (commit) {
                exec("COMMIT");
                in_tx_ = false;
                fault(fault_point::fenced_commit_done);
            } else {
                rollback();
            }
            return {true, ""};
        });
    }

    job_row job_read(std::string_view job, std::string_view run_key) override {
        return guarded("reading the job ledger", [&] {
            auto& ps = prepared("job_row");
            ps.setString(1, std::string(job));
            ps.setString(2, std::string(run_key));
            count();
            std::unique_ptr<sql::ResultSet> rs(ps.executeQuery());
            if (!rs->next()) throw db_error(dialect_name, "", "job ledger read returned no row");
            return to_job_row(*rs);
        });
    }

    std::vector<job_row> job_list(std::string_view job, bool exact, std::size_t limit) override {
        return guarded("listing the job ledger", [&] {
            auto& ps = prepared("job_list");
            bind(ps, exact, job, job, job, static_cast<std::int64_t>(limit));
            count();
            std::unique_ptr<sql::ResultSet> rs(ps.executeQuery());
            std::vector<job_row> out;
            while (rs->next()) out.push_back(to_job_row(*rs));
            return out;
        });
    }

    std::size_t sweep_jobs(std::int64_t retention_ms, std::size_t limit) override {
        return guarded("sweep_jobs", [&] {
            auto& ps = prepared("sweep_jobs");
            ps.setInt64(1, retention_ms);
            ps.setInt64(2, static_cast<std::int64_t>(limit));
            count();
            return static_cast<std::size_t>(ps.executeUpdate());
        });
    }

    std::int64_t now_ms() override {
        return guarded("reading the clock", [&] {
            count();
            std::unique_ptr<sql::ResultSet> rs(stmt_->executeQuery(ctx_.sql->get("now")));
            if (!rs->next()) throw db_error(dialect_name, "", "the clock query returned no row");
            return rs->getInt64(1);
        });
    }

private:
    static constexpr int er_signal_exception = 1644;  // SIGNAL SQLSTATE '45000'

    static std::string text_or_empty(sql::ResultSet& rs, unsigned col) {
        return rs.isNull(col) ? std::string() : std::string(rs.getString(col));
    }
    static std::int64_t int_or_zero(sql::ResultSet& rs, unsigned col) {
        return rs.isNull(col) ? 0 : static_cast<std::int64_t>(rs.getInt64(col));
    }

    static job_row to_job_row(sql::ResultSet& rs) {
        job_row out;
        out.status = text_or_empty(rs, 1);
        out.owner = text_or_empty(rs, 2);
        out.holder = text_or_empty(rs, 3);
        out.token = int_or_zero(rs, 4);
        out.attempts = static_cast<int>(int_or_zero(rs, 5));
        out.started_ms = int_or_zero(rs, 6);
        out.finished_ms = int_or_zero(rs, 7);
        out.retry_ms = int_or_zero(rs, 8);
        out.result = text_or_empty(rs, 9);
        out.last_error = text_or_empty(rs, 10);
        out.now_ms = int_or_zero(rs, 11);
        out.job = text_or_empty(rs, 12);
        out.run_key = text_or_empty(rs, 13);
        return out;
    }

    class my_ledger final : public ledger {
    public:
        explicit my_ledger(my_session& s) : s_(s) {}
        std::optional<job_row> read(std::string_view job, std::string_view run_key) override {
            auto& ps = s_.prepared("job_lock");
            ps.setString(1, std::string(job));
            ps.setString(2, std::string(run_key));
            s_.count();
            std::unique_ptr<sql::ResultSet> rs(ps.executeQuery());
            if (!rs->next()) return std::nullopt;
            return to_job_row(*rs);
        }
        void write(const job_write& w) override {
            auto& ps = s_.prepared("job_write");
            ps.setString(1, std::string(w.job));
            ps.setString(2, std::string(w.run_key));
            ps.setString(3, std::string(w.status));
            ps.setString(4, std::string(w.owner));
            ps.setString(5, std::string(w.holder));
            ps.setInt64(6, w.token);
            ps.setInt(7, w.attempts);
            ps.setBoolean(8, w.starting);
            ps.setInt64(9, w.retry_in_ms);
            ps.setInt64(10, w.retry_in_ms);
            ps.setString(11, std::string(w.result));
            ps.setString(12, std::string(w.last_error));
            ps.setBoolean(13, w.starting);
            s_.count();
            ps.executeUpdate();
        }

    private:
        my_session& s_;
    };

    // Binds the arguments to placeholders 1, 2, ... in order.
    template <class... Args>
    static void bind(sql::PreparedStatement& ps, const Args&... args) {
        unsigned i = 1;
        (bind_one(ps, i++, args), ...);
    }
    static void bind_one(sql::PreparedStatement& ps, unsigned i, std::string_view v) { ps.setString(i, std::string(v)); }
    static void bind_one(sql::PreparedStatement& ps, unsigned i, std::int64_t v) { ps.setInt64(i, v); }
    static void bind_one(sql::PreparedStatement& ps, unsigned i, int v) { ps.setInt(i, v); }
    static void bind_one(sql::PreparedStatement& ps, unsigned i, bool v) { ps.setBoolean(i, v); }

    // A CALL answers with its result set and then a status: read past them,
    // or the connection is out of sync for the next statement.
    static void drain(sql::PreparedStatement& ps) {
        while (ps.getMoreResults()) std::unique_ptr<sql::ResultSet> more(ps.getResultSet());
    }

    static int seconds_up(std::chrono::milliseconds ms) {
        auto s = static_cast<int>((ms.count() + 999) / 1000);
        return s < 1 ? 1 : s;
    }

    void count() {
        if (ctx_.statements) ++*ctx_.statements;
    }

    void exec(const std::string& sql) {
        count();
        stmt_->execute(sql);
    }

    void rollback() {
        in_tx_ = false;
        exec("ROLLBACK");
    }

    void unlock_migration() {
        try {
            count();
            std::unique_ptr<sql::ResultSet> rs(prepared("migrate_unlock").executeQuery());
        } catch (...) {
            // The lock dies with the connection anyway.
        }
    }

    void dequeue_now(std::int64_t ticket) {
        auto& ps = prepared("dequeue");
        ps.setInt64(1, ticket);
        count();
        ps.executeUpdate();
    }

    int read_version() {
        count();
        std::unique_ptr<sql::ResultSet> rs(stmt_->executeQuery(ctx_.sql->get("schema_version")));
        return rs->next() ? rs->getInt(1) : 0;
    }

    std::int64_t read_token(std::string_view key) {
        auto& ps = prepared("read_token");
        ps.setString(1, std::string(key));
        count();
        std::unique_ptr<sql::ResultSet> rs(ps.executeQuery());
        return rs->next() ? rs->getInt64(1) : 0;
    }

    // statement: bump_row_lock_token (select_for_update).
    std::int64_t bump(std::string_view key, const char* statement) {
        auto& ps = prepared(statement);
        ps.setString(1, std::string(key));
        count();
        std::unique_ptr<sql::ResultSet> rs(ps.executeQuery());
        if (!rs->next()) throw db_error(dialect_name, "", "fence bump returned no token");
        return rs->getInt64(1);
    }

    // A marker in a statement's text, replaced by `group` repeated n times
    // with `separator` between the copies. Only placeholders are
    // generated, never values.
    struct repeat {
        const char* marker;
        const char* group;
        const char* separator;
    };

    // The statement with each marker expanded for n rows. Cached per (name, n).
    sql::PreparedStatement& generated(const std::string& name, std::size_t n, std::initializer_list<repeat> markers) {
        const std::string cache_key = name + "#" + std::to_string(n);
        auto it = prepared_.find(cache_key);
        if (it == prepared_.end()) {
            // Steady state needs two sizes per statement (full batches and
            // the remainder); forget the rest so server-side statements stay few.
            if (++generated_count_ > 16) {
                for (auto g = prepared_.begin(); g != prepared_.end();)
                    g = g->first.find('#') != std::string::npos ? prepared_.erase(g) : std::next(g);
                generated_count_ = 1;
            }
            std::string sql = ctx_.sql->get(name);
            for (const auto& m : markers) {
                std::string expanded = m.group;
                for (std::size_t i = 1; i < n; ++i) expanded += std::string(m.separator) + m.group;
                sql.replace(sql.rfind(m.marker), std::string_view(m.marker).size(), expanded);
            }
            it = prepared_.emplace(cache_key, std::unique_ptr<sql::PreparedStatement>(conn_->prepareStatement(sql)))
                     .first;
        }
        return *it->second;
    }

    sql::PreparedStatement& prepared(const std::string& name) {
        auto it = prepared_.find(name);
        if (it == prepared_.end())
            it = prepared_.emplace(name, std::unique_ptr<sql::PreparedStatement>(
                                             conn_->prepareStatement(ctx_.sql->get(name))))
                     .first;
        return *it->second;
    }

    template <class F>
    auto guarded(const char* what, F&& f) -> decltype(f()) {
        try {
            return f();
        } catch (const sql::SQLException& e) {
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
            if (code == er_no_such_table)
                throw schema_error("sqlock tables are missing in " + ctx_.redacted_url + " (" + e.what() +
                                   "): run client.migrate() or apply the files in migrations/");
            throw db_error(dialect_name, std::to_string(code),
                           std::string("MySQL error during ") + what + ": " + e.what());
        }
    }

    const dialect_context& ctx_;
    std::unique_ptr<sql::Connection> conn_;
    std::unique_ptr<sql::Statement> stmt_;
    std::map<std::string, std::unique_ptr<sql::PreparedStatement>> prepared_;
    bool in_tx_ = false;
    int pinned_for_s_ = 0;  // idle_transaction_timeout in force
    int generated_count_ = 0;
};

class my_dialect final : public dialect {
public:
    my_dialect(const url_parts& url, const dialect_context& ctx) : ctx_(ctx) {
        // MySQL/MariaDB have no per-session equivalent of PostgreSQL's
        // synchronous_commit: innodb_flush_log_at_trx_commit and sync_binlog
        // are global (SET SESSION fails with error 1229), and setting them
        // would relax every database on the server, not just sqlock's commits.
        if (ctx.options.durability == durability::relaxed)
            throw config_error(
                "relaxed durability is not available on MySQL/MariaDB: innodb_flush_log_at_trx_commit and "
                "sync_binlog can only be set for the whole server, so set them there if that is acceptable for "
                "every database on it, or use strict durability");
        target_.host = url.socket.empty() ? "tcp://" + url.host + ":" + std::to_string(url.port ? url.port : 3306)
                                          : "unix://" + url.socket;
        target_.user = url.user;
        target_.password = url.password;
        target_.database = url.database;
    }
    std::string_view name() const override { return dialect_name; }
    bool supports_row_locks() const override { return true; }
    bool supports_notify() const override { return false; }
    std::unique_ptr<session> connect() override { return std::make_unique<my_session>(target_, ctx_); }
    std::unique_ptr<notifier> listen(const std::string&) override { return nullptr; }

private:
    mysql_target target_;
    const dialect_context& ctx_;
};

}  // namespace

std::unique_ptr<dialect> make_mysql(const url_parts& url, const dialect_context& ctx) {
    return std::make_unique<my_dialect>(url, ctx);
}

}  // namespace sqlock::detail
