// PostgreSQL: what operators and the job runner read and repair: held keys,
// waiters, inspect, gauges and force_release; fenced transactions and the job
// ledger written inside them. The session is in session.hpp.

#include "dialects/common/fault.hpp"
#include "dialects/postgres/session.hpp"

#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace sqlock::detail::postgres {

std::string pg_session::fence_message(const pqxx::sql_error& e) {
    std::string msg = trim(e.what());
    if (auto at = msg.find("sqlock: "); at != std::string::npos) msg.erase(0, at + 8);
    if (auto nl = msg.find('\n'); nl != std::string::npos) msg.erase(nl);
    return msg;
}

class pg_session::pg_ledger final : public ledger {
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

std::vector<std::string> pg_session::held_keys(std::string_view prefix, std::string_view after, std::size_t limit) {
    return guarded("listing held keys", [&] {
        std::vector<std::string> out;
        for (const auto& row : run("held_keys", prefix, after, static_cast<std::int64_t>(limit)))
            out.push_back(row[0].as<std::string>());
        return out;
    });
}

std::vector<waiter_info> pg_session::waiters(std::string_view prefix, std::size_t limit) {
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

std::optional<std::int64_t> pg_session::force_release(std::string_view key) {
    return guarded("force_release", [&]() -> std::optional<std::int64_t> {
        pqxx::work tx(*conn_, "sqlock force release");
        local_settings(tx);
        count();
        auto res = call(tx, "force_release", key);
        if (res.empty()) return std::nullopt;  // never granted: the transaction rolls back
        count();
        call(tx, "force_expire_late", key);
        commit(tx, "force_release");
        check_replicated("force_release");
        return res[0][0].as<std::int64_t>();
    });
}

lock_info pg_session::inspect(std::string_view key) {
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

database_gauges pg_session::gauges(std::size_t queue_limit) {
    return guarded("reading gauges", [&] {
        auto g = read_gauges(pg_row{run("gauges")[0]});
        if (queue_limit > 0)
            for (const auto& row : run("gauge_queues", static_cast<std::int64_t>(queue_limit)))
                g.queues.push_back(read_queue(pg_row{row}));
        return g;
    });
}

fence_result pg_session::fenced(std::string_view key, std::int64_t token,
                                const std::function<bool(ledger&)>& body) {
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

job_row pg_session::job_read(std::string_view job, std::string_view run_key) {
    return guarded("reading the job ledger",
                   [&] { return read_job_row(pg_row{run("job_row", job, run_key)[0]}); });
}

bool pg_session::job_abandon(std::string_view job, std::string_view run_key, std::string_view owner,
                             std::int64_t token, std::string_view error) {
    return affected("job_abandon", job, run_key, owner, token, error) == 1;
}

std::vector<job_row> pg_session::job_list(std::string_view job, bool exact, std::size_t limit) {
    return guarded("listing the job ledger", [&] {
        std::vector<job_row> out;
        for (const auto& row : run("job_list", job, static_cast<std::int64_t>(limit), exact))
            out.push_back(read_job_row(pg_row{row}));
        return out;
    });
}

}  // namespace sqlock::detail::postgres
