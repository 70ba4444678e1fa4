// SQLite dialect: the embedded default. One writer at a time, so a lease
// grant is a single statement; WAL lets readers run beside it.

#include "dialects/common/common.hpp"
#include "dialects/common/fault.hpp"
#include "dialects/common/sql_library.hpp"
#include "dialects/dialect.hpp"
#include "dialects/sqlite/busy_wait.hpp"
#include "dialects/sqlite/doorbell.hpp"
#include "dialects/sqlite/sqlite_url.hpp"
#include "dialects/sqlite/write_queue.hpp"

#include <sqlock/errors.hpp>

#include <sqlite3.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstring>
#include <ctime>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>

namespace sqlock::detail {
namespace {

constexpr const char* dialect_name = "sqlite";

// SQLite has no server, so its "database clock" is the host's real-time
// clock, shared by every process using the file. Read it with the raw system
// call: a process whose libc clock is faked (LD_PRELOAD faketime) or skewed
// still agrees with the others. Registered on every connection as
// <prefix>now_ms(); the statements in sql/sqlite/ compare expiries with it.
void sql_now_ms(sqlite3_context* context, int, sqlite3_value**) {
    timespec ts{};
    if (using_client_clock_for_testing()) [[unlikely]]
        ::clock_gettime(CLOCK_REALTIME, &ts);
    else
        syscall(SYS_clock_gettime, CLOCK_REALTIME, &ts);
    sqlite3_result_int64(context, static_cast<sqlite3_int64>(ts.tv_sec) * 1000 + ts.tv_nsec / 1'000'000);
}

void register_clock(sqlite3* db, const sql_library& sql) {
    const std::string name = sql.prefix() + "now_ms";
    sqlite3_create_function_v2(db, name.c_str(), 0, SQLITE_UTF8, nullptr, sql_now_ms, nullptr, nullptr, nullptr);
}

[[noreturn]] void fail(sqlite3* db, int rc, const std::string& what) {
    const std::string msg = db ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
    const int primary = rc & 0xff;
    if (msg.find("no such table") != std::string::npos) throw_schema_missing("the SQLite database", msg);
    if (primary == SQLITE_CANTOPEN || primary == SQLITE_NOTADB || primary == SQLITE_PERM)
        throw connection_error(what + ": " + msg);
    throw db_error(dialect_name, std::to_string(rc), what + ": " + msg);
}

// One queue per database file in this process, shared by every client of it.
std::shared_ptr<write_queue> write_queue_for(const std::string& path) {
    static std::mutex mu;
    static std::map<std::string, std::weak_ptr<write_queue>> queues;
    std::error_code ec;
    auto canonical = std::filesystem::weakly_canonical(path, ec);
    const std::string id = ec ? path : canonical.string();
    std::lock_guard lock(mu);
    auto q = queues[id].lock();
    if (!q) {
        q = std::make_shared<write_queue>();
        queues[id] = q;
    }
    return q;
}

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
                   std::shared_ptr<write_queue> writers)
        : ctx_(ctx), sql_(sql), writers_(std::move(writers)) {
        int rc = sqlite3_open_v2(path.c_str(), &db_, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX,
                                 nullptr);
        if (rc != SQLITE_OK) {
            std::string msg = db_ ? sqlite3_errmsg(db_) : sqlite3_errstr(rc);
            sqlite3_close(db_);
            throw connection_error("cannot open sqlite database '" + path + "': " + msg +
                                   " (check that the directory exists and is writable)");
        }
        // Writers wait for each other up to the statement timeout instead of
        // failing with SQLITE_BUSY at once.
        busy_.install(db_, ctx.options.statement_timeout);
        register_clock(db_, sql_);
        exec("PRAGMA journal_mode=WAL");
        exec("PRAGMA foreign_keys=ON");
        if (ctx.options.durability == durability::relaxed) exec(sql_.get("relaxed_durability"));
    }
    ~sqlite_session() override {
        for (auto& [name, st] : cache_) sqlite3_finalize(st);
        sqlite3_close_v2(db_);
    }

