// PostgreSQL dialect on libpqxx 6.4. Lease grants are one statement (a
// data-modifying CTE); select_for_update holds a pqxx::work open on a
// dedicated connection.

#include "dialects/common/common.hpp"
#include "dialects/common/fault.hpp"
#include "dialects/common/sql_library.hpp"
#include "dialects/dialect.hpp"

#include <sqlock/errors.hpp>

#include <pqxx/pqxx>

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>

namespace sqlock::detail {
namespace {

constexpr const char* dialect_name = "postgres";
constexpr const char* lock_not_available = "55P03";  // lock_timeout, NOWAIT
constexpr const char* fence_sqlstate = "SQ001";      // raised by sqlock_assert_held

bool is_connection_state(const std::string& sqlstate) {
    // Class 08: connection exception; 57P01-57P03: the server is shutting
    // down or restarting (pg_terminate_backend gives 57P01).
    return sqlstate.rfind("08", 0) == 0 || sqlstate == "57P01" || sqlstate == "57P02" || sqlstate == "57P03";
}

std::string trim(std::string s) {
    while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
    return s;
}

// libpqxx 6.4 binds neither string_view nor bool-like wrappers: strings go as std::string.
inline std::string arg(std::string_view v) { return std::string(v); }
template <class T>
const T& arg(const T& v) {
    return v;
}

// A result row read by column index, NULL as "" or 0 (for read_job_row).
struct pg_row {
    const pqxx::row& r;
    std::string text(int i) const { return r[i].is_null() ? std::string() : r[i].as<std::string>(); }
    std::int64_t integer(int i) const { return r[i].is_null() ? 0 : r[i].as<std::int64_t>(); }
    bool null(int i) const { return r[i].is_null(); }
};

// Cancels statements that run past the client's own bound. statement_timeout
// does not cover a commit waiting for a synchronous standby (SyncRep): on a
// primary whose synchronous standby is gone, or a promoted standby that
// inherited synchronous_standby_names, that wait never ends, and the server's
// kernel keeps acknowledging, so no TCP bound fires either. A cancelled
// SyncRep wait leaves the commit done locally but not replicated; pg_session
// reports that as a connection_error (its outcome is not durable).
// One thread per dialect, started on first use, stopped by the destructor.
class canceller {
public:
    ~canceller() {
        {
            std::lock_guard lock(mu_);
            stop_ = true;
        }
        cv_.notify_all();
        if (thread_.joinable()) thread_.join();
    }

    // Cancels the statement running on `conn` if it is still running after `bound`.
    std::uint64_t arm(pqxx::connection& conn, std::chrono::milliseconds bound) {
        std::lock_guard lock(mu_);
        if (!thread_.joinable()) thread_ = std::thread([this] { main(); });
        const auto id = ++next_;
        const auto deadline = std::chrono::steady_clock::now() + bound;
        armed_[id] = {&conn, deadline};
        // Wake the thread only when it would sleep past this deadline (most
        // statements share one bound, so their deadlines come in order).
        if (deadline < wake_at_) cv_.notify_all();
        return id;
    }
    void disarm(std::uint64_t id) {
        std::lock_guard lock(mu_);  // a cancel under way finishes before the connection can go
        armed_.erase(id);
    }

private:
    struct entry {
        pqxx::connection* conn;
        std::chrono::steady_clock::time_point deadline;
    };

    void main() {
        std::unique_lock lock(mu_);
        while (!stop_) {
            auto next = std::chrono::steady_clock::time_point::max();
            const auto now = std::chrono::steady_clock::now();
            for (auto it = armed_.begin(); it != armed_.end();) {
                if (it->second.deadline <= now) {
                    try {
                        it->second.conn->cancel_query();  // PQcancel: safe from another thread
                    } catch (const std::exception&) {
                        // The connection is gone: its statement fails on its own.
                    }
                    it = armed_.erase(it);
                } else {
                    next = std::min(next, it->second.deadline);
                    ++it;
                }
            }
            wake_at_ = next;
            if (next == std::chrono::steady_clock::time_point::max()) cv_.wait(lock);
            else cv_.wait_until(lock, next);
        }
    }

