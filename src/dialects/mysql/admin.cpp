// MySQL / MariaDB: what operators and the job runner read and repair: held
// keys, waiters, inspect, gauges and force_release; fenced transactions and
// the job ledger written inside them. The session is in session.hpp.

#include "dialects/common/fault.hpp"
#include "dialects/mysql/session.hpp"

#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace sqlock::detail::mysql {

class my_session::my_ledger final : public ledger {
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

std::vector<std::string> my_session::held_keys(std::string_view prefix, std::string_view after, std::size_t limit) {
    return guarded("listing held keys", [&] {
        auto& ps = prepared("held_keys");
        bind_all(ps, prefix, prefix, after, static_cast<std::int64_t>(limit));
        std::vector<std::string> out;
        for_rows(ps, [&](sql::ResultSet& rs) { out.push_back(rs.getString(1)); });
        return out;
    });
}

std::vector<waiter_info> my_session::waiters(std::string_view prefix, std::size_t limit) {
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

std::optional<std::int64_t> my_session::force_release(std::string_view key) {
    return guarded("force_release", [&]() -> std::optional<std::int64_t> {
        // A lean key's counter runs ahead in its lock row: fold it into the
        // fence row first, so that the bump below is past every grant and the
        // next grant goes through the procedure
        // (migrations/mysql/0014_lean_grants.sql). sqlock_unlean commits on
        // its own, so a grant may make the key lean again before the bump;
        // the bump holds the fence row, which every grant that sets the flag
        // writes first, so a flag still clear after it stays clear until the
        // commit, and a set one sends us round again. (Without that, the
        // key's next lean grant drew the bump's own number, or a lean grant
        // in flight kept its lease past the forced release.)
        auto live_now = [&] {
            bool live = false;
            auto& ps = prepared("force_live");
            bind_all(ps, key);
            for_rows(ps, [&](sql::ResultSet&) { live = true; });
            return live;
        };
        for (int round = 0;; ++round) {
            update("unlean", key);
            fault(fault_point::mysql_force_unleaned);
            begin();
            const bool live = live_now();
            if (live) {
                update("force_expire", key);
                fault(fault_point::mysql_force_expired);
                update("force_expire_readers", key);
            }
            if (update("force_bump", key, key) == 0) {
                rollback();
                return std::optional<std::int64_t>();
            }
            // force_live's read does not see a grant that held the key's row
            // then, and the fence row until it committed, just before this
            // bump: READ COMMITTED reads again now, and such a lease sends
            // us round again, to end it first (the lock row before the fence
            // row, the order grants lock them in), not outlive the bump.
            if (scalar("lean_flag", key).value_or(0) != 0 || (!live && live_now())) {
                rollback();
                if (round >= 100)
                    throw db_error(dialect_name, "", "force_release: the key kept being granted meanwhile; try again");
                continue;
            }
            const auto token = scalar("read_token", key);
            commit();
            return token;
        }
    });
}

lock_info my_session::inspect(std::string_view key) {
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

database_gauges my_session::gauges(std::size_t queue_limit) {
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

fence_result my_session::fenced(std::string_view key, std::int64_t token,
                                const std::function<bool(ledger&)>& body) {
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

job_row my_session::job_read(std::string_view job, std::string_view run_key) {
    return guarded("reading the job ledger", [&] {
        auto& ps = prepared("job_row");
        bind_all(ps, job, run_key);
        job_row out;  // always one row: a left join from the clock
        for_rows(ps, [&](sql::ResultSet& rs) { out = read_job_row(my_row{rs}); });
        return out;
    });
}

bool my_session::job_abandon(std::string_view job, std::string_view run_key, std::string_view owner,
                             std::int64_t token, std::string_view error) {
    return guarded("giving a lost attempt back", [&] {
        return update("job_abandon", error, job, run_key, owner, token) == 1;
    });
}

std::vector<job_row> my_session::job_list(std::string_view job, bool exact, std::size_t limit) {
    return guarded("listing the job ledger", [&] {
        auto& ps = prepared("job_list");
        bind_all(ps, exact, job, job, job, static_cast<std::int64_t>(limit));
        std::vector<job_row> out;
        for_rows(ps, [&](sql::ResultSet& rs) { out.push_back(read_job_row(my_row{rs})); });
        return out;
    });
}

}  // namespace sqlock::detail::mysql