    grant_result grant(const grant_request& r) override {
        try {
            return grant_once(r);
        } catch (const db_error& e) {
            // The busy timeout ran out: another writer kept the database
            // (perhaps a frozen process). For the caller that is contention.
            if (!e.code().empty() && (std::stoi(e.code()) & 0xff) == SQLITE_BUSY) return {};
            throw;
        }
    }

    grant_result grant_once(const grant_request& r) {
        grant_result out;
        if (r.ticket == no_ticket) {
            out.token = grant_statement(r);
        } else {
            // A queued waiter's grant and its leaving the queue commit
            // together: SQLite has no statement that does both, and a grant
            // that committed alone could not be undone if the second
            // statement then failed (busy), leaving the key held by an owner
            // nobody knows. Once BEGIN IMMEDIATE has the write lock (a busy
            // one is contention, with nothing done), no statement inside
            // can be busy.
            write_transaction([&] {
                out.token = grant_statement(r);
                if (out.token) {
                    fault(fault_point::sqlite_grant_written);
                    dequeue(r.ticket);
                }
                return true;
            });
        }
        if (!out.token && r.want_remaining) {
            auto q = prepare("remaining");
            q.bind(1, r.key);
            if (q.step() && !q.null(0)) out.remaining_ms = q.integer(0);
        }
        return out;
    }

    // The grant statement; the token when it granted.
    std::optional<std::int64_t> grant_statement(const grant_request& r) {
        auto q = prepare("grant");
        q.bind(1, r.key).bind(2, r.owner).bind(3, std::string_view(to_string(r.mode)));
        q.bind(4, r.lease_ms).bind(5, r.holder).bind(6, r.note).bind(7, r.ticket).bind(8, r.priority);
        // Drain only after a row: stepping a statement that already
        // returned SQLITE_DONE resets and runs it again, which would grant
        // the key a second time and drop the token.
        if (!q.step()) return std::nullopt;
        const std::int64_t token = q.integer(0);
        while (q.step()) {
        }
        return token;
    }

    bool release(std::string_view key, std::string_view owner, sqlock::mode m) override {
        std::optional<std::string> wake;  // the head waiter's channel, when released
        {
            auto q = prepare(m == mode::unique_insert ? "release_delete" : "release_clear");
            q.bind(1, key).bind(2, owner);
            if (q.step()) wake = q.null(0) ? std::string() : q.text(0);
            q.run();
        }  // committed (autocommit) and this process's write turn given back
        if (wake && !wake->empty()) ring_sqlite_doorbell(*wake);
        return wake.has_value();
    }

    renew_result renew(std::string_view key, std::string_view owner, std::int64_t lease_ms, bool) override {
        return update("renew", key, owner, lease_ms) == 1 ? renew_result::renewed : renew_result::not_held;
    }

    void bound_waits(std::chrono::milliseconds bound) override {
        // The busy handler is SQLite's only wait: for another process's write lock.
        busy_.install(db_, bound.count() > 0 ? bound : ctx_.options.statement_timeout);
    }

    std::vector<bool> renew_batch(const std::vector<renewal>& batch) override {
        auto q = prepare("renew_batch");
        q.bind(1, std::string_view(renewals_json(batch)));
        std::set<std::string> renewed;
        while (q.step()) renewed.insert(q.text(0));
        return present_in(batch, renewed, [](const renewal& r) { return r.owner; });
    }

    std::size_t sweep(std::size_t limit) override { return update("sweep", static_cast<std::int64_t>(limit)); }
    std::size_t sweep_waiters(std::size_t limit) override {
        return update("sweep_waiters", static_cast<std::int64_t>(limit));
    }

    std::int64_t enqueue(const waiter_request& w) override {
        auto q = prepare(w.kind == 'X' ? "enqueue" : "holder_enqueue");
        q.bind(1, w.key).bind(2, w.owner).bind(3, std::int64_t{w.fair}).bind(4, std::int64_t{w.priority});
        q.bind(5, w.lease_ms).bind(6, w.listener).bind(7, w.holder);
        if (w.kind != 'X') q.bind(8, std::string_view(&w.kind, 1));
        if (!q.step()) throw db_error(dialect_name, "", "enqueue returned no ticket");
        const std::int64_t ticket = q.integer(0);
        q.run();
        return ticket;
    }

