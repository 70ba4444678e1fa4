#pragma once
// select_for_update in one place: taking a key by its row lock, keeping the
// pinned connection that holds it, pinging it, and letting it go.
//
// The row lock lives in a transaction on a connection of its own, lent by
// the pool outside its cap. The fence bump and the row's creation run on a
// pooled session, so they commit at once: a holder whose connection later
// dies has still consumed its token, and tokens never go back.

#include "pool/pool.hpp"
#include "dialects/dialect.hpp"

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

namespace sqlock::detail {

class row_lock_holder {
public:
    struct taken {
        std::unique_ptr<row_lock_holder> holder;   // null when the key was busy
        std::int64_t token = 0;
        std::optional<std::int64_t> remaining_ms;  // busy: the lease holder's remaining lease, when known
    };
    // Tries once to take `key`: locks its row without waiting (creating the
    // row first if the key has none), bumps its fence on another session,
    // then reads the token back in the held transaction (proof that the row
    // lock outlived the bump). A granted waiter
    // (ticket) leaves the queue. Busy (held, a waiter ahead, or an earlier
    // holder's fenced transaction still open) is an empty holder, not an error.
    static taken try_take(session_pool& pool, std::string_view key, std::int64_t lease_ms, std::int64_t ticket,
                          std::int64_t priority);

    row_lock_holder(session_pool& pool, std::unique_ptr<session> pinned);
    ~row_lock_holder();
    row_lock_holder(const row_lock_holder&) = delete;
    row_lock_holder& operator=(const row_lock_holder&) = delete;

    // Checks the hold: the connection is alive and the key's token is still
    // `token` (else an operator broke the lock: `forced`); `lost`: the
    // connection or its transaction is gone, or the check failed. Never ends
    // the hold: after `forced` or `lost` the caller marks the lease lost and
    // then calls release(), so the holder is told before anyone else can
    // take the key.
    // The client-side wait is bounded by `bound`. Never holds a mutex
    // across the round trip; `wait`: wait for a check already under way
    // (the application's renew()) instead of skipping (the watchdog).
    enum class verdict { held, lost, forced, skipped };
    verdict check(std::string_view key, std::int64_t token, std::chrono::milliseconds bound, bool wait);

    // Ends the hold of `key` (rolls the transaction back), after any check
    // under way, then wakes the head of the key's queue (a rollback carries
    // no wake-up). healthy: the connection may go back to the pool. False
    // when ending it failed (the connection died: the row lock went with it).
    bool release(std::string_view key, bool healthy);

private:
    // Borrows the pinned session; null when gone or (without wait) busy.
    session* borrow(bool wait, bool* busy);
    void give_back();

    session_pool& pool_;
    std::mutex mu_;
    std::condition_variable idle_;
    bool busy_ = false;
    std::unique_ptr<session> pinned_;  // null once the hold is over
};

}  // namespace sqlock::detail