    std::mutex mu_;
    std::condition_variable cv_;
    std::map<std::uint64_t, entry> armed_;
    std::uint64_t next_ = 0;
    std::chrono::steady_clock::time_point wake_at_ = std::chrono::steady_clock::time_point::min();
    bool stop_ = false;
    std::thread thread_;
};

// Notices of a commit whose wait for a synchronous standby was cancelled.
class unreplicated_notices final : public pqxx::errorhandler {
public:
    explicit unreplicated_notices(pqxx::connection& c) : pqxx::errorhandler(c) {}
    bool operator()(const char msg[]) noexcept override {
        if (std::string_view(msg).find("might not have been replicated") == std::string_view::npos) return true;
        seen = true;  // reported as an error instead (pg_session::check_replicated)
        return false;
    }
    bool seen = false;
};

// How the connections reach the server: directly or through a session pool
// (the default), or through a transaction-pooling proxy (PgBouncer's
// pool_mode = transaction), where a server session serves other clients
// between transactions: no session state, no named prepared statements,
// no LISTEN, no transaction held open across calls.
enum class pool_mode { session, transaction };

// Removes sqlock's own parameter sqlock_pool_mode from a libpq URL (libpq
// refuses parameters it does not know) and returns its value.
pool_mode take_pool_mode(std::string& url) {
    static constexpr std::string_view key = "sqlock_pool_mode=";
    const auto query = url.find('?');
    if (query == std::string::npos) return pool_mode::session;
    for (auto pos = query; pos != std::string::npos && pos < url.size(); pos = url.find('&', pos + 1)) {
        if (url.compare(pos + 1, key.size(), key) != 0) continue;
        const auto end = url.find('&', pos + 1);
        const std::string value =
            url.substr(pos + 1 + key.size(), (end == std::string::npos ? url.size() : end) - pos - 1 - key.size());
        // Drop "&key=value", or "key=value&" right after the '?'.
        if (url[pos] == '&') url.erase(pos, (end == std::string::npos ? url.size() : end) - pos);
        else url.erase(pos + 1, end == std::string::npos ? url.size() - pos - 1 : end - pos);
        if (url.back() == '?') url.pop_back();
        if (value == "session") return pool_mode::session;
        if (value == "transaction") return pool_mode::transaction;
        if (value == "statement")
            throw config_error("sqlock_pool_mode=statement is not supported: sqlock's grants and fenced writes are "
                               "transactions of several statements; point sqlock at a pool in transaction or "
                               "session mode and say which with sqlock_pool_mode=transaction or session");
        throw config_error("sqlock_pool_mode must be 'session' (a direct connection or a session pool) or "
                           "'transaction' (PgBouncer's pool_mode = transaction)");
    }
    return pool_mode::session;
}

struct pg_setup {
    const dialect_context& ctx;
    const sql_library& sql;
    std::string conninfo;
    unsigned user_timeout_ms;  // tcp_user_timeout from the conninfo
    pool_mode pooling = pool_mode::session;
    std::string local_setup;   // pool_mode::transaction: session_setup's settings as SET LOCAL
    canceller* cancels = nullptr;
};

class pg_session final : public session, public row_lock_ops {
public:
    explicit pg_session(const pg_setup& setup) : setup_(setup), ctx_(setup.ctx) {
        try {
            conn_.emplace(setup.conninfo);
            notices_.emplace(*conn_);
            // Through a transaction pool every transaction sets its own
            // settings (SET LOCAL): session settings would stay with the
            // server session, for other clients, and not follow this one.
            if (setup_.pooling == pool_mode::transaction) return;
            pqxx::nontransaction tx(*conn_);
            count();
            tx.exec_params(setup_.sql.get("session_setup"), std::to_string(ctx_.options.row_lock_timeout.count()),
                           std::to_string(ctx_.options.statement_timeout.count()),
                           ctx_.options.durability == durability::relaxed);
        } catch (const pqxx::broken_connection& e) {
            throw connection_error("cannot connect to PostgreSQL at " + ctx_.redacted_url + ": " +
                                   scrub(trim(e.what()), ctx_.secrets));
        } catch (const pqxx::sql_error& e) {
            translate(e, "setting up the session");
        }
    }