    void dequeue(std::int64_t ticket) override { update("dequeue", ticket); }

    std::vector<bool> beat_waiters(const std::vector<heartbeat>& batch) override {
        auto q = prepare("beat_waiters");
        q.bind(1, std::string_view(heartbeats_json(batch)));
        std::set<std::int64_t> live;
        while (q.step()) live.insert(q.integer(0));
        return present_in(batch, live, [](const heartbeat& h) { return h.ticket; });
    }

    grant_result grant_holder(const holder_request& r) override {
        grant_result out;
        try {
            write_transaction([&] {
                out.token = r.kind == 'S' ? grant_shared(r) : grant_permit(r);
                if (out.token && r.ticket != no_ticket) dequeue(r.ticket);
                return out.token.has_value();
            });
        } catch (const db_error& e) {
            // The busy timeout ran out: contention, as for grant().
            if (!e.code().empty() && (std::stoi(e.code()) & 0xff) == SQLITE_BUSY) return {};
            throw;
        }
        if (!out.token) {
            auto q = prepare(r.kind == 'S' ? "remaining" : "permit_remaining");
            q.bind(1, r.key);
            if (q.step() && !q.null(0)) out.remaining_ms = q.integer(0);
        }
        return out;
    }

    std::optional<std::int64_t> grant_shared(const holder_request& r) {
        if (update("shared_grant", r.key, r.owner, r.lease_ms, r.holder, r.note, r.ticket, r.priority) == 0)
            return std::nullopt;
        update("shared_fence_row", r.key);
        return first_integer("shared_insert", r.key, r.owner, r.lease_ms, r.holder, r.note);
    }

    std::optional<std::int64_t> grant_permit(const holder_request& r) {
        update("permit_define", r.key, r.permits);
        auto token = first_integer("permit_grant", r.key, r.owner, r.permits, r.lease_ms, r.holder, r.note, r.ticket,
                                   r.priority);
        if (token) update("permit_bump", r.key);
        return token;
    }

    bool release_holder(char kind, std::string_view key, std::string_view owner) override {
        bool live = false;
        std::string wake;  // the head waiter's channel, when this release lets it in
        write_transaction([&] {
            if (kind == 'S') {
                live = first_integer("shared_release", key, owner).value_or(0) != 0;
                auto lower = prepare("shared_lower");
                lower.bind(1, key);
                // Drained only after a row (see grant_statement).
                if (lower.step()) {
                    if (!lower.null(0)) wake = lower.text(0);
                    lower.run();
                }
            } else {
                auto q = prepare("permit_release");
                q.bind(1, key).bind(2, owner);
                if (q.step()) {
                    live = q.integer(0) != 0;
                    if (!q.null(1)) wake = q.text(1);
                    q.run();
                }
            }
            return true;
        });
        if (!wake.empty()) ring_sqlite_doorbell(wake);  // committed: the waiter finds the key free
        return live;
    }

    std::vector<bool> renew_holders(const std::vector<renewal>& batch) override {
        const std::string json = renewals_json(batch);
        std::set<std::string> renewed;
        write_transaction([&] {
            {
                auto q = prepare("holders_renew");
                q.bind(1, std::string_view(json));
                while (q.step()) renewed.insert(q.text(0));
            }
            update("holders_raise", std::string_view(json));
            return true;
        });
        return present_in(batch, renewed, [](const renewal& r) { return r.owner; });
    }

    bool holder_live(char kind, std::string_view key, std::string_view owner) override {
        return first_integer("holder_live", std::string_view(&kind, 1), key, owner).value_or(0) > 0;
    }

    void set_permits(std::string_view name, std::int64_t permits) override { update("permit_limit", name, permits); }

    std::vector<holder_row> holders(std::string_view prefix, std::size_t limit) override {
        auto q = prepare("holders_list");
        q.bind(1, prefix).bind(2, static_cast<std::int64_t>(limit));
        std::vector<holder_row> out;
        while (q.step())
            out.push_back({q.text(0).c_str()[0], q.text(1), q.text(2), q.integer(3), q.integer(4), q.text(5),
                           q.text(6), q.null(7) ? 0 : q.integer(7)});
        return out;
    }

