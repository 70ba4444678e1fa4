// PostgreSQL: exclusive leases (grant, release, renew, the watchdog's batch
// renewal), the wait queue, the sweeper's deletes, and select_for_update's
// row locks, held in a pqxx::work on the session's own connection. A grant is
// one statement (a data-modifying CTE). The session is in session.hpp.

#include "dialects/postgres/session.hpp"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <set>
#include <string>
#include <vector>

namespace sqlock::detail::postgres {

grant_result pg_session::grant(const grant_request& r) {
    // Without a ticket to leave the queue with, or a backoff to plan, the
    // grant's DELETE and its read-back of the lock row are dropped: 3% more
    // uncontended cycles a second (pgbench -r, docs/benchmarks.md).
    const char* statement = r.ticket == no_ticket && !r.want_remaining ? "grant_try" : "grant";
    return granting([&] {
        return run(statement, r.key, r.owner, std::string_view(to_string(r.mode)), r.lease_ms, r.holder, r.note,
                   r.ticket, r.priority);
    });
}

bool pg_session::release(std::string_view key, std::string_view owner, sqlock::mode m) {
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

renew_result pg_session::renew(std::string_view key, std::string_view owner, std::int64_t lease_ms, bool wait) {
    return guarded("renew", [&] {
        try {
            const bool renewed = wait ? run("renew", key, owner, lease_ms)[0][0].as<bool>()
                                      : run("renew_nowait", key, owner, lease_ms).affected_rows() == 1;
            return renewed ? renew_result::renewed : renew_result::not_held;
        } catch (const pqxx::sql_error& e) {
            if (e.sqlstate() == lock_not_available) return renew_result::row_locked;
            throw;
        }
    });
}

std::vector<bool> pg_session::renew_batch(const std::vector<renewal>& batch) {
    return guarded("renew_batch", [&] {
        std::set<std::string> renewed;
        for (const auto& row : run("renew_batch", renewals_json(batch))) renewed.insert(row[0].as<std::string>());
        return present_in(batch, renewed, [](const renewal& r) { return r.owner; });
    });
}

void pg_session::bound_waits(std::chrono::milliseconds bound) {
    // TCP_USER_TIMEOUT: how long sent data may stay unacknowledged (a
    // partition) before the kernel drops the connection; keepalive probes
    // (set at connect) turn a silent peer into unacknowledged data.
    // libpq has no read timeout of its own.
    const unsigned ms = static_cast<unsigned>(bound.count() > 0 ? bound.count() : setup_.user_timeout_ms);
    bound_ = bound;
    const int fd = conn_->sock();
    if (fd >= 0) ::setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &ms, sizeof ms);
}

std::size_t pg_session::sweep(std::size_t limit) { return affected("sweep", static_cast<std::int64_t>(limit)); }

std::size_t pg_session::sweep_waiters(std::size_t limit) {
    return affected("sweep_waiters", static_cast<std::int64_t>(limit));
}

std::size_t pg_session::sweep_jobs(std::int64_t retention_ms, std::size_t limit) {
    return affected("sweep_jobs", retention_ms, static_cast<std::int64_t>(limit));
}

std::int64_t pg_session::enqueue(const waiter_request& w) {
    return guarded("enqueue", [&] {
        if (w.kind != 'X')
            return run("holder_enqueue", w.key, w.owner, w.fair, w.priority, w.lease_ms, w.listener, w.holder,
                       std::string(1, w.kind))[0][0]
                .as<std::int64_t>();
        return run("enqueue", w.key, w.owner, w.fair, w.priority, w.lease_ms, w.listener, w.holder)[0][0]
            .as<std::int64_t>();
    });
}

void pg_session::dequeue(std::int64_t ticket) {
    guarded("dequeue", [&] { run("dequeue", ticket); });
}

std::vector<bool> pg_session::beat_waiters(const std::vector<heartbeat>& batch) {
    return guarded("beat_waiters", [&] {
        std::set<std::int64_t> live;
        for (const auto& row : run("beat_waiters", heartbeats_json(batch))) live.insert(row[0].as<std::int64_t>());
        return present_in(batch, live, [](const heartbeat& h) { return h.ticket; });
    });
}

row_lock_ops* pg_session::row_locks() { return this; }

pg_session::attempt pg_session::lock_row(std::string_view key, std::int64_t lease_ms, std::int64_t ticket,
                                         std::int64_t priority) {
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
        // One row: present, locked (free and now ours), remaining, counter.
        if (res[0][1].as<bool>()) return {state::locked, std::nullopt, res[0][3].as<std::int64_t>()};
        held_.reset();
        if (!res[0][0].as<bool>()) return {state::missing, std::nullopt};
        return {state::busy, res[0][2].is_null() ? std::nullopt : std::optional(res[0][2].as<std::int64_t>())};
    });
}

void pg_session::end_row_lock() {
    guarded("end_row_lock", [&] {
        if (!held_) return;
        count();
        held_->abort();
        held_.reset();
    });
}

void pg_session::release_row_lock(std::string_view key) {
    guarded("release_row_lock", [&] {
        if (!held_) return;
        // The wake-up rides in the held transaction and is delivered at its
        // commit, as the row lock ends. After a rollback, a separate wake-up
        // came too late: a waiter blocked on the row had the key by then,
        // and the doorbell rang the next one for nothing.
        // However this ends (committed; rolled back by the server; the
        // connection gone), the transaction and its row lock are over.
        struct end_held {
            std::optional<pqxx::work>& tx;
            ~end_held() { tx.reset(); }
        } end{held_};
        try {
            count();
            held_->exec_prepared(prepared("release_row_lock"), arg(key));
            count();
            held_->commit();
        } catch (const pqxx::sql_error&) {
            // The wake-up failed (only a hint: its waiters poll), or the
            // server refused the commit (a full NOTIFY queue, say); either
            // way the server rolled back, which ends the row lock all the same.
        }
    });
}

void pg_session::ensure_row(std::string_view key) {
    guarded("ensure_row", [&] { run("ensure_row", key); });
}

std::optional<std::int64_t> pg_session::bump_token(std::string_view key, std::int64_t counter) {
    return guarded("bump_token", [&]() -> std::optional<std::int64_t> {
        try {
            const auto res = run("bump_token", key, counter);
            if (res.empty()) return std::nullopt;  // the counter moved: granted to another since
            return res[0][0].as<std::int64_t>();
        } catch (const pqxx::sql_error& e) {
            // lock_timeout: an earlier holder's fenced transaction share-locks the fence row.
            if (e.sqlstate() == lock_not_available) return std::nullopt;
            throw;
        }
    });
}

std::int64_t pg_session::fence_token(std::string_view key) {
    return guarded("ping", [&] {
        if (!held_) return run("read_token", key)[0][0].as<std::int64_t>();
        count();
        return held_->exec_prepared1(prepared("read_token"), arg(key))[0].as<std::int64_t>();
    });
}

}  // namespace sqlock::detail::postgres