    grant_result grant(const grant_request& r) override {
        return granting([&] {
            return run("grant", r.key, r.owner, std::string_view(to_string(r.mode)), r.lease_ms, r.holder, r.note,
                       r.ticket, r.priority);
        });
    }

    bool release(std::string_view key, std::string_view owner, sqlock::mode m) override {
        // A row lock that outlasts lock_timeout belongs to a select_for_update
        // holder, which locks a row only when no lease is live on it: so the
        // lease is not ours any more.
        return guarded("release", [&] {
            try {
                return run(m == mode::unique_insert ? "release_delete" : "release_clear", key, owner)[0][0]
                           .as<std::int64_t>() == 1;
            } catch (const pqxx::sql_error& e) {
                if (e.sqlstate() == lock_not_available) return false;
                throw;
            }
        });
    }

    renew_result renew(std::string_view key, std::string_view owner, std::int64_t lease_ms, bool wait) override {
        return guarded("renew", [&] {
            try {
                return run(wait ? "renew" : "renew_nowait", key, owner, lease_ms).affected_rows() == 1
                           ? renew_result::renewed
                           : renew_result::not_held;
            } catch (const pqxx::sql_error& e) {
                if (e.sqlstate() == lock_not_available) return renew_result::row_locked;
                throw;
            }
        });
    }

    std::vector<bool> renew_batch(const std::vector<renewal>& batch) override {
        return guarded("renew_batch", [&] {
            std::set<std::string> renewed;
            for (const auto& row : run("renew_batch", renewals_json(batch))) renewed.insert(row[0].as<std::string>());
            return present_in(batch, renewed, [](const renewal& r) { return r.owner; });
        });
    }

    void bound_waits(std::chrono::milliseconds bound) override {
        // TCP_USER_TIMEOUT: how long sent data may stay unacknowledged (a
        // partition) before the kernel drops the connection; keepalive probes
        // (set at connect) turn a silent peer into unacknowledged data.
        // libpq has no read timeout of its own.
        const unsigned ms = static_cast<unsigned>(bound.count() > 0 ? bound.count() : setup_.user_timeout_ms);
        bound_ = bound;
        const int fd = conn_->sock();
        if (fd >= 0) ::setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &ms, sizeof ms);
    }

    std::size_t sweep(std::size_t limit) override { return affected("sweep", static_cast<std::int64_t>(limit)); }
    std::size_t sweep_waiters(std::size_t limit) override {
        return affected("sweep_waiters", static_cast<std::int64_t>(limit));
    }
    std::size_t sweep_jobs(std::int64_t retention_ms, std::size_t limit) override {
        return affected("sweep_jobs", retention_ms, static_cast<std::int64_t>(limit));
    }

    std::int64_t enqueue(const waiter_request& w) override {
        return guarded("enqueue", [&] {
            if (w.kind != 'X')
                return run("holder_enqueue", w.key, w.owner, w.fair, w.priority, w.lease_ms, w.listener, w.holder,
                           std::string(1, w.kind))[0][0]
                    .as<std::int64_t>();
            return run("enqueue", w.key, w.owner, w.fair, w.priority, w.lease_ms, w.listener, w.holder)[0][0]
                .as<std::int64_t>();
        });
    }

    void dequeue(std::int64_t ticket) override {
        guarded("dequeue", [&] { run("dequeue", ticket); });
    }

    std::vector<bool> beat_waiters(const std::vector<heartbeat>& batch) override {
        return guarded("beat_waiters", [&] {
            std::set<std::int64_t> live;
            for (const auto& row : run("beat_waiters", heartbeats_json(batch))) live.insert(row[0].as<std::int64_t>());
            return present_in(batch, live, [](const heartbeat& h) { return h.ticket; });
        });
    }

    grant_result grant_holder(const holder_request& r) override {
        return granting([&] {
            return r.kind == 'S' ? run("shared_grant", r.key, r.owner, r.lease_ms, r.holder, r.note, r.ticket,
                                       r.priority)
                                 : run("permit_grant", r.key, r.owner, r.permits, r.lease_ms, r.holder, r.note,
                                       r.ticket, r.priority);
        });
    }