    std::size_t sweep_holders(std::size_t limit) override {
        return update("holders_sweep", static_cast<std::int64_t>(limit));
    }

    std::vector<std::string> held_keys(std::string_view prefix, std::string_view after, std::size_t limit) override {
        auto q = prepare("held_keys");
        q.bind(1, prefix).bind(2, static_cast<std::int64_t>(limit)).bind(3, after);
        std::vector<std::string> out;
        while (q.step()) out.push_back(q.text(0));
        return out;
    }

    std::vector<waiter_info> waiters(std::string_view prefix, std::size_t limit) override {
        auto q = prepare("waiters");
        q.bind(1, prefix).bind(2, static_cast<std::int64_t>(limit));
        std::vector<waiter_info> out;
        while (q.step())
            out.push_back({.key = q.text(0),
                           .ticket = q.integer(1),
                           .owner = q.text(2),
                           .holder = q.text(3),
                           .fair = q.integer(4) != 0,
                           .priority = static_cast<int>(q.integer(5)),
                           .waited = std::chrono::milliseconds(q.integer(6)),
                           .expires_in = std::chrono::milliseconds(q.integer(7))});
        return out;
    }

    std::optional<std::int64_t> force_release(std::string_view key) override {
        std::optional<std::int64_t> token;
        write_transaction([&] {
            {
                auto q = prepare("force_bump");
                q.bind(1, key);
                // Drain only after a row (see grant_statement).
                if (q.step()) {
                    token = q.integer(0);
                    q.run();
                }
            }
            if (token) {
                auto q = prepare("force_expire");
                q.bind(1, key);
                q.run();
            }
            return true;
        });
        return token;
    }

    lock_info inspect(std::string_view key) override {
        auto q = prepare("inspect");
        q.bind(1, key);
        lock_info info;
        info.key = std::string(key);
        if (q.step()) {
            read_lease(q, 0, info);
            info.token = q.integer(5);
        }
        return info;
    }

    database_gauges gauges(std::size_t queue_limit) override {
        database_gauges g;
        {
            auto q = prepare("gauges");
            q.step();  // always one row
            g = read_gauges(q);
        }
        if (queue_limit == 0) return g;
        auto q = prepare("gauge_queues");
        q.bind(1, static_cast<std::int64_t>(queue_limit));
        while (q.step()) g.queues.push_back(read_queue(q));
        return g;
    }

    int schema_version() override {
        try {
            auto q = prepare("schema_version");
            return q.step() ? static_cast<int>(q.integer(0)) : 0;
        } catch (const schema_error&) {
            return 0;
        }
    }

    void migrate() override {
        // BEGIN IMMEDIATE takes the write lock first, so concurrent migrators
        // queue behind one another and each sees the version the last one left.
        write_transaction([&] {
            const int current = schema_version();
            for (const auto& m : sql_.migrations())
                if (m.version > current) exec_migration(m.text);
            return true;
        });
        cache_clear();
    }

