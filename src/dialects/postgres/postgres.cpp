// PostgreSQL dialect on libpqxx 6.4. Lease grants are one statement (a
// data-modifying CTE); select_for_update holds a pqxx::work open on a
// dedicated connection.

#include "core/fault.hpp"
#include "core/sql_library.hpp"
#include "core/url.hpp"
#include "dialects/dialect.hpp"

#include <sqlock/errors.hpp>

#include <pqxx/pqxx>

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <chrono>

#include <optional>
#include <set>
#include <string>

namespace sqlock::detail {
namespace {

constexpr const char* dialect_name = "postgres";

bool is_connection_state(const std::string& sqlstate) {
    // Class 08: connection exception; 57P01-57P03: the server is shutting
    // down or restarting (pg_terminate_backend gives 57P01).
    return sqlstate.rfind("08", 0) == 0 || sqlstate == "57P01" || sqlstate == "57P02" || sqlstate == "57P03";
}

class pg_session final : public session {
public:
    pg_session(const std::string& conninfo, const dialect_context& ctx, unsigned default_user_timeout_ms)
        : ctx_(ctx), default_user_timeout_ms_(default_user_timeout_ms) {
        try {
            conn_.emplace(conninfo);
            pqxx::nontransaction tx(*conn_);
            count();
            tx.exec_params(ctx_.sql->get("session_setup"), std::to_string(ctx_.options.row_lock_timeout.count()),
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
        return guarded("grant", [&]() -> grant_result {
            pqxx::nontransaction tx(*conn_);
            pqxx::result res;
            try {
                count();
                res = tx.exec_prepared(prepared("grant"), std::string(r.key), std::string(r.owner),
                                       std::string(to_string(r.mode)), r.lease_ms, std::string(r.holder),
                                       std::string(r.note), r.ticket, r.priority);
            } catch (const pqxx::sql_error& e) {
                // lock_timeout: a select_for_update holder has the row.
                if (e.sqlstate() == "55P03") return {};
                throw;
            }
            grant_result out;
            if (!res[0][0].is_null()) out.token = res[0][0].as<std::int64_t>();
            if (!res[0][1].is_null()) out.remaining_ms = res[0][1].as<std::int64_t>();
            return out;
        });
    }

    bool release(std::string_view key, std::string_view owner, sqlock::mode m) override {
        // A row lock that outlasts lock_timeout belongs to a select_for_update
        // holder, which locks a row only when no lease is live on it: so the
        // lease is not ours any more.
        return guarded("release", [&] {
            pqxx::nontransaction tx(*conn_);
            count();
            try {
                auto res = tx.exec_prepared(prepared(m == mode::unique_insert ? "release_delete" : "release_clear"),
                                            std::string(key), std::string(owner));
                return res[0][0].as<std::int64_t>() == 1;
            } catch (const pqxx::sql_error& e) {
                if (e.sqlstate() == "55P03") return false;
                throw;
            }
        });
    }

    std::int64_t enqueue(const waiter_request& w) override {
        return guarded("enqueue", [&] {
            pqxx::nontransaction tx(*conn_);
            count();
            return tx
                .exec_prepared1(prepared("enqueue"), std::string(w.key), std::string(w.owner), w.fair, w.priority,
                                w.lease_ms, std::string(w.listener), std::string(w.holder))[0]
                .as<std::int64_t>();
        });
    }

    void dequeue(std::int64_t ticket) override {
        guarded("dequeue", [&] {
            pqxx::nontransaction tx(*conn_);
            count();
            tx.exec_prepared(prepared("dequeue"), ticket);
        });
    }

    std::vector<bool> beat_waiters(const std::vector<heartbeat>& batch) override {
        return guarded("beat_waiters", [&] {
            pqxx::nontransaction tx(*conn_);
            count();
            auto res = tx.exec_prepared(prepared("beat_waiters"), heartbeats_json(batch));
            std::set<std::int64_t> live;
            for (const auto& row : res) live.insert(row[0].as<std::int64_t>());
            std::vector<bool> out;
            out.reserve(batch.size());
            for (const auto& h : batch) out.push_back(live.count(h.ticket) > 0);
            return out;
        });
    }

    std::size_t sweep_waiters(std::size_t limit) override {
        return guarded("sweep_waiters", [&] {
            pqxx::nontransaction tx(*conn_);
            count();
            return tx.exec_prepared(prepared("sweep_waiters"), static_cast<std::int64_t>(limit)).affected_rows();
        });
    }

    renew_result renew(std::string_view key, std::string_view owner, std::int64_t lease_ms, bool wait) override {
        return guarded("renew", [&] {
            pqxx::nontransaction tx(*conn_);
            count();
            try {
                return tx.exec_prepared(prepared(wait ? "renew" : "renew_nowait"), std::string(key), std::string(owner),
                                        lease_ms)
                               .affected_rows() == 1
                           ? renew_result::renewed
                           : renew_result::not_held;
            } catch (const pqxx::sql_error& e) {
                if (e.sqlstate() == "55P03") return renew_result::row_locked;
                throw;
            }
        });
    }

    void bound_waits(std::chrono::milliseconds bound) override {
        // TCP_USER_TIMEOUT: how long sent data may stay unacknowledged (a
        // partition) before the kernel drops the connection; keepalive probes
        // (set at connect) turn a silent peer into unacknowledged data.
        // libpq has no read timeout of its own.
        const unsigned ms = static_cast<unsigned>(bound.count() > 0 ? bound.count() : default_user_timeout_ms_);
        const int fd = conn_->sock();
        if (fd >= 0) ::setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &ms, sizeof ms);
    }

    std::vector<bool> renew_batch(const std::vector<renewal>& batch) override {
        return guarded("renew_batch", [&] {
            pqxx::nontransaction tx(*conn_);
            count();
            auto res = tx.exec_prepared(prepared("renew_batch"), renewals_json(batch));
            std::set<std::string> renewed;
            for (const auto& row : res) renewed.insert(row[0].as<std::string>());
            std::vector<bool> out;
            out.reserve(batch.size());
            for (const auto& r : batch) out.push_back(renewed.count(std::string(r.owner)) > 0);
            return out;
        });
    }

    std::size_t sweep(std::size_t limit) override {
        return guarded("sweep", [&] {
            pqxx::nontransaction tx(*conn_);
            count();
            return tx.exec_prepared(prepared("sweep"), static_cast<std::int64_t>(limit)).affected_rows();
        });
    }

    row_lock lock_row(std::string_view key, std::int64_t lease_ms, std::int64_t ticket, std::int64_t priority,
                      std::optional<std::int64_t>* remaining_ms) override {
        return guarded("lock_row", [&] {
            if (pinned_for_ms_ != lease_ms) {
                pqxx::nontransaction tx(*conn_);
                count();
                tx.exec_prepared(prepared("pin_session"), std::to_string(lease_ms));
                pinned_for_ms_ = lease_ms;
            }
            count();  // BEGIN
            held_.emplace(*conn_, "sqlock select_for_update");
            pqxx::result res;
            try {
                count();
                res = held_->exec_prepared(prepared("lock_row"), std::string(key), ticket, priority);
            } catch (const pqxx::sql_error& e) {
                held_.reset();  // aborts
                if (e.sqlstate() == "55P03") return row_lock::busy;
                throw;
            }
            if (!res[0][0].as<bool>()) {
                held_.reset();
                return row_lock::missing;
            }
            if (!res[0][1].as<bool>()) {
                if (remaining_ms && !res[0][2].is_null()) *remaining_ms = res[0][2].as<std::int64_t>();
                held_.reset();
                return row_lock::busy;
            }
            return row_lock::locked;
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

    void ensure_row(std::string_view key) override {
        guarded("ensure_row", [&] {
            pqxx::nontransaction tx(*conn_);
            count();
            tx.exec_prepared(prepared("ensure_row"), std::string(key));
        });
    }

    std::optional<std::int64_t> bump_token(std::string_view key) override {
        return guarded("bump_token", [&]() -> std::optional<std::int64_t> {
            pqxx::nontransaction tx(*conn_);
            count();
            try {
                return tx.exec_prepared1(prepared("bump_token"), std::string(key))[0].as<std::int64_t>();
            } catch (const pqxx::sql_error& e) {
                // lock_timeout: an earlier holder's fenced transaction share-locks the fence row.
                if (e.sqlstate() == "55P03") return std::nullopt;
                throw;
            }
        });
    }

    std::int64_t fence_token(std::string_view key) override {
        return guarded("ping", [&] {
            count();
            if (held_) return held_->exec_prepared1(prepared("read_token"), std::string(key))[0].as<std::int64_t>();
            pqxx::nontransaction tx(*conn_);
            return tx.exec_prepared1(prepared("read_token"), std::string(key))[0].as<std::int64_t>();
        });
    }

    std::vector<std::string> held_keys(std::string_view prefix, std::string_view after, std::size_t limit) override {
        return guarded("listing held keys", [&] {
            pqxx::nontransaction tx(*conn_);
            count();
            std::vector<std::string> out;
            for (const auto& row :
                 tx.exec_prepared(prepared("held_keys"), std::string(prefix), std::string(after),
                                  static_cast<std::int64_t>(limit)))
                out.push_back(row[0].as<std::string>());
            return out;
        });
    }

    std::vector<waiter_info> waiters(std::string_view prefix, std::size_t limit) override {
        return guarded("listing waiters", [&] {
            pqxx::nontransaction tx(*conn_);
            count();
            std::vector<waiter_info> out;
            for (const auto& row :
                 tx.exec_prepared(prepared("waiters"), std::string(prefix), static_cast<std::int64_t>(limit)))
                out.push_back({.key = row[0].as<std::string>(),
                               .ticket = row[1].as<std::int64_t>(),
                               .owner = row[2].as<std::string>(),
                               .holder = row[3].is_null() ? "" : row[3].as<std::string>(),
                               .fair = row[4].as<bool>(),
                               .priority = row[5].as<int>(),
                               .waited = std::chrono::milliseconds(row[6].as<std::int64_t>()),
                               .expires_in = std::chrono::milliseconds(row[7].as<std::int64_t>())});
            return out;
        });
    }

    std::optional<std::int64_t> force_release(std::string_view key) override {
        return guarded("force_release", [&]() -> std::optional<std::int64_t> {
            pqxx::nontransaction tx(*conn_);
            count();
            auto res = tx.exec_prepared(prepared("force_release"), std::string(key));
            if (res.empty()) return std::nullopt;
            return res[0][0].as<std::int64_t>();
        });
    }

    lock_info inspect(std::string_view key) override {
        return guarded("inspect", [&] {
            pqxx::nontransaction tx(*conn_);
            count();
            auto row = tx.exec_prepared1(prepared("inspect"), std::string(key));
            lock_info info;
            info.key = std::string(key);
            info.token = row[6].as<std::int64_t>();
            if (!row[5].is_null()) {
                info.held = true;
                info.owner = row[1].as<std::string>();
                info.mode = row[2].is_null() ? "" : row[2].as<std::string>();
                info.holder = row[3].is_null() ? "" : row[3].as<std::string>();
                info.note = row[4].is_null() ? "" : row[4].as<std::string>();
                info.expires_in = std::chrono::milliseconds(row[5].as<std::int64_t>());
            } else if (row[7].as<bool>()) {
                info.held = true;
                info.mode = to_string(mode::select_for_update);
            }
            return info;
        });
    }

    int schema_version() override {
        try {
            return guarded("schema_version", [&] {
                pqxx::nontransaction tx(*conn_);
                count();
                return tx.exec(ctx_.sql->get("schema_version"))[0][0].as<int>();
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
            count();
            tx.exec(ctx_.sql->get("migrate_lock"));
            count();
            int current = 0;
            if (tx.exec(ctx_.sql->get("schema_exists"))[0][0].as<bool>()) {
                count();
                current = tx.exec(ctx_.sql->get("schema_version"))[0][0].as<int>();
            }
            for (const auto& m : ctx_.sql->migrations()) {
                if (m.version <= current) continue;
                count();
                tx.exec(m.text);
            }
            count();
            tx.commit();
        });
    }

    fence_result fenced(std::string_view key, std::int64_t token,
                        const std::function<bool(ledger&)>& body) override {
        return guarded("fenced transaction", [&]() -> fence_result {
            pqxx::work tx(*conn_, "sqlock fenced");
            try {
                count();
                tx.exec_prepared(prepared("fence"), std::string(key), token);
            } catch (const pqxx::sql_error& e) {
                if (e.sqlstate() != fence_sqlstate) throw;
                return {false, fence_message(e)};
            }
            pg_ledger l(*this, tx);
            if (body(l)) {
                count();
                tx.commit();
                fault(fault_point::fenced_commit_done);
            }
            return {true, ""};
        });
    }

    job_row job_read(std::string_view job, std::string_view run_key) override {
        return guarded("reading the job ledger", [&] {
            pqxx::nontransaction tx(*conn_);
            count();
            return to_job_row(tx.exec_prepared(prepared("job_row"), std::string(job), std::string(run_key))[0]);
        });
    }

    std::vector<job_row> job_list(std::string_view job, bool exact, std::size_t limit) override {
        return guarded("listing the job ledger", [&] {
            pqxx::nontransaction tx(*conn_);
            count();
            std::vector<job_row> out;
            for (const auto& row : tx.exec_prepared(prepared("job_list"), std::string(job),
                                                    static_cast<std::int64_t>(limit), exact))
                out.push_back(to_job_row(row));
            return out;
        });
    }

    std::size_t sweep_jobs(std::int64_t retention_ms, std::size_t limit) override {
        return guarded("sweep_jobs", [&] {
            pqxx::nontransaction tx(*conn_);
            count();
            return static_cast<std::size_t>(
                tx.exec_prepared(prepared("sweep_jobs"), retention_ms, static_cast<std::int64_t>(limit))
                    .affected_rows());
        });
    }

    std::int64_t now_ms() override {
        return guarded("reading the clock", [&] {
            pqxx::nontransaction tx(*conn_);
            count();
            return tx.exec_prepared(prepared("now"))[0][0].as<std::int64_t>();
        });
    }

private:
    // SQLSTATE raised by sqlock_assert_held.
    static constexpr const char* fence_sqlstate = "SQ001";

    static std::string fence_message(const pqxx::sql_error& e) {
        std::string msg = trim(e.what());
        if (auto at = msg.find("sqlock: "); at != std::string::npos) msg.erase(0, at + 8);
        if (auto nl = msg.find('\n'); nl != std::string::npos) msg.erase(nl);
        return msg;
    }

    static std::string text_or_empty(const pqxx::field& f) { return f.is_null() ? std::string() : f.as<std::string>(); }
    static std::int64_t int_or_zero(const pqxx::field& f) { return f.is_null() ? 0 : f.as<std::int64_t>(); }

    static job_row to_job_row(const pqxx::row& r) {
        job_row out;
        out.status = text_or_empty(r[0]);
        out.owner = text_or_empty(r[1]);
        out.holder = text_or_empty(r[2]);
        out.token = int_or_zero(r[3]);
        out.attempts = static_cast<int>(int_or_zero(r[4]));
        out.started_ms = int_or_zero(r[5]);
        out.finished_ms = int_or_zero(r[6]);
        out.retry_ms = int_or_zero(r[7]);
        out.result = text_or_empty(r[8]);
        out.last_error = text_or_empty(r[9]);
        out.now_ms = int_or_zero(r[10]);
        out.job = text_or_empty(r[11]);
        out.run_key = text_or_empty(r[12]);
        return out;
    }

    class pg_ledger final : public ledger {
    public:
        pg_ledger(pg_session& s, pqxx::work& tx) : s_(s), tx_(tx) {}
        std::optional<job_row> read(std::string_view job, std::string_view run_key) override {
            s_.count();
            auto res = tx_.exec_prepared(s_.prepared("job_lock"), std::string(job), std::string(run_key));
            if (res.empty()) return std::nullopt;
            return to_job_row(res[0]);
        }
        void write(const job_write& w) override {
            s_.count();
            tx_.exec_prepared(s_.prepared("job_write"), std::string(w.job), std::string(w.run_key),
                              std::string(w.status), std::string(w.owner), std::string(w.holder), w.token,
                              w.attempts, w.starting, w.retry_in_ms, std::string(w.result),
                              std::string(w.last_error));
        }

    private:
        pg_session& s_;
        pqxx::work& tx_;
    };

    void count() {
        if (ctx_.statements) ++*ctx_.statements;
    }

    static std::string trim(std::string s) {
        while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
        return s;
    }

    // Prepared once per connection, on first use.
    const std::string& prepared(const std::string& name) {
        if (prepared_.insert(name).second) conn_->prepare(name, ctx_.sql->get(name));
        return name;
    }

    [[noreturn]] void translate(const pqxx::sql_error& e, const char* what) {
        const std::string state = e.sqlstate();
        const std::string msg = trim(e.what());
        if (state == "42P01")
            throw schema_error("sqlock tables are missing in " + ctx_.redacted_url + " (" + msg +
                               "): run client.migrate() or apply the files in migrations/");
        if (is_connection_state(state))
            throw connection_error(std::string("PostgreSQL connection lost during ") + what + ": " + msg);
        throw db_error(dialect_name, state, std::string("PostgreSQL error during ") + what + ": " + msg);
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

    const dialect_context& ctx_;
    std::optional<pqxx::connection> conn_;
    std::optional<pqxx::work> held_;  // select_for_update's open transaction
    std::set<std::string> prepared_;
    std::int64_t pinned_for_ms_ = 0;  // idle_in_transaction_session_timeout in force
    unsigned default_user_timeout_ms_;  // tcp_user_timeout from the conninfo
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
    pg_dialect(const url_parts& url, const dialect_context& ctx) : ctx_(ctx) {
        // Hand libpq the URL as given, adding bounds on connecting and on a
        // silent network unless the URL sets them itself: keepalive probes
        // from the first idle second, and a connection whose data (probes
        // included) stays unacknowledged for the statement timeout is
        // dropped. A frozen server still acknowledges (its kernel answers);
        // the deadline timer, not these bounds, keeps loss signals on time.
        conninfo_ = url.raw;
        auto add = [&](const std::string& key, const std::string& value) {
            if (conninfo_.find(key + "=") != std::string::npos) return;
            conninfo_ += (conninfo_.find('?') == std::string::npos ? "?" : "&") + key + "=" + value;
        };
        auto seconds = ctx.options.connect_timeout.count() / 1000;
        add("connect_timeout", std::to_string(seconds < 1 ? 1 : seconds));
        user_timeout_ms_ = static_cast<unsigned>(ctx.options.statement_timeout.count());
        add("tcp_user_timeout", std::to_string(user_timeout_ms_));
        add("keepalives", "1");
        add("keepalives_idle", "1");
        add("keepalives_interval", "1");
        add("keepalives_count", "3");
        add("application_name", "sqlock");
    }
    std::string_view name() const override { return dialect_name; }
    bool supports_row_locks() const override { return true; }
    bool supports_notify() const override { return true; }
    std::unique_ptr<session> connect() override {
        return std::make_unique<pg_session>(conninfo_, ctx_, user_timeout_ms_);
    }
    std::unique_ptr<notifier> listen(const std::string& channel) override {
        return std::make_unique<pg_notifier>(conninfo_, channel, ctx_);
    }

private:
    std::string conninfo_;
    unsigned user_timeout_ms_ = 0;
    const dialect_context& ctx_;
};

}  // namespace

std::unique_ptr<dialect> make_postgres(const url_parts& url, const dialect_context& ctx) {
    return std::make_unique<pg_dialect>(url, ctx);
}

}  // namespace sqlock::detail
