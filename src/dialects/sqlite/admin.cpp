// SQLite: what operators and the job runner read and repair: held keys,
// waiters, inspect, gauges and force_release; fenced transactions, the job
// ledger written inside them, and the sweeper's deletes of old ledger rows.
// The session is in session.hpp.

#include "dialects/common/fault.hpp"
#include "dialects/sqlite/session.hpp"

#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace sqlock::detail::sqlite {

class sqlite_session::sqlite_ledger final : public ledger {
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

std::vector<std::string> sqlite_session::held_keys(std::string_view prefix, std::string_view after, std::size_t limit) {
    auto q = prepare("held_keys");
    q.bind(1, prefix).bind(2, static_cast<std::int64_t>(limit)).bind(3, after);
    std::vector<std::string> out;
    while (q.step()) out.push_back(q.text(0));
    return out;
}

std::vector<waiter_info> sqlite_session::waiters(std::string_view prefix, std::size_t limit) {
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

std::optional<std::int64_t> sqlite_session::force_release(std::string_view key) {
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
            for (const char* step : {"force_expire", "force_expire_readers"}) {
                auto q = prepare(step);
                q.bind(1, key);
                q.run();
            }
        }
        return true;
    });
    return token;
}

lock_info sqlite_session::inspect(std::string_view key) {
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

database_gauges sqlite_session::gauges(std::size_t queue_limit) {
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

fence_result sqlite_session::fenced(std::string_view key, std::int64_t token,
                                    const std::function<bool(ledger&)>& body) {
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

job_row sqlite_session::job_read(std::string_view job, std::string_view run_key) {
    auto q = prepare("job_row");
    q.bind(1, job).bind(2, run_key);
    q.step();  // always one row
    return read_job_row(q);
}

bool sqlite_session::job_abandon(std::string_view job, std::string_view run_key, std::string_view owner,
                                 std::int64_t token, std::string_view error) {
    return update("job_abandon", job, run_key, owner, token, error) == 1;
}

std::vector<job_row> sqlite_session::job_list(std::string_view job, bool exact, std::size_t limit) {
    auto q = prepare("job_list");
    q.bind(1, job).bind(2, static_cast<std::int64_t>(limit)).bind(3, std::int64_t{exact});
    std::vector<job_row> out;
    while (q.step()) out.push_back(read_job_row(q));
    return out;
}

std::size_t sqlite_session::sweep_jobs(std::int64_t retention_ms, std::size_t limit) {
    return update("sweep_jobs", retention_ms, static_cast<std::int64_t>(limit));
}

}  // namespace sqlock::detail::sqlite