    // A migration's statements one by one. SQLite's ALTER TABLE ... ADD
    // COLUMN has no IF NOT EXISTS: one whose column exists already (the
    // version table was reset, or the migration was applied by hand without
    // recording it) is passed over, so that every migration is idempotent.
    void exec_migration(const std::string& text) {
        const char* rest = text.c_str();
        while (*rest) {
            sqlite3_stmt* st = nullptr;
            const char* tail = nullptr;
            int rc = sqlite3_prepare_v2(db_, rest, -1, &st, &tail);
            const char* start = rest;
            rest = tail && tail > rest ? tail : rest + std::strlen(rest);
            if (rc != SQLITE_OK) {
                // A statement that fails to prepare leaves tail where parsing
                // stopped: go on after its terminating semicolon.
                const char* end = std::strchr(tail && tail > start ? tail : start, ';');
                rest = end ? end + 1 : start + std::strlen(start);
            }
            if (rc == SQLITE_OK && st) {
                if (ctx_.statements) ++*ctx_.statements;
                while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
                }
                sqlite3_finalize(st);
                if (rc == SQLITE_DONE) continue;
            } else if (!st && rc == SQLITE_OK) {
                continue;  // only comments or white space
            }
            const std::string msg = sqlite3_errmsg(db_);
            if (msg.find("duplicate column name") != std::string::npos) continue;
            if (msg.find("no such table") != std::string::npos) throw_schema_missing("the SQLite database", msg);
            throw db_error(dialect_name, std::to_string(sqlite3_extended_errcode(db_)), "sqlite migration: " + msg);
        }
    }

    fence_result fenced(std::string_view key, std::int64_t token,
                        const std::function<bool(ledger&)>& body) override {
        fence_result verdict;
        const bool committed = write_transaction([&] {
            {
                auto q = prepare("fence");
                q.bind(1, key);
                q.step();  // always one row
                verdict.reason = fence_reason(key, token, q.null(0) ? std::nullopt : std::optional(q.integer(0)),
                                              q.null(1) ? std::nullopt : std::optional(q.integer(1)),
                                              !q.null(2) && q.integer(2) != 0);
            }
            verdict.held = verdict.reason.empty();
            sqlite_ledger l(*this);
            return verdict.held && body(l);
        });
        if (committed) fault(fault_point::fenced_commit_done);
        return verdict;
    }

    job_row job_read(std::string_view job, std::string_view run_key) override {
        auto q = prepare("job_row");
        q.bind(1, job).bind(2, run_key);
        q.step();  // always one row
        return read_job_row(q);
    }

    std::vector<job_row> job_list(std::string_view job, bool exact, std::size_t limit) override {
        auto q = prepare("job_list");
        q.bind(1, job).bind(2, static_cast<std::int64_t>(limit)).bind(3, std::int64_t{exact});
        std::vector<job_row> out;
        while (q.step()) out.push_back(read_job_row(q));
        return out;
    }

    std::size_t sweep_jobs(std::int64_t retention_ms, std::size_t limit) override {
        return update("sweep_jobs", retention_ms, static_cast<std::int64_t>(limit));
    }

    std::int64_t now_ms() override {
        auto q = prepare("now");
        q.step();
        return q.integer(0);
    }

private:
    class sqlite_ledger final : public ledger {
    public:
        explicit sqlite_ledger(sqlite_session& s) : s_(s) {}
        std::optional<job_row> read(std::string_view job, std::string_view run_key) override {
            auto q = s_.prepare("job_lock");
            q.bind(1, job).bind(2, run_key);
            if (!q.step()) return std::nullopt;
            return read_job_row(q);
        }
        void write(const job_write& w) override {
            auto q = s_.prepare("job_write");
            q.bind(1, w.job).bind(2, w.run_key).bind(3, w.status).bind(4, w.owner).bind(5, w.holder);
            q.bind(6, w.token).bind(7, std::int64_t{w.attempts}).bind(8, std::int64_t{w.starting});
            q.bind(9, w.retry_in_ms).bind(10, w.result).bind(11, w.last_error);
            q.run();
        }

    private:
        sqlite_session& s_;
    };

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

    void exec(const std::string& sql) {
        if (ctx_.statements) ++*ctx_.statements;
        char* err = nullptr;
        int rc = sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &err);
        if (rc != SQLITE_OK) {
            std::string msg = err ? err : sqlite3_errstr(rc);
            sqlite3_free(err);
            if (msg.find("no such table") != std::string::npos) throw_schema_missing("the SQLite database", msg);
            if ((rc & 0xff) == SQLITE_CANTOPEN) throw connection_error("sqlite: " + msg);
            throw db_error(dialect_name, std::to_string(sqlite3_extended_errcode(db_)), "sqlite: " + msg);
        }
    }

    query prepare(const std::string& name) {
        auto it = cache_.find(name);
        if (it == cache_.end()) {
            const std::string& sql = sql_.get(name);
            sqlite3_stmt* st = nullptr;
            int rc = sqlite3_prepare_v3(db_, sql.c_str(), static_cast<int>(sql.size()), SQLITE_PREPARE_PERSISTENT,
                                        &st, nullptr);
            if (rc != SQLITE_OK) fail(db_, rc, "preparing " + name);
            it = cache_.emplace(name, st).first;
        }
        return query(db_, it->second, ctx_.statements, in_write_tx_ ? nullptr : writers_.get());
    }

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
};

