#pragma once
// sqlock::shared_mutex: a distributed reader-writer lock meeting the standard
// SharedTimedLockable requirements, so std::shared_lock, std::unique_lock and
// std::scoped_lock work.

#include <sqlock/client.hpp>

#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace sqlock {

namespace detail {
class exclusive_turn;
}

// One key of one client, locked like a std::shared_timed_mutex: lock() and
// friends take it exclusively (client::acquire), lock_shared() and friends
// take it shared (client::acquire_shared). Safe for concurrent use: like a
// std::shared_mutex, many threads may hold it shared at once (each with a
// shared lease of its own), and unlock_shared() releases one of the calling
// thread's; one thread at a time holds it exclusively, and another thread's
// lock() waits for that thread's unlock() even if its lease was lost (or
// until options.cancel stops it: cancelled_error). Readers and the writer
// are kept apart by the database alone, each with a lease of its own: a
// reader and a writer whose lease was lost may overlap, and the one whose
// lease was lost is told (lease::lost()), as between processes. The thread
// holding it exclusively locking it exclusively again throws
// std::system_error (resource_deadlock_would_occur). Database failures throw
// sqlock errors from the lock calls; unlock() and unlock_shared() never
// throw: a release that fails is logged, and the lease expires on its own.
class shared_mutex {
public:
    shared_mutex(client c, std::string key, lock_options options = {});
    ~shared_mutex();
    shared_mutex(const shared_mutex&) = delete;
    shared_mutex& operator=(const shared_mutex&) = delete;

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

    void lock_shared();
    bool try_lock_shared();
    template <class Rep, class Period>
    bool try_lock_shared_for(const std::chrono::duration<Rep, Period>& d) {
        return lock_shared_within(detail::wait_of(d));
    }
    template <class Clock, class Duration>
    bool try_lock_shared_until(const std::chrono::time_point<Clock, Duration>& t) {
        return lock_shared_within(detail::wait_until(t));
    }
    void unlock_shared();

private:
    bool lock_within(std::chrono::milliseconds timeout);
    bool lock_shared_within(std::chrono::milliseconds timeout);
    void keep_shared(lease l);

    client client_;
    std::string key_;
    lock_options options_;
    std::unique_ptr<detail::exclusive_turn> writer_;  // one thread at a time, as for sqlock::mutex
    std::mutex mu_;  // guards shared_; never held across a database round trip
    std::map<std::thread::id, std::vector<lease>> shared_;
};

}  // namespace sqlock
