#pragma once
// The SQLite session, for the dialect's own files only: the process's write
// queue, the borrowed prepared statement (query), and the session's helpers
// (statements, BEGIN IMMEDIATE transactions) every operation goes through.
// The operations are defined by theme: sqlite.cpp opens the file, registers
// the clock, migrates, translates errors and makes the dialect (with the
// library's fence helper); leases.cpp has exclusive leases, the wait queue
// and sweeps of lock and waiter rows; holders.cpp shared holders and
// semaphore permits; admin.cpp inspection, force_release, fenced
// transactions and the job ledger (and its sweep).

#include "dialects/common/common.hpp"
#include "dialects/common/sql_library.hpp"
#include "dialects/dialect.hpp"
#include "dialects/sqlite/busy_wait.hpp"
#include "dialects/sqlite/write_queue.hpp"

#include <sqlock/errors.hpp>

#include <sqlite3.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace sqlock::detail::sqlite {

inline constexpr const char* dialect_name = "sqlite";

// A failed SQLite call as the sqlock error it is: schema_error, connection_error or db_error.
[[noreturn]] void fail(sqlite3* db, int rc, const std::string& what);

// A prepared statement borrowed from the session's cache; reset on scope exit
// so that it never keeps a read transaction open. A statement that writes
// holds this process's turn at the write lock while it lives.
class query {
public:
    query(sqlite3* db, sqlite3_stmt* st, std::atomic<std::uint64_t>* counter, write_queue* writers)
        : db_(db), st_(st) {
        if (writers && !sqlite3_stmt_readonly(st)) turn_ = std::unique_lock(*writers);
        if (counter) ++*counter;
    }
    ~query() {
        sqlite3_reset(st_);
        sqlite3_clear_bindings(st_);
    }
    query(const query&) = delete;
    query& operator=(const query&) = delete;

    query& bind(int i, std::string_view v) {
        // A null data pointer would bind NULL; an empty view is the empty string.
        check(sqlite3_bind_text(st_, i, v.data() ? v.data() : "", static_cast<int>(v.size()), SQLITE_TRANSIENT));
        return *this;
    }
    query& bind(int i, std::int64_t v) {
        check(sqlite3_bind_int64(st_, i, v));
        return *this;
    }
    // True when a row is available.
    bool step() {
        int rc = sqlite3_step(st_);
        if (rc == SQLITE_ROW) return true;
        if (rc == SQLITE_DONE) return false;
        fail(db_, sqlite3_extended_errcode(db_), "sqlite statement failed");
    }
    void run() {
        while (step()) {
        }
    }
    bool null(int col) const { return sqlite3_column_type(st_, col) == SQLITE_NULL; }
    std::int64_t integer(int col) const { return sqlite3_column_int64(st_, col); }
    std::string text(int col) const {
        auto p = reinterpret_cast<const char*>(sqlite3_column_text(st_, col));
        return p ? std::string(p, static_cast<std::size_t>(sqlite3_column_bytes(st_, col))) : std::string();
    }
    int changes() const { return sqlite3_changes(db_); }

private:
    void check(int rc) {
        if (rc != SQLITE_OK) fail(db_, rc, "sqlite bind failed");
    }
    sqlite3* db_;
    sqlite3_stmt* st_;
    std::unique_lock<write_queue> turn_;  // released after the reset in ~query
};

class sqlite_session final : public session {
public:
    sqlite_session(const std::string& path, const dialect_context& ctx, const sql_library& sql,
                   std::shared_ptr<write_queue> writers);
    ~sqlite_session() override;

    // session's operations, defined by theme in this folder's files.
#include "dialects/session_operations.inc"