class sqlite_dialect final : public dialect {
public:
    explicit sqlite_dialect(const dialect_context& ctx)
        : dialect(dialect_name, ctx.options.table_prefix),
          path_(parse_sqlite_path(ctx.url)),
          ctx_(ctx),
          writers_(write_queue_for(path_)) {}
    client_capabilities capabilities() const override {
        return {.row_locks = false, .wake_ups = true, .sql_fence = false, .relaxed_durability = true, .embedded = true};
    }
    std::unique_ptr<session> connect() override {
        return std::make_unique<sqlite_session>(path_, ctx_, sql(), writers_);
    }
    std::unique_ptr<notifier> listen(const std::string& channel) override {
        return std::make_unique<sqlite_doorbell>(channel);
    }
    std::string fence_sql() const override {
        throw config_error("SQLite has no stored functions: fence a write with sqlock::sqlite::fence (sqlock/sqlite.hpp)");
    }

    // sqlock::sqlite::fence: the application's transaction takes SQLite's
    // write lock, then reads the key's fence row and lease.
    void fence_native(void* native, std::string_view key, std::int64_t token) const override {
        auto* db = static_cast<sqlite3*>(native);
        if (!db) throw config_error("sqlock::sqlite::fence: the database handle is null");
        if (sqlite3_get_autocommit(db))
            throw config_error("sqlock::sqlite::fence needs an open transaction: run BEGIN IMMEDIATE first");
        // The statements compare expiries with <prefix>now_ms(), the clock every
        // sqlock connection uses; give the application's connection the same one.
        register_clock(db, sql());
        auto run = [&](const char* name, auto&& on_row) {
            const std::string& text = sql().get(name);
            sqlite3_stmt* raw = nullptr;
            int rc = sqlite3_prepare_v2(db, text.c_str(), static_cast<int>(text.size()), &raw, nullptr);
            std::unique_ptr<sqlite3_stmt, int (*)(sqlite3_stmt*)> st(raw, sqlite3_finalize);
            if (rc != SQLITE_OK) fail(db, rc, std::string("sqlock fence: preparing ") + name);
            sqlite3_bind_text(st.get(), 1, key.data(), static_cast<int>(key.size()), SQLITE_TRANSIENT);
            while ((rc = sqlite3_step(st.get())) == SQLITE_ROW) on_row(st.get());
            if (rc != SQLITE_DONE) fail(db, sqlite3_extended_errcode(db), std::string("sqlock fence: ") + name);
        };
        run("fence_lock", [](sqlite3_stmt*) {});
        std::string reason = "the fence read no row";
        run("fence", [&](sqlite3_stmt* st) {
            auto opt = [&](int col) {
                return sqlite3_column_type(st, col) == SQLITE_NULL ? std::nullopt
                                                                   : std::optional(sqlite3_column_int64(st, col));
            };
            reason = fence_reason(key, token, opt(0), opt(1), sqlite3_column_int64(st, 2) != 0);
        });
        if (!reason.empty()) throw lease_lost_error(reason);
    }

private:
    std::string path_;
    const dialect_context& ctx_;
    std::shared_ptr<write_queue> writers_;
};

}  // namespace

std::string parse_sqlite_path(std::string_view url) {
    std::string_view rest = url.substr(url.find(':') + 1);
    // sqlite:///abs/path and sqlite://rel/path are URL-shaped spellings of
    // sqlite:/abs/path and sqlite:rel/path.
    std::string_view path = rest.substr(0, 2) == "//" ? rest.substr(2) : rest;
    if (path.find('?') != std::string_view::npos)
        throw config_error("sqlite URL takes no parameters: use sqlite:path/to/file.db");
    if (path.empty()) throw config_error("sqlite URL names no file: use sqlite:path/to/file.db");
    if (path == ":memory:" || path.substr(0, 13) == "file::memory:")
        throw config_error("sqlite in-memory databases are private to one connection and cannot hold "
                           "shared locks: use a file, e.g. sqlite:/tmp/locks.db");
    return percent_decode(path);
}

std::unique_ptr<dialect> make_sqlite(const dialect_context& ctx) { return std::make_unique<sqlite_dialect>(ctx); }

}  // namespace sqlock::detail
