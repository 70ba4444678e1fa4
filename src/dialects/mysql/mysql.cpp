// MySQL / MariaDB dialect on Connector/C++ 1.1 (the legacy cppconn API).
// MySQL has no data-modifying CTEs and no UPDATE ... RETURNING, so a lease
// grant is a stored procedure (migrations/mysql/0004_grant_procedure.sql):
// one CALL runs the whole transaction inside the server.

#include "dialects/common/common.hpp"
#include "dialects/common/fault.hpp"
#include "dialects/common/sql_library.hpp"
#include "dialects/dialect.hpp"
#include "dialects/mysql/mysql_url.hpp"
#include "dialects/mysql/statements.hpp"

#include <sqlock/errors.hpp>

#include <cppconn/driver.h>
#include <cppconn/exception.h>
#include <cppconn/prepared_statement.h>
#include <cppconn/resultset.h>
#include <cppconn/statement.h>

#include <atomic>
#include <cstdio>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <thread>

namespace sqlock::detail {
namespace {

constexpr const char* dialect_name = "mysql";

// MariaDB error numbers (include/mysqld_error.h, errmsg.h).
constexpr int er_dup_entry = 1062;
constexpr int er_lock_wait_timeout = 1205;  // also NOWAIT and a lock wait of 0
constexpr int er_lock_deadlock = 1213;
constexpr int er_no_such_table = 1146;
constexpr int er_signal_exception = 1644;   // SIGNAL SQLSTATE '45000' (the fence)
constexpr int er_statement_timeout = 1969;  // max_statement_time exceeded
constexpr int er_query_interrupted = 1317;  // KILL QUERY: the doorbell rang
constexpr int er_unknown_system_variable = 1193;

// A Galera certification conflict (another node committed a conflicting
// write first) fails a statement or COMMIT with 1213 and rolls the whole
// transaction back: contention, tried again this many times.
constexpr int deadlock_retries = 5;

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

int seconds_up(std::chrono::milliseconds ms) {
    auto s = static_cast<int>((ms.count() + 999) / 1000);
    return s < 1 ? 1 : s;
}

sql::Driver* driver() {
    // get_driver_instance() is not safe to race on its first call.
    static std::once_flag once;
    static sql::Driver* instance = nullptr;
    std::call_once(once, [] { instance = get_driver_instance(); });
    return instance;
}

// Whether the server is a Galera node: unknown until the first connection.
enum class wsrep : int { unknown, off, on };

struct my_setup {
    const dialect_context& ctx;
    const sql_library& sql;
    mysql_url target;
    mutable std::atomic<wsrep> galera{wsrep::unknown};  // set by every session at connect
};

std::string galera_no_row_locks() {
    return "the server is a Galera cluster node (wsrep_on), where SELECT ... FOR UPDATE locks the row on one "
           "node only and a conflicting commit elsewhere breaks it at certification; use conditional_update or "
           "unique_insert, whose grants Galera certifies cluster-wide";
}

class my_session final : public session, public row_lock_ops {
public:
    explicit my_session(const my_setup& setup) : setup_(setup), ctx_(setup.ctx) {
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

    grant_result grant(const grant_request& r) override {
        return guarded("grant", [&]() -> grant_result {
            auto& call = prepared("grant");
            bind_all(call, r.key, r.owner, std::string_view(to_string(r.mode)), r.lease_ms, r.holder, r.note, r.ticket,
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
            try {
                // A CALL (migrations/mysql/0005_wake_ups.sql): it also wakes the next waiter.
                return scalar("release", key, owner, m == mode::unique_insert).value_or(0) == 1;
            } catch (const sql::SQLException& e) {
                if (e.getErrorCode() == er_lock_wait_timeout) return false;
                throw;
            }
        });
    }

    renew_result renew(std::string_view key, std::string_view owner, std::int64_t lease_ms, bool wait) override {
        return guarded("renew", [&] {
            try {
                return update(wait ? "renew" : "renew_nowait", lease_ms, key, owner) == 1 ? renew_result::renewed
                                                                                        : renew_result::not_held;
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
                // A row another transaction has locked failed the statement
                // (an UPDATE cannot SKIP LOCKED here): nothing was renewed;
                // the caller renews each lease alone.
                if (e.getErrorCode() != er_lock_wait_timeout) throw;
                return std::vector<bool>(batch.size(), false);
            }
            if (renewed == batch.size()) return std::vector<bool>(batch.size(), true);
            // Some were not renewed: ask which owners still hold a live lease.
            auto& check = generated("renewed_owners", batch.size(), {{"/*OWNERS*/", "?", ", "}});
            i = 1;
            for (const auto& r : batch) check.setString(i++, std::string(r.owner));
            std::set<std::string> live;
            for_rows(check, [&](sql::ResultSet& rs) { live.insert(rs.getString(1)); });
            return present_in(batch, live, [](const renewal& r) { return r.owner; });
        });
    }

    std::size_t sweep(std::size_t limit) override {
        return guarded("sweep", [&] {
            begin();
            std::vector<std::string> keys;
            auto& pick = prepared("sweep_pick");
            bind_all(pick, static_cast<std::int64_t>(limit));
            for_rows(pick, [&](sql::ResultSet& rs) { keys.push_back(rs.getString(1)); });
            std::size_t deleted = 0;
            if (!keys.empty()) {
                auto& del = generated("sweep_delete", keys.size(), {{"/*KEYS*/", "?", ", "}});
                for (std::size_t i = 0; i < keys.size(); ++i) del.setString(static_cast<unsigned>(i + 1), keys[i]);
                count();
                deleted = static_cast<std::size_t>(del.executeUpdate());
            }
            commit();
            return deleted;
        });
    }

    std::size_t sweep_waiters(std::size_t limit) override {
        return guarded("sweep_waiters", [&] { return update("sweep_waiters", static_cast<std::int64_t>(limit)); });
    }

    std::size_t sweep_jobs(std::int64_t retention_ms, std::size_t limit) override {
        return guarded("sweep_jobs",
                       [&] { return update("sweep_jobs", retention_ms, static_cast<std::int64_t>(limit)); });
    }

    std::int64_t enqueue(const waiter_request& w) override {
        return guarded("enqueue", [&] {
            if (w.kind != 'X')
                return scalar("holder_enqueue", w.key, w.owner, w.fair, w.priority, w.lease_ms, w.listener, w.holder,
                              std::string_view(&w.kind, 1))
                    .value_or(0);
            return scalar("enqueue", w.key, w.owner, w.fair, w.priority, w.lease_ms, w.listener, w.holder)
                .value_or(0);
        });
    }

    void dequeue(std::int64_t ticket) override {
        guarded("dequeue", [&] { update("dequeue", ticket); });
    }

    std::vector<bool> beat_waiters(const std::vector<heartbeat>& batch) override {
        return guarded("beat_waiters", [&] {
            auto& ps = generated("beat_waiters", batch.size(),
                                 {{"/*FIELD*/", "?", ", "}, {"/*MS*/", "?", ", "}, {"/*TICKETS*/", "?", ", "}});
            unsigned i = 1;
            for (const auto& h : batch) ps.setInt64(i++, h.ticket);
            for (const auto& h : batch) ps.setInt64(i++, h.lease_ms);
            for (const auto& h : batch) ps.setInt64(i++, h.ticket);
            count();
            if (static_cast<std::size_t>(ps.executeUpdate()) == batch.size())
                return std::vector<bool>(batch.size(), true);
            auto& check = generated("live_waiters", batch.size(), {{"/*TICKETS*/", "?", ", "}});
            i = 1;
            for (const auto& h : batch) check.setInt64(i++, h.ticket);
            std::set<std::int64_t> live;
            for_rows(check, [&](sql::ResultSet& rs) { live.insert(rs.getInt64(1)); });
            return present_in(batch, live, [](const heartbeat& h) { return h.ticket; });
        });
    }

    grant_result grant_holder(const holder_request& r) override {
        return guarded("grant", [&]() -> grant_result {
            auto& call = prepared(r.kind == 'S' ? "shared_grant" : "permit_grant");
            if (r.kind == 'S')
                bind_all(call, r.key, r.owner, r.lease_ms, r.holder, r.note, r.ticket, r.priority);
            else
                bind_all(call, r.key, r.owner, r.permits, r.lease_ms, r.holder, r.note, r.ticket, r.priority);
            grant_result out;
            try {
                for_rows(call, [&](sql::ResultSet& rs) {
                    if (!rs.isNull(1)) out.token = rs.getInt64(1);
                    else if (!rs.isNull(2)) out.remaining_ms = rs.getInt64(2);
                });
            } catch (const sql::SQLException& e) {
                // The procedure rolled back: contention, as for grant().
                if (is_contention(e.getErrorCode()) || e.getErrorCode() == er_dup_entry ||
                    e.getErrorCode() == er_statement_timeout)
                    return grant_result{};
                throw;
            }
            return out;
        });
    }

    bool release_holder(char kind, std::string_view key, std::string_view owner) override {
        return guarded("release", [&] {
            // Procedures that also wake the next waiter after their commit
            // (migrations/mysql/0007_release_wake_ups.sql).
            return scalar(kind == 'S' ? "shared_release" : "permit_release", key, owner).value_or(0) == 1;
        });
    }

    std::vector<bool> renew_holders(const std::vector<renewal>& batch) override {
        return guarded("renewing holders", [&] {
            auto& call = prepared("holders_renew");
            bind_all(call, std::string_view(renewals_json(batch)));
            std::set<std::string> renewed;
            try {
                for_rows(call, [&](sql::ResultSet& rs) { renewed.insert(rs.getString(1)); });
            } catch (const sql::SQLException& e) {
                // A key's row stayed locked (a grant or release of it): the
                // caller renews each holder alone.
                if (!is_contention(e.getErrorCode())) throw;
                return std::vector<bool>(batch.size(), false);
            }
            return present_in(batch, renewed, [](const renewal& r) { return r.owner; });
        });
    }

    bool holder_live(char kind, std::string_view key, std::string_view owner) override {
        return guarded("renewing a holder", [&] {
            return scalar("holder_live", std::string_view(&kind, 1), key, owner).value_or(0) > 0;
        });
    }

    void set_permits(std::string_view name, std::int64_t permits) override {
        guarded("setting permits", [&] { update("permit_limit", name, permits); });
    }

    std::vector<holder_row> holders(std::string_view prefix, std::size_t limit) override {
        return guarded("listing holders", [&] {
            auto& ps = prepared("holders_list");
            bind_all(ps, prefix, prefix, static_cast<std::int64_t>(limit));
            std::vector<holder_row> out;
            for_rows(ps, [&](sql::ResultSet& rs) {
                const my_row r{rs};
                out.push_back({r.text(0).c_str()[0], r.text(1), r.text(2), r.integer(3), r.integer(4), r.text(5),
                               r.text(6), r.integer(7)});
            });
            return out;
        });
    }

    std::size_t sweep_holders(std::size_t limit) override {
        return guarded("sweep_holders", [&] { return update("holders_sweep", static_cast<std::int64_t>(limit)); });
    }

    row_lock_ops* row_locks() override { return this; }

    attempt lock_row(std::string_view key, std::int64_t lease_ms, std::int64_t ticket,
                     std::int64_t priority) override {
        if (galera_) throw config_error("select_for_update needs row locks: " + galera_no_row_locks());
        return guarded("lock_row", [&]() -> attempt {
            const int idle_s = seconds_up(std::chrono::milliseconds(lease_ms));
            if (pinned_for_s_ != idle_s) {
                update("pin_session", idle_s);
                pinned_for_s_ = idle_s;
            }
            begin();
            try {
                if (update("lock_row", key, key, priority, priority, ticket, priority, ticket) == 1) return {state::locked, std::nullopt};
            } catch (const sql::SQLException& e) {
                if (!is_contention(e.getErrorCode())) throw;
                rollback();
                return {state::busy, std::nullopt};
            }
            // Not free: absent, or held. Read which, without locking.
            attempt out{state::missing, std::nullopt};
            auto& ps = prepared("lock_row_state");
            bind_all(ps, key);
            for_rows(ps, [&](sql::ResultSet& rs) {
                if (!rs.getBoolean(1)) return;
                out.state = state::busy;
                if (!rs.isNull(2)) out.remaining_ms = rs.getInt64(2);
            });
            rollback();
            return out;
        });
    }

    void wake_next(std::string_view key) override {
        guarded("wake_next", [&] { update("wake_next", key); });
    }

    void end_row_lock() override {
        guarded("end_row_lock", [&] {
            if (in_tx_) rollback();
        });
    }

    void ensure_row(std::string_view key) override {
        guarded("ensure_row", [&] { update("ensure_row", key); });
    }

    std::optional<std::int64_t> bump_token(std::string_view key) override {
        return guarded("bump_token", [&]() -> std::optional<std::int64_t> {
            try {
                return scalar("bump_row_lock_token", key);
            } catch (const sql::SQLException& e) {
                // An earlier holder's fenced transaction share-locks the fence row.
                if (e.getErrorCode() == er_lock_wait_timeout) return std::nullopt;
                throw;
            }
        });
    }

    std::int64_t fence_token(std::string_view key) override {
        return guarded("ping", [&] { return scalar("read_token", key).value_or(0); });
    }

    std::vector<std::string> held_keys(std::string_view prefix, std::string_view after, std::size_t limit) override {
        return guarded("listing held keys", [&] {
            auto& ps = prepared("held_keys");
            bind_all(ps, prefix, prefix, after, static_cast<std::int64_t>(limit));
            std::vector<std::string> out;
            for_rows(ps, [&](sql::ResultSet& rs) { out.push_back(rs.getString(1)); });
            return out;
        });
    }

    std::vector<waiter_info> waiters(std::string_view prefix, std::size_t limit) override {
        return guarded("listing waiters", [&] {
            auto& ps = prepared("waiters");
            bind_all(ps, prefix, prefix, static_cast<std::int64_t>(limit));
            std::vector<waiter_info> out;
            for_rows(ps, [&](sql::ResultSet& rs) {
                const my_row r{rs};
                out.push_back({.key = r.text(0),
                               .ticket = r.integer(1),
                               .owner = r.text(2),
                               .holder = r.text(3),
                               .fair = rs.getBoolean(5),
                               .priority = static_cast<int>(r.integer(5)),
                               .waited = std::chrono::milliseconds(r.integer(6)),
                               .expires_in = std::chrono::milliseconds(r.integer(7))});
            });
            return out;
        });
    }

    std::optional<std::int64_t> force_release(std::string_view key) override {
        return guarded("force_release", [&]() -> std::optional<std::int64_t> {
            begin();
            bool live = false;
            auto& ps = prepared("force_live");
            bind_all(ps, key);
            for_rows(ps, [&](sql::ResultSet&) { live = true; });
            if (live) update("force_expire", key);
            if (update("force_bump", key) == 0) {
                rollback();
                return std::nullopt;
            }
            const auto token = scalar("read_token", key);
            commit();
            return token;
        });
    }

    lock_info inspect(std::string_view key) override {
        return guarded("inspect", [&] {
            lock_info info;
            info.key = std::string(key);
            bool row_exists = false;
            auto& ps = prepared("inspect_lock");
            bind_all(ps, key);
            for_rows(ps, [&](sql::ResultSet& rs) {
                row_exists = true;
                read_lease(my_row{rs}, 0, info);
            });
            info.token = scalar("read_token", key).value_or(0);
            if (row_exists && !info.held) {
                // The row is there, free by its lease columns: a row lock may hold it.
                bool free = false;
                auto& probe = prepared("inspect_row_free");
                bind_all(probe, key);
                for_rows(probe, [&](sql::ResultSet&) { free = true; });
                if (!free) held_by_row_lock(info);
            }
            return info;
        });
    }

    database_gauges gauges(std::size_t queue_limit) override {
        return guarded("reading gauges", [&] {
            database_gauges g;
            auto& ps = prepared("gauges");
            for_rows(ps, [&](sql::ResultSet& rs) { g = read_gauges(my_row{rs}); });
            if (queue_limit > 0) {
                auto& queues = prepared("gauge_queues");
                bind_all(queues, static_cast<std::int64_t>(queue_limit));
                for_rows(queues, [&](sql::ResultSet& rs) { g.queues.push_back(read_queue(my_row{rs})); });
            }
            return g;
        });
    }

    fence_result fenced(std::string_view key, std::int64_t token,
                        const std::function<bool(ledger&)>& body) override {
        return guarded("fenced transaction", [&]() -> fence_result {
            begin();
            try {
                scalar("fence", key, token);
            } catch (const sql::SQLException& e) {
                if (e.getErrorCode() != er_signal_exception) throw;
                rollback();
                std::string msg = e.what();
                if (msg.starts_with("sqlock: ")) msg.erase(0, 8);
                return {false, msg};
            }
            my_ledger l(*this);
            bool commit_it = false;
            try {
                commit_it = body(l);
            } catch (const sql::SQLException&) {
                throw;  // guarded() rolls back
            } catch (...) {
                rollback();
                throw;
            }
            if (!commit_it) {
                rollback();
                return {true, ""};
            }
            commit();
            fault(fault_point::fenced_commit_done);
            return {true, ""};
        });
    }

    job_row job_read(std::string_view job, std::string_view run_key) override {
        return guarded("reading the job ledger", [&] {
            auto& ps = prepared("job_row");
            bind_all(ps, job, run_key);
            job_row out;  // always one row: a left join from the clock
            for_rows(ps, [&](sql::ResultSet& rs) { out = read_job_row(my_row{rs}); });
            return out;
        });
    }

    std::vector<job_row> job_list(std::string_view job, bool exact, std::size_t limit) override {
        return guarded("listing the job ledger", [&] {
            auto& ps = prepared("job_list");
            bind_all(ps, exact, job, job, job, static_cast<std::int64_t>(limit));
            std::vector<job_row> out;
            for_rows(ps, [&](sql::ResultSet& rs) { out.push_back(read_job_row(my_row{rs})); });
            return out;
        });
    }

    std::int64_t now_ms() override {
        return guarded("reading the clock", [&] { return scalar("now").value_or(0); });
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

    // The waiting side of the doorbell (migrations/mysql/0005_wake_ups.sql):
    // sleeps up to `timeout` in a statement that names `channel`, which a
    // release interrupts when this client's waiter heads the queue. True when
    // interrupted. Not counted as a statement of any operation: it runs on the
    // listener's own connection, in the background.
    bool doze(const std::string& channel, std::chrono::milliseconds timeout) {
        char seconds[32];
        std::snprintf(seconds, sizeof seconds, "%.3f", static_cast<double>(timeout.count()) / 1000.0);
        // The release procedure matches this text: keep the two in step. The
        // channel is the client's own (prefix and hex), checked here anyway
        // because it is written into the statement.
        for (char c : channel)
            if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_'))
                throw config_error("wake-up channel '" + channel + "' is not [a-z0-9_]*");
        const std::string text = std::string("SELECT SLEEP(") + seconds + "), '" + channel + "'";
        try {
            std::unique_ptr<sql::ResultSet> rs(stmt_->executeQuery(text));
            return rs->next() && rs->getInt(1) == 1;  // SLEEP() answers 1 when interrupted
        } catch (const sql::SQLException& e) {
            if (e.getErrorCode() == er_query_interrupted) return true;
            throw connection_error(std::string("MySQL wake-up listener failed: ") + e.what() + " (error " +
                                   std::to_string(e.getErrorCode()) + ")");
        }
    }

private:
    class my_ledger final : public ledger {
    public:
        explicit my_ledger(my_session& s) : s_(s) {}
        std::optional<job_row> read(std::string_view job, std::string_view run_key) override {
            auto& ps = s_.prepared("job_lock");
            bind_all(ps, job, run_key);
            std::optional<job_row> out;
            s_.for_rows(ps, [&](sql::ResultSet& rs) { out = read_job_row(my_row{rs}); });
            return out;
        }
        void write(const job_write& w) override {
            s_.update("job_write", w.job, w.run_key, w.status, w.owner, w.holder, w.token, w.attempts, w.starting,
                      w.retry_in_ms, w.retry_in_ms, w.result, w.last_error, w.starting);
        }

    private:
        my_session& s_;
    };

    void count() {
        if (ctx_.statements) ++*ctx_.statements;
    }

    void exec(const std::string& text) {
        count();
        stmt_->execute(text);
    }

    void begin() {
        exec("START TRANSACTION");
        in_tx_ = true;
    }

    void commit() {
        exec("COMMIT");
        in_tx_ = false;
    }

    void rollback() {
        in_tx_ = false;
        exec("ROLLBACK");
    }

    // A prepared statement run for its affected-row count.
    template <class... Args>
    std::size_t update(const char* name, const Args&... args) {
        auto& ps = prepared(name);
        bind_all(ps, args...);
        count();
        return static_cast<std::size_t>(ps.executeUpdate());
    }

    // f(row) for each row of a prepared statement already bound. A CALL
    // answers with its rows and then a status: read past both, or the
    // connection is out of sync for the next statement.
    template <class F>
    void for_rows(sql::PreparedStatement& ps, F&& f) {
        count();
        {
            std::unique_ptr<sql::ResultSet> rs(ps.executeQuery());
            while (rs->next()) f(*rs);
        }
        drain(ps);
    }

    // The first column of the first row, when there is one and it is not NULL.
    template <class... Args>
    std::optional<std::int64_t> scalar(const char* name, const Args&... args) {
        auto& ps = prepared(name);
        bind_all(ps, args...);
        std::optional<std::int64_t> out;
        for_rows(ps, [&](sql::ResultSet& rs) {
            if (!out && !rs.isNull(1)) out = rs.getInt64(1);
        });
        return out;
    }

    // One try at the migration lock: a named lock, or on Galera (where named
    // locks are node-local) the row of migrate_lock_table.sql.
    bool lock_migration() {
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

    void unlock_migration() {
        try {
            if (galera_) update("migrate_unlock_row", migrator_);
            else scalar("migrate_unlock");
        } catch (...) {
            // The named lock dies with the connection anyway; the row expires.
        }
    }

    static std::string random_owner() {
        std::random_device rd;
        return std::to_string(rd()) + "-" + std::to_string(rd()) + "-" + std::to_string(rd());
    }

    bool read_wsrep_on() {
        try {
            count();
            std::unique_ptr<sql::ResultSet> rs(stmt_->executeQuery(setup_.sql.get("wsrep_on")));
            return rs->next() && rs->getInt(1) == 1;
        } catch (const sql::SQLException& e) {
            if (e.getErrorCode() == er_unknown_system_variable) return false;
            throw;
        }
    }

    int read_version() {
        count();
        std::unique_ptr<sql::ResultSet> rs(stmt_->executeQuery(setup_.sql.get("schema_version")));
        return rs->next() ? rs->getInt(1) : 0;
    }

    sql::PreparedStatement& prepared(const std::string& name) { return statements_->prepared(name); }
    sql::PreparedStatement& generated(const std::string& name, std::size_t n,
                                      std::initializer_list<statement_cache::repeat> markers) {
        return statements_->generated(name, n, markers);
    }

    template <class F>
    auto guarded(const char* what, F&& f) -> decltype(f()) {
        for (int try_number = 1;; ++try_number) {
            try {
                return f();
            } catch (const sql::SQLException& e) {
                // A deadlock or a Galera certification conflict rolled the
                // whole transaction back: nothing of it happened, so it runs
                // again (but never a fenced transaction, whose body is the
                // application's).
                if (e.getErrorCode() != er_lock_deadlock || try_number >= deadlock_retries ||
                    std::string_view(what) == "fenced transaction")
                    fail(what, e);
                if (in_tx_) {
                    try {
                        rollback();
                    } catch (const sql::SQLException&) {
                        throw connection_error(std::string("MySQL connection unusable after ") + what);
                    }
                }
                std::this_thread::sleep_for(std::chrono::milliseconds(try_number * try_number));
            }
        }
    }

    [[noreturn]] void fail(const char* what, const sql::SQLException& e) {
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

    const my_setup& setup_;
    const dialect_context& ctx_;
    std::unique_ptr<sql::Connection> conn_;
    std::unique_ptr<sql::Statement> stmt_;
    std::optional<statement_cache> statements_;
    bool in_tx_ = false;
    int pinned_for_s_ = 0;  // idle_transaction_timeout in force
    bool galera_ = false;   // the server is a Galera node (wsrep_on)
    std::string migrator_;  // this session's owner id of the Galera migration lock
};

class my_notifier final : public notifier {
public:
    my_notifier(const my_setup& setup, std::string channel) : session_(setup), channel_(std::move(channel)) {}
    bool wait(std::chrono::milliseconds timeout) override { return session_.doze(channel_, timeout); }

private:
    my_session session_;
    std::string channel_;
};

class my_dialect final : public dialect {
public:
    explicit my_dialect(const dialect_context& ctx)
        : dialect(dialect_name, ctx.options.table_prefix),
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
        return {.row_locks = !galera, .wake_ups = !galera, .sql_fence = true, .relaxed_durability = false,
                .embedded = false};
    }
    std::string no_row_locks_reason() const override { return galera_no_row_locks(); }
    std::unique_ptr<session> connect() override { return std::make_unique<my_session>(setup_); }
    std::unique_ptr<notifier> listen(const std::string& channel) override {
        return std::make_unique<my_notifier>(listener_setup_, channel);
    }
    std::string fence_sql() const override { return "SELECT " + sql().prefix() + "assert_held(?, ?)"; }

private:
    static dialect_context uncounted(const dialect_context& ctx) {
        dialect_context out = ctx;
        out.statements = nullptr;
        return out;
    }

    my_setup setup_;
    // The listener's connection: its statements belong to no operation, so
    // they are not counted (as PostgreSQL's LISTEN connection's are not).
    dialect_context quiet_ctx_;
    my_setup listener_setup_;
};

}  // namespace

std::unique_ptr<dialect> make_mysql(const dialect_context& ctx) { return std::make_unique<my_dialect>(ctx); }

}  // namespace sqlock::detail