    // A grant statement sent by `send`: its (token, remaining ms) row. A
    // lock_timeout means a select_for_update holder has the key's row:
    // contention, no grant.
    template <class F>
    grant_result granting(F&& send) {
        return guarded("grant", [&]() -> grant_result {
            pqxx::result res;
            try {
                res = send();
            } catch (const pqxx::sql_error& e) {
                if (e.sqlstate() == lock_not_available) return {};
                throw;
            }
            grant_result out;
            if (!res[0][0].is_null()) out.token = res[0][0].as<std::int64_t>();
            if (!res[0][1].is_null()) out.remaining_ms = res[0][1].as<std::int64_t>();
            return out;
        });
    }

    bool release_holder(char kind, std::string_view key, std::string_view owner) override {
        return guarded("release", [&] {
            return run(kind == 'S' ? "shared_release" : "permit_release", key, owner)[0][0].as<bool>();
        });
    }

    std::vector<bool> renew_holders(const std::vector<renewal>& batch) override {
        return guarded("renewing holders", [&] {
            std::set<std::string> renewed;
            for (const auto& row : run("holders_renew", renewals_json(batch))) renewed.insert(row[0].as<std::string>());
            return present_in(batch, renewed, [](const renewal& r) { return r.owner; });
        });
    }

    bool holder_live(char kind, std::string_view key, std::string_view owner) override {
        return guarded("renewing a holder", [&] {
            return run("holder_live", std::string(1, kind), key, owner)[0][0].as<std::int64_t>() > 0;
        });
    }

    void set_permits(std::string_view name, std::int64_t permits) override {
        guarded("setting permits", [&] { run("permit_limit", name, permits); });
    }

    std::vector<holder_row> holders(std::string_view prefix, std::size_t limit) override {
        return guarded("listing holders", [&] {
            std::vector<holder_row> out;
            for (const auto& row : run("holders_list", prefix, static_cast<std::int64_t>(limit))) {
                const pg_row r{row};
                out.push_back({r.text(0).c_str()[0], r.text(1), r.text(2), r.integer(3), r.integer(4), r.text(5),
                               r.text(6), r.integer(7)});
            }
            return out;
        });
    }

    std::size_t sweep_holders(std::size_t limit) override {
        return affected("holders_sweep", static_cast<std::int64_t>(limit));
    }

    row_lock_ops* row_locks() override { return this; }

    attempt lock_row(std::string_view key, std::int64_t lease_ms, std::int64_t ticket,
                     std::int64_t priority) override {
        return guarded("lock_row", [&]() -> attempt {
            if (pinned_for_ms_ != lease_ms) {
                run("pin_session", std::to_string(lease_ms));
                pinned_for_ms_ = lease_ms;
            }
            count();  // BEGIN
            held_.emplace(*conn_, "sqlock select_for_update");
            pqxx::result res;
            try {
                count();
                res = held_->exec_prepared(prepared("lock_row"), arg(key), ticket, priority);
            } catch (const pqxx::sql_error& e) {
                held_.reset();  // aborts
                if (e.sqlstate() == lock_not_available) return {state::busy, std::nullopt};
                throw;
            }
            // One row: present, locked (free and now ours), remaining.
            if (res[0][1].as<bool>()) return {state::locked, std::nullopt};
            held_.reset();
            if (!res[0][0].as<bool>()) return {state::missing, std::nullopt};
            return {state::busy, res[0][2].is_null() ? std::nullopt : std::optional(res[0][2].as<std::int64_t>())};
        });
    }

    void end_row_lock() override {
        guarded("end_row_lock", [&] {
            if (!held_) return;
            count();
            held_->abort();
            held_.reset();
        });
    }

    void wake_next(std::string_view key) override {
        guarded("wake_next", [&] { run("wake_next", key); });
    }

    void ensure_row(std::string_view key) override {
        guarded("ensure_row", [&] { run("ensure_row", key); });
    }

    std::optional<std::int64_t> bump_token(std::string_view key) override {
        return guarded("bump_token", [&]() -> std::optional<std::int64_t> {
            try {
                return run("bump_token", key)[0][0].as<std::int64_t>();
            } catch (const pqxx::sql_error& e) {
                // lock_timeout: an earlier holder's fenced transaction share-locks the fence row.
                if (e.sqlstate() == lock_not_available) return std::nullopt;
                throw;
            }
        });
    }

