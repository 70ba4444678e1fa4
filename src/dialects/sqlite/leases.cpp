// SQLite: exclusive leases (grant, release, renew, the watchdog's batch
// renewal), the wait queue, and the sweeper's deletes of lock and waiter
// rows. One writer at a time, so a grant is a single statement; a queued
// waiter's grant and its leaving the queue share a BEGIN IMMEDIATE
// transaction. A release rings the head waiter's doorbell. The session is in
// session.hpp.

#include "dialects/common/fault.hpp"
#include "dialects/sqlite/doorbell.hpp"
#include "dialects/sqlite/session.hpp"

#include <set>
#include <string>
#include <vector>

namespace sqlock::detail::sqlite {

grant_result sqlite_session::grant(const grant_request& r) {
    try {
        return grant_once(r);
    } catch (const db_error& e) {
        // The busy timeout ran out: another writer kept the database
        // (perhaps a frozen process). For the caller that is contention.
        if (!e.code().empty() && (std::stoi(e.code()) & 0xff) == SQLITE_BUSY) return {};
        throw;
    }
}

grant_result sqlite_session::grant_once(const grant_request& r) {
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

std::optional<std::int64_t> sqlite_session::grant_statement(const grant_request& r) {
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

bool sqlite_session::release(std::string_view key, std::string_view owner, sqlock::mode m) {
    std::optional<std::string> wake;  // the head waiter's channel, when released
    unflushed([&] {
        auto q = prepare(m == mode::unique_insert ? "release_delete" : "release_clear");
        q.bind(1, key).bind(2, owner);
        // Drain only after a row: stepping past SQLITE_DONE runs it again.
        if (q.step()) {
            wake = q.null(0) ? std::string() : q.text(0);
            q.run();
        }
        return true;
    });  // committed (autocommit) and this process's write turn given back
    if (wake && !wake->empty()) ring_sqlite_doorbell(*wake);
    return wake.has_value();
}

renew_result sqlite_session::renew(std::string_view key, std::string_view owner, std::int64_t lease_ms, bool) {
    return update("renew", key, owner, lease_ms) == 1 ? renew_result::renewed : renew_result::not_held;
}

void sqlite_session::bound_waits(std::chrono::milliseconds bound) {
    // The busy handler is SQLite's only wait: for another process's write lock.
    busy_.install(db_, bound.count() > 0 ? bound : ctx_.options.statement_timeout);
}

std::vector<bool> sqlite_session::renew_batch(const std::vector<renewal>& batch) {
    auto q = prepare("renew_batch");
    q.bind(1, std::string_view(renewals_json(batch)));
    std::set<std::string> renewed;
    while (q.step()) renewed.insert(q.text(0));
    return present_in(batch, renewed, [](const renewal& r) { return r.owner; });
}

std::size_t sqlite_session::sweep(std::size_t limit) { return update("sweep", static_cast<std::int64_t>(limit)); }

std::size_t sqlite_session::sweep_waiters(std::size_t limit) {
    return update("sweep_waiters", static_cast<std::int64_t>(limit));
}

// The queue's writes do not wait for the disk (unflushed()): a queue row
// orders waiters and plays no part in exclusion or tokens. One lost with the
// machine costs its waiter its place: the heartbeat finds it gone and the
// waiter queues again at the back.
std::int64_t sqlite_session::enqueue(const waiter_request& w) {
    return unflushed([&] {
        auto q = prepare(w.kind == 'X' ? "enqueue" : "holder_enqueue");
        q.bind(1, w.key).bind(2, w.owner).bind(3, std::int64_t{w.fair}).bind(4, std::int64_t{w.priority});
        q.bind(5, w.lease_ms).bind(6, w.listener).bind(7, w.holder);
        if (w.kind != 'X') q.bind(8, std::string_view(&w.kind, 1));
        if (!q.step()) throw db_error(dialect_name, "", "enqueue returned no ticket");
        const std::int64_t ticket = q.integer(0);
        q.run();
        return ticket;
    });
}

void sqlite_session::dequeue(std::int64_t ticket) {
    unflushed([&] { return update("dequeue", ticket); });
}

std::vector<bool> sqlite_session::beat_waiters(const std::vector<heartbeat>& batch) {
    return unflushed([&] {
        auto q = prepare("beat_waiters");
        q.bind(1, std::string_view(heartbeats_json(batch)));
        std::set<std::int64_t> live;
        while (q.step()) live.insert(q.integer(0));
        return present_in(batch, live, [](const heartbeat& h) { return h.ticket; });
    });
}

}  // namespace sqlock::detail::sqlite
