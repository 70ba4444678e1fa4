#pragma once
// sqlock::mutex: a distributed mutex meeting the standard TimedLockable
// requirements, so std::unique_lock, std::scoped_lock and std::lock_guard work.

#include <sqlock/client.hpp>

#include <chrono>
#include <memory>
#include <string>

namespace sqlock {

namespace detail {
class exclusive_turn;
}

// One key of one client, locked and unlocked like a std::timed_mutex. Safe
// for concurrent use: one thread at a time holds it, and another thread's
// lock() waits in this process for that thread's unlock(), even if the
// holder's lease was lost meanwhile (the database alone would let the second
// thread in while the first is still inside), or until options.cancel stops
// it (cancelled_error). The thread holding it locking it again throws
// std::system_error (resource_deadlock_would_occur). Database failures throw
// sqlock errors from the lock calls; unlock() never throws (std::lock_guard
// calls it from a noexcept destructor): a release that fails is logged, and
// the lease expires on its own on the server.
class mutex {
public:
    mutex(client c, std::string key, lock_options options = {});
    ~mutex();
    mutex(const mutex&) = delete;
    mutex& operator=(const mutex&) = delete;

    void lock();
    bool try_lock();
    template <class Rep, class Period>
    bool try_lock_for(const std::chrono::duration<Rep, Period>& d) {
        return lock_within(detail::wait_of(d));
    }
    template <class Clock, class Duration>
    bool try_lock_until(const std::chrono::time_point<Clock, Duration>& t) {
        return lock_within(detail::wait_until(t));
    }
    void unlock();

    // The lease while locked, for the thread holding it (its token and
    // lost()); null otherwise.
    const lease* held() const noexcept;

private:
    bool lock_within(std::chrono::milliseconds timeout);
    client client_;
    std::string key_;
    lock_options options_;
    std::unique_ptr<detail::exclusive_turn> turn_;
};

}  // namespace sqlock
