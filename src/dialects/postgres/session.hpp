#pragma once
// The PostgreSQL session, for the dialect's own files only: its setup (direct
// or through a transaction pool), and the statement helpers (prepared or
// unnamed statements, the canceller's bound, replication checks, error
// translation) every operation goes through. The operations are defined by
// theme: postgres.cpp connects, migrates, commits, translates errors, listens
// for wake-ups and makes the dialect; leases.cpp has exclusive leases, the
// wait queue, sweeps and select_for_update's row locks; holders.cpp shared
// holders and semaphore permits; admin.cpp inspection, force_release, fenced
// transactions and the job ledger.

#include "dialects/common/common.hpp"
#include "dialects/common/sql_library.hpp"
#include "dialects/dialect.hpp"
#include "dialects/postgres/canceller.hpp"

#include <sqlock/errors.hpp>

#include <pqxx/pqxx>

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace sqlock::detail::postgres {

inline constexpr const char* dialect_name = "postgres";
inline constexpr const char* lock_not_available = "55P03";  // lock_timeout, NOWAIT
inline constexpr const char* unique_violation = "23505";
inline constexpr const char* fence_sqlstate = "SQ001";      // raised by sqlock_assert_held

inline std::string trim(std::string s) {
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
    explicit pg_session(const pg_setup& setup);

    // session's operations and row_lock_ops's, defined by theme in this folder's files.
#include "dialects/session_operations.inc"
#include "dialects/row_lock_operations.inc"

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
                // A reader's or permit's row of this very owner (ids are never
                // reused): a repeat of a grant whose first answer was lost.
                // Refused; the caller releases what the first run left.
                if (e.sqlstate() == unique_violation) return {};
                throw;
            }
            grant_result out;
            if (!res[0][0].is_null()) out.token = res[0][0].as<std::int64_t>();
            if (!res[0][1].is_null()) out.remaining_ms = res[0][1].as<std::int64_t>();
            return out;
        });
    }

private:
    static std::string fence_message(const pqxx::sql_error& e);

    class pg_ledger;

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
        cancelled_ = false;
        const auto armed = setup_.cancels->arm(*conn_, client_bound());
        struct disarm {
            canceller& c;
            std::uint64_t id;
            bool& cancelled;
            ~disarm() { cancelled = c.disarm(id); }
        } guard{*setup_.cancels, armed, cancelled_};
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

    void check_replicated(const char* what);
    void commit(pqxx::transaction_base& tx, const char* what);

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

    [[noreturn]] void translate(const pqxx::sql_error& e, const char* what);

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
    // The last statement or commit outlived the client's bound and was sent
    // a cancel: if it succeeded all the same, it was a commit's wait for the
    // synchronous standby that was cut short (check_replicated).
    bool cancelled_ = false;
    std::chrono::milliseconds bound_{0};           // from bound_waits; 0: client_bound()'s default
    std::optional<pqxx::work> held_;  // select_for_update's open transaction
    std::set<std::string> prepared_;
    std::int64_t pinned_for_ms_ = 0;  // idle_in_transaction_session_timeout in force
};

}  // namespace sqlock::detail::postgres