    std::int64_t fence_token(std::string_view key) override {
        return guarded("ping", [&] {
            if (!held_) return run("read_token", key)[0][0].as<std::int64_t>();
            count();
            return held_->exec_prepared1(prepared("read_token"), arg(key))[0].as<std::int64_t>();
        });
    }

    std::vector<std::string> held_keys(std::string_view prefix, std::string_view after, std::size_t limit) override {
        return guarded("listing held keys", [&] {
            std::vector<std::string> out;
            for (const auto& row : run("held_keys", prefix, after, static_cast<std::int64_t>(limit)))
                out.push_back(row[0].as<std::string>());
            return out;
        });
    }

    std::vector<waiter_info> waiters(std::string_view prefix, std::size_t limit) override {
        return guarded("listing waiters", [&] {
            std::vector<waiter_info> out;
            for (const auto& row : run("waiters", prefix, static_cast<std::int64_t>(limit))) {
                const pg_row r{row};
                out.push_back({.key = r.text(0),
                               .ticket = r.integer(1),
                               .owner = r.text(2),
                               .holder = r.text(3),
                               .fair = row[4].as<bool>(),
                               .priority = static_cast<int>(r.integer(5)),
                               .waited = std::chrono::milliseconds(r.integer(6)),
                               .expires_in = std::chrono::milliseconds(r.integer(7))});
            }
            return out;
        });
    }

    std::optional<std::int64_t> force_release(std::string_view key) override {
        return guarded("force_release", [&]() -> std::optional<std::int64_t> {
            auto res = run("force_release", key);
            if (res.empty()) return std::nullopt;
            return res[0][0].as<std::int64_t>();
        });
    }

    lock_info inspect(std::string_view key) override {
        return guarded("inspect", [&] {
            const auto row = run("inspect", key)[0];
            const pg_row r{row};
            lock_info info;
            info.key = std::string(key);
            info.token = r.integer(6);
            read_lease(r, 1, info);
            if (!info.held && row[7].as<bool>()) held_by_row_lock(info);
            return info;
        });
    }

    database_gauges gauges(std::size_t queue_limit) override {
        return guarded("reading gauges", [&] {
            auto g = read_gauges(pg_row{run("gauges")[0]});
            if (queue_limit > 0)
                for (const auto& row : run("gauge_queues", static_cast<std::int64_t>(queue_limit)))
                    g.queues.push_back(read_queue(pg_row{row}));
            return g;
        });
    }

    fence_result fenced(std::string_view key, std::int64_t token,
                        const std::function<bool(ledger&)>& body) override {
        return guarded("fenced transaction", [&]() -> fence_result {
            pqxx::work tx(*conn_, "sqlock fenced");
            local_settings(tx);
            try {
                count();
                call(tx, "fence", key, token);
            } catch (const pqxx::sql_error& e) {
                if (e.sqlstate() != fence_sqlstate) throw;
                return {false, fence_message(e)};
            }
            pg_ledger l(*this, tx);
            if (body(l)) {
                commit(tx, "a fenced transaction");
                fault(fault_point::fenced_commit_done);
            }
            return {true, ""};
        });
    }

    job_row job_read(std::string_view job, std::string_view run_key) override {
        return guarded("reading the job ledger",
                       [&] { return read_job_row(pg_row{run("job_row", job, run_key)[0]}); });
    }

    std::vector<job_row> job_list(std::string_view job, bool exact, std::size_t limit) override {
        return guarded("listing the job ledger", [&] {
            std::vector<job_row> out;
            for (const auto& row : run("job_list", job, static_cast<std::int64_t>(limit), exact))
                out.push_back(read_job_row(pg_row{row}));
            return out;
        });
    }

    std::int64_t now_ms() override {
        return guarded("reading the clock", [&] { return run("now")[0][0].as<std::int64_t>(); });
    }

    int schema_version() override {
        try {
            return guarded("schema_version", [&] {
                pqxx::nontransaction tx(*conn_);
                count();
                return tx.exec(setup_.sql.get("schema_version"))[0][0].as<int>();
            });
        } catch (const schema_error&) {
            return 0;
        }
    }

