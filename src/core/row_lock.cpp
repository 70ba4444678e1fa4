#include "core/row_lock.hpp"

#include "dialects/common/fault.hpp"

#include <sqlock/errors.hpp>

namespace sqlock::detail {

namespace {

row_lock_ops& row_locks_of(session& s) {
    auto* ops = s.row_locks();
    if (!ops) throw config_error("select_for_update needs row locks, which this database does not have");
    return *ops;
}

}  // namespace

row_lock_holder::taken row_lock_holder::try_take(session_pool& pool, std::string_view key, std::int64_t lease_ms,
                                                 std::int64_t ticket, std::int64_t priority) {
    taken out;
    bool reused = false;
    auto pinned = pool.take(false, &reused);
    auto lock = [&] { return row_locks_of(*pinned).lock_row(key, lease_ms, ticket, priority); };
    row_lock_ops::attempt attempt;
    try {
        attempt = lock();
    } catch (const connection_error&) {
        if (!reused) throw;
        pool.drop_idle();  // an idle connection that died meanwhile: try a new one
        pinned = pool.take(true, &reused);
        attempt = lock();
    }
    if (attempt.state == row_lock_ops::state::missing) {
        pool.with_session([&](session& s) { row_locks_of(s).ensure_row(key); });
        attempt = lock();
    }
    if (attempt.state != row_lock_ops::state::locked) {
        out.remaining_ms = attempt.remaining_ms;
        pool.put_back(std::move(pinned));
        return out;
    }
    // The row is ours: bump the fence on another session, committed at once,
    // from the counter read once the row was locked (bump_token).
    std::optional<std::int64_t> token;
    try {
        token = pool.with_session([&](session& s) { return row_locks_of(s).bump_token(key, attempt.counter); });
    } catch (...) {
        try {
            row_locks_of(*pinned).end_row_lock();
        } catch (...) {
        }
        throw;
    }
    if (!token) {
        // An earlier holder's fenced transaction still share-locks the key's
        // fence row, or the counter moved: the key is not free, or no longer
        // ours (its transaction may be gone with its connection, which is
        // then not pooled again). Contention, as in the lease modes, so
        // that a blocking acquire waits on.
        try {
            row_locks_of(*pinned).end_row_lock();
            pool.put_back(std::move(pinned));
        } catch (const error&) {
        }
        return out;
    }
    // The bump ran on another connection, so the row lock proves the key
    // was ours for it only if the held transaction outlived it. One that
    // ended meanwhile (the server restarted or killed it, or its idle limit
    // passed while this waited for a pooled connection) let another client
    // take the key, and this token would pass its fence: never handed out.
    // Reading the token back in the held transaction proves it was alive
    // after the bump, and that nobody bumped since.
    fault(fault_point::row_lock_bumped);
    bool outlived = false;
    try {
        outlived = row_locks_of(*pinned).fence_token(key) == *token;
    } catch (const error&) {
        // The transaction or its connection is gone.
    }
    if (!outlived) {
        try {
            row_locks_of(*pinned).end_row_lock();
        } catch (...) {
        }
        return out;  // busy; the connection is not pooled again
    }
    // A granted waiter leaves the queue, only now: a refused attempt keeps
    // its place. The key is held whatever this answers; a ticket left
    // behind is no longer heartbeated and expires within seconds.
    if (ticket != no_ticket) {
        try {
            pool.with_session([&](session& s) { s.dequeue(ticket); });
        } catch (const error&) {
        }
    }
    out.token = *token;
    out.holder = std::make_unique<row_lock_holder>(pool, std::move(pinned));
    return out;
}

row_lock_holder::row_lock_holder(session_pool& pool, std::unique_ptr<session> pinned)
    : pool_(pool), pinned_(std::move(pinned)) {}

row_lock_holder::~row_lock_holder() = default;  // a hold not released ends with its connection

session* row_lock_holder::borrow(bool wait, bool* busy) {
    std::unique_lock lock(mu_);
    if (wait) idle_.wait(lock, [&] { return !busy_; });
    *busy = busy_;
    if (busy_ || !pinned_) return nullptr;
    busy_ = true;
    return pinned_.get();
}

void row_lock_holder::give_back() {
    {
        std::lock_guard lock(mu_);
        busy_ = false;
    }
    idle_.notify_all();
}

row_lock_holder::verdict row_lock_holder::check(std::string_view key, std::int64_t token,
                                                std::chrono::milliseconds bound, bool wait) {
    bool busy = false;
    session* s = borrow(wait, &busy);
    if (!s) return busy ? verdict::skipped : verdict::lost;
    bool answered = false;
    std::int64_t now_token = 0;
    try {
        s->bound_waits(bound);
        now_token = row_locks_of(*s).fence_token(key);
        s->bound_waits(std::chrono::milliseconds::zero());
        answered = true;
    } catch (const error&) {
        // The server ended the transaction with the connection.
    }
    // Another token means an operator broke the lock (force_release). The
    // hold is not ended here: the caller first tells the holder its lease is
    // lost, then releases, so that nobody can win the key before the holder
    // knows.
    give_back();
    return !answered ? verdict::lost : now_token == token ? verdict::held : verdict::forced;
}

bool row_lock_holder::release(std::string_view key, bool healthy) {
    std::unique_ptr<session> pinned;
    {
        std::unique_lock lock(mu_);
        idle_.wait(lock, [&] { return !busy_; });  // a check under way has the session
        pinned = std::move(pinned_);
    }
    if (!pinned) return true;  // already ended, when the hold was found lost
    try {
        row_locks_of(*pinned).release_row_lock(key);
    } catch (const error&) {
        // The server ended (or will end) the transaction with the connection,
        // which is dropped here: the row lock is gone either way.
        return false;
    }
    if (healthy) pool_.put_back(std::move(pinned));
    return true;
}

}  // namespace sqlock::detail