    grant_result grant_once(const grant_request& r);
    // The grant statement; the token when it granted.
    std::optional<std::int64_t> grant_statement(const grant_request& r);
    std::optional<std::int64_t> grant_shared(const holder_request& r);
    std::optional<std::int64_t> grant_permit(const holder_request& r);
    // A migration's statements one by one. SQLite's ALTER TABLE ... ADD
    // COLUMN has no IF NOT EXISTS: one whose column exists already (the
    // version table was reset, or the migration was applied by hand without
    // recording it) is passed over, so that every migration is idempotent.
    void exec_migration(const std::string& text);

private:
    class sqlite_ledger;

    // A statement run for the number of rows it changed; arguments bound to
    // ?1, ?2, ... in order.
    template <class... Args>
    std::size_t update(const std::string& name, const Args&... args) {
        auto q = prepare(name);
        int i = 1;
        (q.bind(i++, args), ...);
        q.run();
        return static_cast<std::size_t>(q.changes());
    }

    // The first column of the statement's first row (empty when no row or
    // NULL), the statement then run to its end; arguments bound in order.
    template <class... Args>
    std::optional<std::int64_t> first_integer(const std::string& name, const Args&... args) {
        auto q = prepare(name);
        int i = 1;
        (q.bind(i++, args), ...);
        // Drain only after a row (see grant_statement).
        if (!q.step()) return std::nullopt;
        std::optional<std::int64_t> out;
        if (!q.null(0)) out = q.integer(0);
        while (q.step()) {
        }
        return out;
    }

    // Runs body in a BEGIN IMMEDIATE transaction: committed when it returns
    // true, rolled back when it returns false or throws. Returns whether it
    // committed. The process's write turn is taken first, for the whole
    // transaction, so that the statements inside do not queue for it again
    // and no other thread of this process waits, holding the turn, for the
    // write lock this transaction holds.
    template <class F>
    bool write_transaction(F&& body) {
        std::unique_lock turn(*writers_);
        in_write_tx_ = true;
        struct leave {
            bool& flag;
            ~leave() { flag = false; }
        } leave_tx{in_write_tx_};
        exec("BEGIN IMMEDIATE");
        try {
            const bool commit = body();
            exec(commit ? "COMMIT" : "ROLLBACK");
            return commit;
        } catch (...) {
            sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
            throw;
        }
    }

    // Runs body with this connection's commits not waiting for the disk: a
    // release's, and the wait queue's. In WAL mode, synchronous = NORMAL
    // skips the fsync at commit, and the next commit that syncs the log file
    // (any connection's, in any process) covers this one too, so no grant
    // that saw the release is durable without it; a release lost with the
    // machine leaves the key held until its lease runs out, as a crashed
    // holder would. The PRAGMA is a connection setting, not a statement
    // against the tables: it is not counted.
    template <class F>
    auto unflushed(F&& body) {
        // Already NORMAL or OFF; or inside a transaction, whose commit is
        // not this body's (and SQLite refuses the PRAGMA there).
        if (commit_sync_ <= 1 || !sqlite3_get_autocommit(db_)) return body();
        set_synchronous(1);
        try {
            auto out = body();
            set_synchronous(commit_sync_);
            return out;
        } catch (...) {
            sqlite3_exec(db_, ("PRAGMA synchronous = " + std::to_string(commit_sync_)).c_str(), nullptr, nullptr,
                         nullptr);
            throw;
        }
    }
    void set_synchronous(int level);

    void exec(const std::string& sql);
    query prepare(const std::string& name);

    // Prepared statements refer to the schema; after a migration, prepare anew.
    void cache_clear() {
        for (auto& [name, st] : cache_) sqlite3_finalize(st);
        cache_.clear();
    }

    const dialect_context& ctx_;
    const sql_library& sql_;
    std::shared_ptr<write_queue> writers_;
    busy_wait busy_;  // outlives db_, whose busy handler points here
    sqlite3* db_ = nullptr;
    std::map<std::string, sqlite3_stmt*> cache_;
    bool in_write_tx_ = false;  // this session holds the process's write turn
    int commit_sync_ = 2;       // PRAGMA synchronous for every commit but unflushed() ones
};

}  // namespace sqlock::detail::sqlite