    void migrate() override {
        guarded("migrate", [&] {
            // DDL is transactional here: the whole upgrade commits or none of
            // it does, and the advisory lock queues concurrent migrators.
            pqxx::work tx(*conn_, "sqlock migrate");
            local_settings(tx);
            count();
            tx.exec(setup_.sql.get("migrate_lock"));
            count();
            int current = 0;
            if (tx.exec(setup_.sql.get("schema_exists"))[0][0].as<bool>()) {
                count();
                current = tx.exec(setup_.sql.get("schema_version"))[0][0].as<int>();
            }
            for (const auto& m : setup_.sql.migrations()) {
                if (m.version <= current) continue;
                count();
                tx.exec(m.text);
            }
            commit(tx, "the migration");
        });
    }

private:
    static std::string fence_message(const pqxx::sql_error& e) {
        std::string msg = trim(e.what());
        if (auto at = msg.find("sqlock: "); at != std::string::npos) msg.erase(0, at + 8);
        if (auto nl = msg.find('\n'); nl != std::string::npos) msg.erase(nl);
        return msg;
    }

    class pg_ledger final : public ledger {
    public:
        pg_ledger(pg_session& s, pqxx::work& tx) : s_(s), tx_(tx) {}
        std::optional<job_row> read(std::string_view job, std::string_view run_key) override {
            s_.count();
            auto res = s_.call(tx_, "job_lock", job, run_key);
            if (res.empty()) return std::nullopt;
            return read_job_row(pg_row{res[0]});
        }
        void write(const job_write& w) override {
            s_.count();
            s_.call(tx_, "job_write", w.job, w.run_key, w.status, w.owner, w.holder, w.token, w.attempts, w.starting,
                    w.retry_in_ms, w.result, w.last_error);
        }

    private:
        pg_session& s_;
        pqxx::work& tx_;
    };

    void count() {
        if (ctx_.statements) ++*ctx_.statements;
    }

    // Prepared once per connection, on first use.
    const std::string& prepared(const std::string& name) {
        if (prepared_.insert(name).second) conn_->prepare(name, setup_.sql.get(name));
        return name;
    }

    // The statement `name` in tx: prepared once per connection, or, through
    // a transaction pool, sent unnamed (PQexecParams), as named prepared
    // statements would stay with a server session other clients share.
    template <class... Args>
    pqxx::result call(pqxx::transaction_base& tx, const std::string& name, const Args&... args) {
        const auto armed = setup_.cancels->arm(*conn_, client_bound());
        struct disarm {
            canceller& c;
            std::uint64_t id;
            ~disarm() { c.disarm(id); }
        } guard{*setup_.cancels, armed};
        if (setup_.pooling == pool_mode::transaction) return tx.exec_params(setup_.sql.get(name), arg(args)...);
        return tx.exec_prepared(prepared(name), arg(args)...);
    }

    // The client's bound on one statement: the statement timeout plus time
    // for the answer, or what the watchdog asked for (bound_waits).
    std::chrono::milliseconds client_bound() const {
        return bound_.count() > 0 ? bound_ : ctx_.options.statement_timeout + std::chrono::seconds(1);
    }

    // A transaction's first statement, through a transaction pool: the
    // session settings, for this transaction only.
    void local_settings(pqxx::transaction_base& tx) {
        if (setup_.pooling != pool_mode::transaction) return;
        count();
        tx.exec(setup_.local_setup);
    }

    // After a commit: a commit whose wait for a synchronous standby was
    // cancelled is done locally but not replicated; a failover could lose
    // it, so it counts as failed (a grant's key then stays blocked until
    // its lease runs out, never granted twice).
    void check_replicated(const char* what) {
        if (!notices_ || !notices_->seen) return;
        notices_->seen = false;
        throw connection_error(std::string("PostgreSQL committed ") + what +
                               " locally, but the synchronous standby did not confirm it within the client's bound "
                               "(statement_timeout + 1 s): treat it as failed; check the standby and "
                               "synchronous_standby_names (see docs/high-availability.md)");
    }

