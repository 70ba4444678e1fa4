// PostgreSQL dialect on libpqxx 6.4. Lease grants are one statement (a
// data-modifying CTE); select_for_update holds a pqxx::work open on a
// dedicated connection.
//
// This file connects a session, migrates, commits within the client's bound,
// translates driver errors, runs the LISTEN connection and makes the dialect
// (its URL's bounds and pool mode); the session's other operations are in
// leases.cpp, holders.cpp and admin.cpp (see session.hpp).

#include "dialects/postgres/session.hpp"

#include <sys/socket.h>

#include <chrono>
#include <memory>
#include <optional>
#include <string>

namespace sqlock::detail::postgres {

namespace {

bool is_connection_state(const std::string& sqlstate) {
    // Class 08: connection exception; 57P01-57P03: the server is shutting
    // down or restarting (pg_terminate_backend gives 57P01).
    return sqlstate.rfind("08", 0) == 0 || sqlstate == "57P01" || sqlstate == "57P02" || sqlstate == "57P03";
}

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

}  // namespace

pg_session::pg_session(const pg_setup& setup) : setup_(setup), ctx_(setup.ctx) {
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

std::int64_t pg_session::now_ms() {
    return guarded("reading the clock", [&] { return run("now")[0][0].as<std::int64_t>(); });
}

int pg_session::schema_version() {
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

void pg_session::migrate() {
    guarded("migrate", [&] {
        // DDL is transactional here: the whole upgrade commits or none of
        // it does, and the advisory lock queues concurrent migrators.
        pqxx::work tx(*conn_, "sqlock migrate");
        local_settings(tx);
        count();
        tx.exec(setup_.sql.get("migrate_wait"));
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

// After a commit: a commit whose wait for a synchronous standby was
// cancelled is done locally but not replicated; a failover could lose
// it, so it counts as failed (a grant's key then stays blocked until
// its lease runs out, never granted twice).
//
// Told two ways: the server's WARNING, whose text is matched in English
// only (lc_messages translates it, and a client cannot set it), and the
// canceller having cancelled a statement that then succeeded: a statement
// cut short otherwise fails (57014), so a success after a cancel is a
// commit whose wait for the standby was cut, in any language.
void pg_session::check_replicated(const char* what) {
    const bool cut = cancelled_ || (notices_ && notices_->seen);
    cancelled_ = false;
    if (notices_) notices_->seen = false;
    if (!cut) return;
    throw connection_error(std::string("PostgreSQL committed ") + what +
                           " locally, but the synchronous standby did not confirm it within the client's bound "
                           "(statement_timeout + 1 s): treat it as failed; check the standby and "
                           "synchronous_standby_names (see docs/high-availability.md)");
}

// Commits tx within the client's bound (see canceller).
void pg_session::commit(pqxx::transaction_base& tx, const char* what) {
    count();
    cancelled_ = false;
    const auto armed = setup_.cancels->arm(*conn_, client_bound());
    try {
        tx.commit();
    } catch (...) {
        setup_.cancels->disarm(armed);
        throw;
    }
    cancelled_ = setup_.cancels->disarm(armed);
    check_replicated(what);
}

[[noreturn]] void pg_session::translate(const pqxx::sql_error& e, const char* what) {
    const std::string code = e.sqlstate();
    const std::string msg = trim(e.what());
    if (code == "42P01") throw_schema_missing(ctx_.redacted_url, msg);
    // A write refused by a read-only server: a standby, or a primary demoted
    // with default_transaction_read_only. As a db_error the connection went
    // back to the pool and was used again for ever, so a client whose URL
    // names several hosts (target_session_attrs=read-write) never moved to
    // the new primary; as a connection_error it is dropped, and the pool's
    // one repeat on a fresh connection is safe (nothing was written).
    if (code == "25006")
        throw connection_error(std::string("PostgreSQL server is read-only during ") + what +
                               " (a standby, or a primary made read-only; with several hosts in the URL, "
                               "target_session_attrs=read-write finds the primary): " + msg);
    if (is_connection_state(code))
        throw connection_error(std::string("PostgreSQL connection lost during ") + what + ": " + msg);
    throw db_error(dialect_name, code, std::string("PostgreSQL error during ") + what + ": " + msg);
}

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
    // The receiver's destructor sends UNLISTEN and waits for the answer
    // (libpqxx 6.4), with no bound: a server frozen while its kernel answers
    // (SIGSTOP, a paused container) never gives one, and the client's
    // destructor, which joins the listener's thread, hung as long. The
    // socket is shut first, so that the UNLISTEN fails at once; the server
    // drops the LISTEN with the backend anyway.
    ~pg_notifier() override {
        if (!conn_) return;
        if (const int socket = conn_->sock(); socket >= 0) ::shutdown(socket, SHUT_RDWR);
    }

    heard wait(std::chrono::milliseconds timeout) override {
        const auto start = std::chrono::steady_clock::now();
        woken_ = false;
        try {
            const auto us = timeout.count() * 1000;
            conn_->await_notification(static_cast<long>(us / 1'000'000), static_cast<long>(us % 1'000'000));
            if (woken_) return heard::ring;
            // On a dead socket await_notification returns at once while
            // is_open() still says true: an early return without a
            // notification gets a round trip to tell the two apart.
            if (std::chrono::steady_clock::now() - start < timeout / 2) pqxx::nontransaction(*conn_).exec("SELECT 1");
        } catch (const pqxx::failure& e) {
            throw connection_error(std::string("PostgreSQL listener connection lost: ") + e.what());
        }
        return woken_ ? heard::ring : heard::nothing;
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
        : dialect(dialect_name, ctx.options.table_prefix, ctx.redacted_url), setup_{ctx, sql(), ctx.url, 0} {
        // Hand libpq the URL as given, adding bounds on connecting and on a
        // silent network unless the URL sets them itself: keepalive probes
        // from the first idle second, and a connection whose data (probes
        // included) stays unacknowledged for the statement timeout is
        // dropped. A frozen server still acknowledges (its kernel answers);
        // the deadline timer, not these bounds, keeps loss signals on time.
        auto& conninfo = setup_.conninfo;
        auto add = [&](const std::string& key, const std::string& value) {
            if (conninfo.find(key + "=") != std::string::npos) return;
            // After a '?' or '&' that ends the URL (postgresql://h/db?),
            // another separator would make an empty parameter, which libpq
            // refuses ("missing key/value separator").
            const char* separator = conninfo.find('?') == std::string::npos      ? "?"
                                    : conninfo.ends_with('?') || conninfo.ends_with('&') ? ""
                                                                                        : "&";
            conninfo += separator + key + "=" + value;
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

}  // namespace sqlock::detail::postgres

namespace sqlock::detail {

std::unique_ptr<dialect> make_postgres(const dialect_context& ctx) {
    return std::make_unique<postgres::pg_dialect>(ctx);
}

}  // namespace sqlock::detail
