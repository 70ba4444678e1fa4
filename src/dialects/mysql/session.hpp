#pragma once
// The MySQL / MariaDB session, for the dialect's own files only: its setup,
// the server's error numbers, and the statement helpers (prepared statements,
// CALL results, deadlock retries) every operation goes through. The
// operations are defined by theme: mysql.cpp connects, translates errors,
// migrates, listens for wake-ups and makes the dialect; leases.cpp has
// exclusive leases, the wait queue, sweeps and select_for_update's row locks;
// holders.cpp shared holders and semaphore permits; admin.cpp inspection,
// force_release, fenced transactions and the job ledger.

#include "dialects/common/common.hpp"
#include "dialects/common/sql_library.hpp"
#include "dialects/dialect.hpp"
#include "dialects/mysql/lean_memo.hpp"
#include "dialects/mysql/mysql_url.hpp"
#include "dialects/mysql/statements.hpp"

#include <sqlock/errors.hpp>

#include <cppconn/connection.h>
#include <cppconn/exception.h>
#include <cppconn/prepared_statement.h>
#include <cppconn/resultset.h>
#include <cppconn/statement.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace sqlock::detail::mysql {

inline constexpr const char* dialect_name = "mysql";

// MariaDB error numbers (include/mysqld_error.h, errmsg.h).
inline constexpr int er_dup_entry = 1062;
inline constexpr int er_lock_wait_timeout = 1205;  // also NOWAIT and a lock wait of 0
inline constexpr int er_lock_deadlock = 1213;
inline constexpr int er_no_such_table = 1146;
inline constexpr int er_signal_exception = 1644;   // SIGNAL SQLSTATE '45000' (the fence)
inline constexpr int er_statement_timeout = 1969;  // max_statement_time exceeded
inline constexpr int er_query_interrupted = 1317;  // KILL QUERY: the doorbell rang
inline constexpr int er_unknown_system_variable = 1193;

// A Galera certification conflict (another node committed a conflicting
// write first) fails a statement or COMMIT with 1213 and rolls the whole
// transaction back: contention, tried again this many times.
inline constexpr int deadlock_retries = 5;

inline bool is_contention(int code) { return code == er_lock_wait_timeout || code == er_lock_deadlock; }

inline int seconds_up(std::chrono::milliseconds ms) {
    auto s = static_cast<int>((ms.count() + 999) / 1000);
    return s < 1 ? 1 : s;
}

// Whether the server is a Galera node: unknown until the first connection.
enum class wsrep : int { unknown, off, on };

struct my_setup {
    const dialect_context& ctx;
    const sql_library& sql;
    mysql_url target;
    mutable std::atomic<wsrep> galera{wsrep::unknown};  // set by every session at connect
    mutable lean_memo memo;                             // the keys this client was granted
};

// Why select_for_update is refused on a Galera node.
std::string galera_no_row_locks();
// Why shared grants are refused on a Galera node.
std::string galera_no_shared_locks();

class my_session final : public session, public row_lock_ops {
public:
    explicit my_session(const my_setup& setup);

    // session's operations and row_lock_ops's, defined by theme in this folder's files.
#include "dialects/session_operations.inc"
#include "dialects/row_lock_operations.inc"

    // The waiting side of the doorbell (migrations/mysql/0005_wake_ups.sql
    // and 0013_ring_counts.sql): sleeps up to `timeout` in a statement that
    // names `channel`, unless the channel's ring count is no longer `seen`; a
    // release counts a ring and then interrupts the statement when this
    // client's waiter heads the queue. A ring when the count moved (and
    // `seen` is then the new count), which no ring escapes: one counted while
    // the listener was between statements is seen by the next. A hint when
    // the statement was interrupted: the next call reads the count. Not
    // counted as a statement of any operation: it runs on the listener's own
    // connection, in the background.
    heard doze(const std::string& channel, std::chrono::milliseconds timeout, std::int64_t& seen);
    // Takes the named lock `channel` for the life of this connection (how a
    // release finds the listener to interrupt) and makes the channel's ring
    // count; returns the count so far. Each doze first arms at the count it
    // sleeps at (migrations/mysql/0016_one_interrupt_per_sleep.sql): a
    // release interrupts only a listener armed at the count it moved past,
    // so one sleep is interrupted once, whatever the number of releases.
    std::int64_t hold_doorbell(const std::string& channel);

private:
    class my_ledger;

    void unlean_quietly(std::string_view key);  // leases.cpp

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
    bool lock_migration();
    void unlock_migration();

    static std::string random_owner();
    bool read_wsrep_on();
    int read_version();

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

    [[noreturn]] void fail(const char* what, const sql::SQLException& e);

    const my_setup& setup_;
    const dialect_context& ctx_;
    std::unique_ptr<sql::Connection> conn_;
    std::unique_ptr<sql::Statement> stmt_;
    std::optional<statement_cache> statements_;
    bool in_tx_ = false;
    int pinned_for_s_ = 0;  // idle_transaction_timeout in force
    bool galera_ = false;   // the server is a Galera node (wsrep_on)
    // The ring count this listener's connection holds the armed name of
    // (no_arm: none yet).
    static constexpr std::int64_t no_arm = -2;
    std::int64_t armed_ = no_arm;
    void arm(const std::string& channel, std::int64_t seen);
    std::string migrator_;  // this session's owner id of the Galera migration lock
};

}  // namespace sqlock::detail::mysql