    // Commits tx within the client's bound (see canceller).
    void commit(pqxx::transaction_base& tx, const char* what) {
        count();
        const auto armed = setup_.cancels->arm(*conn_, client_bound());
        try {
            tx.commit();
        } catch (...) {
            setup_.cancels->disarm(armed);
            throw;
        }
        setup_.cancels->disarm(armed);
        check_replicated(what);
    }

    // One statement in a transaction of its own: autocommit, or through a
    // transaction pool BEGIN, the settings, the statement, COMMIT.
    template <class... Args>
    pqxx::result run(const std::string& name, const Args&... args) {
        pqxx::result res;
        if (setup_.pooling == pool_mode::transaction) {
            pqxx::work tx(*conn_);
            local_settings(tx);
            count();
            res = call(tx, name, args...);
            commit(tx, name.c_str());
        } else {
            pqxx::nontransaction tx(*conn_);
            count();
            res = call(tx, name, args...);
        }
        check_replicated(name.c_str());
        return res;
    }

    // run(), guarded, giving the number of rows the statement changed.
    template <class... Args>
    std::size_t affected(const char* name, const Args&... args) {
        return guarded(name, [&] { return static_cast<std::size_t>(run(name, args...).affected_rows()); });
    }

    [[noreturn]] void translate(const pqxx::sql_error& e, const char* what) {
        const std::string code = e.sqlstate();
        const std::string msg = trim(e.what());
        if (code == "42P01") throw_schema_missing(ctx_.redacted_url, msg);
        if (is_connection_state(code))
            throw connection_error(std::string("PostgreSQL connection lost during ") + what + ": " + msg);
        throw db_error(dialect_name, code, std::string("PostgreSQL error during ") + what + ": " + msg);
    }

    template <class F>
    auto guarded(const char* what, F&& f) -> decltype(f()) {
        try {
            return f();
        } catch (const pqxx::broken_connection& e) {
            held_.reset();
            throw connection_error(std::string("PostgreSQL connection lost during ") + what + ": " + trim(e.what()));
        } catch (const pqxx::in_doubt_error& e) {
            throw connection_error(std::string("PostgreSQL connection lost during ") + what + ": " + trim(e.what()));
        } catch (const pqxx::sql_error& e) {
            translate(e, what);
        } catch (const pqxx::failure& e) {
            if (!conn_->is_open())
                throw connection_error(std::string("PostgreSQL connection lost during ") + what + ": " +
                                       trim(e.what()));
            throw db_error(dialect_name, "", std::string("PostgreSQL error during ") + what + ": " + trim(e.what()));
        }
    }

    const pg_setup& setup_;
    const dialect_context& ctx_;
    std::optional<pqxx::connection> conn_;
    std::optional<unreplicated_notices> notices_;  // destroyed before conn_
    std::chrono::milliseconds bound_{0};           // from bound_waits; 0: client_bound()'s default
    std::optional<pqxx::work> held_;  // select_for_update's open transaction
    std::set<std::string> prepared_;
    std::int64_t pinned_for_ms_ = 0;  // idle_in_transaction_session_timeout in force
};

// One connection that LISTENs on the client's channel. pqxx delivers a
// notification to the receiver from inside await_notification().
class pg_notifier final : public notifier {
public:
    pg_notifier(const std::string& conninfo, const std::string& channel, const dialect_context& ctx) {
        try {
            conn_.emplace(conninfo);
            receiver_.emplace(*conn_, channel, woken_);
        } catch (const pqxx::broken_connection& e) {
            throw connection_error("cannot connect the PostgreSQL listener at " + ctx.redacted_url + ": " +
                                   scrub(e.what(), ctx.secrets));
        } catch (const pqxx::failure& e) {
            throw connection_error(std::string("cannot LISTEN for wake-ups: ") + e.what());
        }
    }

