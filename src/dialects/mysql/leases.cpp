// MySQL / MariaDB: exclusive leases (grant, release, renew, the watchdog's
// batch renewal), the wait queue, the sweeper's deletes, and select_for_update's
// row locks. A grant is one CALL of a stored procedure
// (migrations/mysql/0004_grant_procedure.sql). The session is in session.hpp.

#include "dialects/mysql/session.hpp"

#include <cppconn/resultset.h>

#include <memory>
#include <set>
#include <string>
#include <vector>

namespace sqlock::detail::mysql {

grant_result my_session::grant(const grant_request& r) {
    return guarded("grant", [&]() -> grant_result {
        try {
            // A try that neither queues nor is fair, on a key this client saw
            // lean: the lean grant, one UPDATE of the lock row
            // (migrations/mysql/0014_lean_grants.sql). It matches nothing once
            // anyone waits or was granted since; then the procedure decides.
            if (r.mode == mode::conditional_update && r.ticket == no_ticket && r.priority == not_fair) {
                if (const auto seen = setup_.memo.find(r.key); seen && seen->lean) {
                    if (update("grant_lean", r.owner, r.lease_ms, r.holder, r.note, r.key, seen->token) == 1) {
                        setup_.memo.remember(r.key, {.token = seen->token + 1, .lean = true});
                        return grant_result{.token = seen->token + 1, .remaining_ms = std::nullopt};
                    }
                }
            }
            auto& call = prepared("grant");
            bind_all(call, r.key, r.owner, std::string_view(to_string(r.mode)), r.lease_ms, r.holder, r.note,
                     r.ticket, r.priority);
            count();
            std::unique_ptr<sql::ResultSet> rs(call.executeQuery());
            grant_result out;
            if (rs->next()) {
                if (!rs->isNull(1)) {
                    out.token = rs->getInt64(1);
                    setup_.memo.remember(r.key, {.token = *out.token, .lean = rs->getBoolean(3)});
                } else if (r.want_remaining && !rs->isNull(2)) {
                    out.remaining_ms = rs->getInt64(2);
                }
            }
            rs.reset();
            drain(call);
            return out;
        } catch (const sql::SQLException& e) {
            // The procedure rolled back. A grant blocks only on the key's
            // rows; when the statement time limit ends that wait before
            // the lock wait does, it is contention all the same.
            if (is_contention(e.getErrorCode()) || e.getErrorCode() == er_dup_entry ||
                e.getErrorCode() == er_statement_timeout)
                return grant_result{};
            throw;
        }
    });
}

bool my_session::release(std::string_view key, std::string_view owner, sqlock::mode m) {
    // A lock wait that times out means a select_for_update holder has the
    // row, which it locks only when no lease is live on it: the lease is
    // not ours any more.
    return guarded("release", [&] {
        try {
            // Granted lean: nobody had queued, and while nobody has since,
            // one UPDATE releases and there is nobody to ring.
            if (m == mode::conditional_update) {
                if (const auto seen = setup_.memo.find(key); seen && seen->lean) {
                    if (update("release_lean", key, owner) == 1) return true;
                    setup_.memo.not_lean(key);
                }
            }
            // A CALL (migrations/mysql/0013_ring_counts.sql): it also wakes the next waiter.
            return scalar("release", key, owner, m == mode::unique_insert).value_or(0) == 1;
        } catch (const sql::SQLException& e) {
            if (e.getErrorCode() == er_lock_wait_timeout) return false;
            throw;
        }
    });
}

renew_result my_session::renew(std::string_view key, std::string_view owner, std::int64_t lease_ms, bool wait) {
    return guarded("renew", [&] {
        try {
            const bool renewed = wait ? scalar("renew", key, owner, lease_ms).value_or(0) == 1
                                      : update("renew_nowait", lease_ms, key, owner) == 1;
            return renewed ? renew_result::renewed : renew_result::not_held;
        } catch (const sql::SQLException& e) {
            if (e.getErrorCode() == er_lock_wait_timeout) return renew_result::row_locked;
            throw;
        }
    });
}

// Connector/C++ 1.1 sets its read and write timeouts (statement timeout
// + 1 s) at connect and cannot change them on an open connection.
void my_session::bound_waits(std::chrono::milliseconds) {}

std::vector<bool> my_session::renew_batch(const std::vector<renewal>& batch) {
    return guarded("renew_batch", [&] {
        auto& ps = generated("renew_batch", batch.size(),
                             {{"/*OWNERS*/", "?", ", "}, {"/*MS*/", "?", ", "}, {"/*PAIRS*/", "(?, ?)", ", "}});
        unsigned i = 1;
        for (const auto& r : batch) ps.setString(i++, std::string(r.owner));
        for (const auto& r : batch) ps.setInt64(i++, r.lease_ms);
        for (const auto& r : batch) {
            ps.setString(i++, std::string(r.key));
            ps.setString(i++, std::string(r.owner));
        }
        count();
        std::size_t renewed;
        try {
            renewed = static_cast<std::size_t>(ps.executeUpdate());
        } catch (const sql::SQLException& e) {
            // A row another transaction has locked failed the statement
            // (an UPDATE cannot SKIP LOCKED here): nothing was renewed;
            // the caller renews each lease alone.
            if (e.getErrorCode() != er_lock_wait_timeout) throw;
            return std::vector<bool>(batch.size(), false);
        }
        if (renewed == batch.size()) return std::vector<bool>(batch.size(), true);
        // Some were not renewed: ask which owners still hold a live lease.
        auto& check = generated("renewed_owners", batch.size(), {{"/*OWNERS*/", "?", ", "}});
        i = 1;
        for (const auto& r : batch) check.setString(i++, std::string(r.owner));
        std::set<std::string> live;
        for_rows(check, [&](sql::ResultSet& rs) { live.insert(rs.getString(1)); });
        return present_in(batch, live, [](const renewal& r) { return r.owner; });
    });
}

std::size_t my_session::sweep(std::size_t limit) {
    return guarded("sweep", [&] {
        begin();
        std::vector<std::string> keys;
        auto& pick = prepared("sweep_pick");
        bind_all(pick, static_cast<std::int64_t>(limit));
        for_rows(pick, [&](sql::ResultSet& rs) { keys.push_back(rs.getString(1)); });
        std::size_t deleted = 0;
        if (!keys.empty()) {
            auto& del = generated("sweep_delete", keys.size(), {{"/*KEYS*/", "?", ", "}});
            for (std::size_t i = 0; i < keys.size(); ++i) del.setString(static_cast<unsigned>(i + 1), keys[i]);
            count();
            deleted = static_cast<std::size_t>(del.executeUpdate());
        }
        commit();
        return deleted;
    });
}

std::size_t my_session::sweep_waiters(std::size_t limit) {
    return guarded("sweep_waiters", [&] {
        const std::size_t dead = update("sweep_waiters", static_cast<std::int64_t>(limit));
        // The doorbell's ring counts of listeners that are gone
        // (migrations/mysql/0013_ring_counts.sql): bookkeeping, not waiters.
        update("sweep_rings", static_cast<std::int64_t>(limit));
        return dead;
    });
}

std::size_t my_session::sweep_jobs(std::int64_t retention_ms, std::size_t limit) {
    return guarded("sweep_jobs",
                   [&] { return update("sweep_jobs", retention_ms, static_cast<std::int64_t>(limit)); });
}

std::int64_t my_session::enqueue(const waiter_request& w) {
    return guarded("enqueue", [&] {
        if (w.kind != 'X')
            return scalar("holder_enqueue", w.key, w.owner, w.fair, w.priority, w.lease_ms, w.listener, w.holder,
                          std::string_view(&w.kind, 1))
                .value_or(0);
        return scalar("enqueue", w.key, w.owner, w.fair, w.priority, w.lease_ms, w.listener, w.holder)
            .value_or(0);
    });
}

void my_session::dequeue(std::int64_t ticket) {
    guarded("dequeue", [&] { update("dequeue", ticket); });
}

std::vector<bool> my_session::beat_waiters(const std::vector<heartbeat>& batch) {
    return guarded("beat_waiters", [&] {
        auto& ps = generated("beat_waiters", batch.size(),
                             {{"/*FIELD*/", "?", ", "}, {"/*MS*/", "?", ", "}, {"/*TICKETS*/", "?", ", "}});
        unsigned i = 1;
        for (const auto& h : batch) ps.setInt64(i++, h.ticket);
        for (const auto& h : batch) ps.setInt64(i++, h.lease_ms);
        for (const auto& h : batch) ps.setInt64(i++, h.ticket);
        count();
        if (static_cast<std::size_t>(ps.executeUpdate()) == batch.size())
            return std::vector<bool>(batch.size(), true);
        auto& check = generated("live_waiters", batch.size(), {{"/*TICKETS*/", "?", ", "}});
        i = 1;
        for (const auto& h : batch) check.setInt64(i++, h.ticket);
        std::set<std::int64_t> live;
        for_rows(check, [&](sql::ResultSet& rs) { live.insert(rs.getInt64(1)); });
        return present_in(batch, live, [](const heartbeat& h) { return h.ticket; });
    });
}

row_lock_ops* my_session::row_locks() { return this; }

my_session::attempt my_session::lock_row(std::string_view key, std::int64_t lease_ms, std::int64_t ticket,
                                         std::int64_t priority) {
    if (galera_) throw config_error("select_for_update needs row locks: " + galera_no_row_locks());
    return guarded("lock_row", [&]() -> attempt {
        const int idle_s = seconds_up(std::chrono::milliseconds(lease_ms));
        if (pinned_for_s_ != idle_s) {
            update("pin_session", idle_s);
            pinned_for_s_ = idle_s;
        }
        // A second try only after clearing a lean key's flag: lock_row.sql
        // never locks a lean row (its counter is in that row, which this
        // transaction's rollback would undo).
        for (int round = 0;; ++round) {
            begin();
            try {
                // Locked: the counter the fence bump must find unchanged,
                // read now (READ COMMITTED: a fresh snapshot).
                if (update("lock_row", key, key, priority, priority, ticket, priority, ticket) == 1)
                    return {state::locked, std::nullopt, scalar("read_token", key).value_or(0)};
            } catch (const sql::SQLException& e) {
                if (!is_contention(e.getErrorCode())) throw;
                rollback();
                // The row is locked: by a grant or release at work, or by a
                // lean holder's fenced transaction (sqlock_assert_held
                // share-locks a lean key's row). A queued waiter must still
                // clear a lean key's flag, or the one-statement release rings
                // nobody and the holder's client grants itself the key again
                // past it, for as long as it keeps fencing; then it tries
                // again, as the holder may have let go meanwhile. (Not a
                // try_acquire: clearing the flag may wait for the fenced
                // transaction, and a try answers at once.)
                if (round == 0 && ticket != no_ticket && scalar("lean_flag", key).value_or(0) != 0) {
                    unlean_quietly(key);
                    continue;
                }
                return {state::busy, std::nullopt};
            }
            // Not free: absent, held, or lean. Read which, without locking.
            attempt out{state::missing, std::nullopt};
            bool lean = false;
            auto& ps = prepared("lock_row_state");
            bind_all(ps, key);
            for_rows(ps, [&](sql::ResultSet& rs) {
                if (!rs.getBoolean(1)) return;
                out.state = state::busy;
                if (!rs.isNull(2)) out.remaining_ms = rs.getInt64(2);
                lean = rs.getBoolean(3);
            });
            rollback();
            // A lean key: clear the flag, whether the key is free or held
            // (then its release rings this waiter's queue instead of passing
            // it by, as a lease waiter's failed grant does), and try again:
            // the holder may have let go while the flag was cleared, with the
            // one-statement release, which rings nobody.
            if (!lean || round > 0) return out;
            unlean_quietly(key);
        }
    });
}

// sqlock_unlean, whose only failure that is not an error is a lock wait on
// the key's fence row (a fenced transaction share-locks it): the next
// attempt clears the flag then.
void my_session::unlean_quietly(std::string_view key) {
    try {
        update("unlean", key);
    } catch (const sql::SQLException& e) {
        if (!is_contention(e.getErrorCode())) throw;
    }
}

void my_session::release_row_lock(std::string_view key) {
    // One CALL rolls back and then wakes (migrations/mysql/0011_row_lock_release.sql):
    // one round trip, where a rollback and a wake-up were two, and the
    // lookup of the queue's head right after the rollback.
    guarded("release_row_lock", [&] {
        in_tx_ = false;
        update("release_row_lock", key);
    });
}

void my_session::end_row_lock() {
    guarded("end_row_lock", [&] {
        if (in_tx_) rollback();
    });
}

void my_session::ensure_row(std::string_view key) {
    guarded("ensure_row", [&] { update("ensure_row", key); });
}

std::optional<std::int64_t> my_session::bump_token(std::string_view key, std::int64_t counter) {
    return guarded("bump_token", [&]() -> std::optional<std::int64_t> {
        try {
            if (counter == 0) {
                update("first_row_lock_token", key);
                return 1;
            }
            if (update("bump_row_lock_token", key, counter) == 1) return counter + 1;
            return std::nullopt;  // the counter moved: granted to another since
        } catch (const sql::SQLException& e) {
            // An earlier holder's fenced transaction share-locks the fence
            // row; or a first token that another grant drew meanwhile.
            if (e.getErrorCode() == er_lock_wait_timeout || (counter == 0 && e.getErrorCode() == er_dup_entry))
                return std::nullopt;
            throw;
        }
    });
}

std::int64_t my_session::fence_token(std::string_view key) {
    // A failed statement (its time limit, say) leaves InnoDB's transaction
    // and its row locks in place; a consistent read takes no lock and so
    // meets no deadlock, the one error that rolls the whole transaction back.
    return guarded("ping", [&] { return scalar("read_token", key).value_or(0); });
}

}  // namespace sqlock::detail::mysql
