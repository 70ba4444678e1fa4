#pragma once
// The client's connections. `pool_size` is a real cap: at most that many
// sessions run the client's statements at once, and a thread that finds them
// all in use waits for one. Connections that are pinned for a while (a
// select_for_update holder's) are lent outside the cap; the watchdog and the
// wake-up listener have connections of their own.

#include "dialects/dialect.hpp"

#include <sqlock/errors.hpp>

#include <condition_variable>
#include <cstddef>
#include <memory>
#include <mutex>
#include <type_traits>
#include <vector>

namespace sqlock::detail {

class session_pool {
public:
    // size: at most this many with_session() calls at once (pool_size).
    session_pool(dialect& d, std::size_t size) : dialect_(d), size_(size) {}
    session_pool(const session_pool&) = delete;
    session_pool& operator=(const session_pool&) = delete;

    // Runs f(session&) on a pooled session, waiting for one if all are in
    // use. A connection_error on a session that had been idle in the pool is
    // retried once on a fresh connection: the server may have restarted
    // meanwhile. The first run may also have committed with its answer lost,
    // so every operation run this way must be safe to repeat (docs/design.md,
    // "Commits whose answer was lost"). A session that threw connection_error
    // is dropped.
    template <class F>
    auto with_session(F&& f) -> decltype(f(std::declval<session&>())) {
        return run_on_session(f, true);
    }
    // The same, never repeated: for an operation that is not safe to run
    // twice. Its connection_error reaches the caller, the outcome unknown.
    template <class F>
    auto with_session_once(F&& f) -> decltype(f(std::declval<session&>())) {
        return run_on_session(f, false);
    }

    // A session lent outside the cap, for as long as the caller likes
    // (select_for_update's pinned connection). fresh: a new connection, not
    // an idle one. *reused tells which it got.
    std::unique_ptr<session> take(bool fresh, bool* reused);
    // Gives a healthy session back to be kept idle (closed when enough are).
    void put_back(std::unique_ptr<session> s);
    // Closes every idle session: they are likely dead (server restart).
    void drop_idle();

private:
    class slot;  // one of the `size` places, held while with_session runs

    template <class F>
    auto run_on_session(F& f, bool repeat) -> decltype(f(std::declval<session&>()));

    dialect& dialect_;
    const std::size_t size_;
    std::mutex mu_;
    std::condition_variable freed_;
    std::size_t in_use_ = 0;
    std::vector<std::unique_ptr<session>> idle_;
};

class session_pool::slot {
public:
    explicit slot(session_pool& p) : pool_(p) {
        std::unique_lock lock(pool_.mu_);
        pool_.freed_.wait(lock, [&] { return pool_.in_use_ < pool_.size_; });
        ++pool_.in_use_;
    }
    ~slot() {
        {
            std::lock_guard lock(pool_.mu_);
            --pool_.in_use_;
        }
        pool_.freed_.notify_one();
    }
    slot(const slot&) = delete;
    slot& operator=(const slot&) = delete;

private:
    session_pool& pool_;
};

template <class F>
auto session_pool::run_on_session(F& f, bool repeat) -> decltype(f(std::declval<session&>())) {
    slot held(*this);
    auto run = [&](std::unique_ptr<session> s) -> decltype(f(*s)) {
        try {
            if constexpr (std::is_void_v<decltype(f(*s))>) {
                f(*s);
                put_back(std::move(s));
            } else {
                auto result = f(*s);
                put_back(std::move(s));
                return result;
            }
        } catch (const connection_error&) {
            throw;  // the session is dropped with s
        } catch (...) {
            put_back(std::move(s));  // dialects leave no transaction open when they throw
            throw;
        }
    };
    bool reused = false;
    auto s = take(false, &reused);
    if (!reused || !repeat) return run(std::move(s));
    try {
        return run(std::move(s));
    } catch (const connection_error&) {
        drop_idle();  // its siblings are likely dead too (server restart)
    }
    return run(take(true, &reused));
}

}  // namespace sqlock::detail