    bool wait(std::chrono::milliseconds timeout) override {
        const auto start = std::chrono::steady_clock::now();
        woken_ = false;
        try {
            const auto us = timeout.count() * 1000;
            conn_->await_notification(static_cast<long>(us / 1'000'000), static_cast<long>(us % 1'000'000));
            if (woken_) return true;
            // On a dead socket await_notification returns at once while
            // is_open() still says true: an early return without a
            // notification gets a round trip to tell the two apart.
            if (std::chrono::steady_clock::now() - start < timeout / 2) pqxx::nontransaction(*conn_).exec("SELECT 1");
        } catch (const pqxx::failure& e) {
            throw connection_error(std::string("PostgreSQL listener connection lost: ") + e.what());
        }
        return woken_;
    }

private:
    class receiver final : public pqxx::notification_receiver {
    public:
        receiver(pqxx::connection& c, const std::string& channel, bool& woken)
            : pqxx::notification_receiver(c, channel), woken_(woken) {}
        void operator()(const std::string&, int) override { woken_ = true; }

    private:
        bool& woken_;
    };

    bool woken_ = false;
    std::optional<pqxx::connection> conn_;
    std::optional<receiver> receiver_;  // destroyed first: it UNLISTENs on conn_
};

class pg_dialect final : public dialect {
public:
    explicit pg_dialect(const dialect_context& ctx)
        : dialect(dialect_name, ctx.options.table_prefix), setup_{ctx, sql(), ctx.url, 0} {
        // Hand libpq the URL as given, adding bounds on connecting and on a
        // silent network unless the URL sets them itself: keepalive probes
        // from the first idle second, and a connection whose data (probes
        // included) stays unacknowledged for the statement timeout is
        // dropped. A frozen server still acknowledges (its kernel answers);
        // the deadline timer, not these bounds, keeps loss signals on time.
        auto& conninfo = setup_.conninfo;
        auto add = [&](const std::string& key, const std::string& value) {
            if (conninfo.find(key + "=") != std::string::npos) return;
            conninfo += (conninfo.find('?') == std::string::npos ? "?" : "&") + key + "=" + value;
        };
        auto seconds = ctx.options.connect_timeout.count() / 1000;
        add("connect_timeout", std::to_string(seconds < 1 ? 1 : seconds));
        setup_.user_timeout_ms = static_cast<unsigned>(ctx.options.statement_timeout.count());
        add("tcp_user_timeout", std::to_string(setup_.user_timeout_ms));
        add("keepalives", "1");
        add("keepalives_idle", "1");
        add("keepalives_interval", "1");
        add("keepalives_count", "3");
        add("application_name", "sqlock");
        setup_.cancels = &cancels_;
        setup_.pooling = take_pool_mode(conninfo);
        const auto ms = [](std::chrono::milliseconds d) { return "'" + std::to_string(d.count()) + "ms'"; };
        setup_.local_setup = "SELECT set_config('lock_timeout', " + ms(ctx.options.row_lock_timeout) +
                             ", true), set_config('statement_timeout', " + ms(ctx.options.statement_timeout) +
                             ", true)" +
                             (ctx.options.durability == durability::relaxed
                                  ? ", set_config('synchronous_commit', 'off', true)"
                                  : "");
    }
    client_capabilities capabilities() const override {
        // Through a transaction pool: no LISTEN (a notification would reach
        // whichever client holds the server session next; waiters poll) and
        // no select_for_update (its transaction stays open across calls).
        const bool pooled = setup_.pooling == pool_mode::transaction;
        return {.row_locks = !pooled, .wake_ups = !pooled, .sql_fence = true, .relaxed_durability = true,
                .embedded = false};
    }
    std::string no_row_locks_reason() const override {
        return "the PostgreSQL URL says sqlock_pool_mode=transaction, and a transaction pool (PgBouncer's "
               "pool_mode = transaction) cannot keep the row lock's transaction open on one server session; "
               "connect select_for_update clients to PostgreSQL directly or through a session pool";
    }
    std::unique_ptr<session> connect() override { return std::make_unique<pg_session>(setup_); }
    std::unique_ptr<notifier> listen(const std::string& channel) override {
        return std::make_unique<pg_notifier>(setup_.conninfo, channel, setup_.ctx);
    }
    std::string fence_sql() const override { return "SELECT " + sql().prefix() + "assert_held($1, $2)"; }

private:
    canceller cancels_;  // destroyed after every session: they outlive no client
    pg_setup setup_;
};

}  // namespace

std::unique_ptr<dialect> make_postgres(const dialect_context& ctx) { return std::make_unique<pg_dialect>(ctx); }

}  // namespace sqlock::detail
