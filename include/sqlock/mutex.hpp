#pragma once
// sqlock::mutex: a distributed mutex meeting the standard TimedLockable
// requirements, so std::unique_lock, std::scoped_lock and std::lock_guard work.

#include <sqlock/client.hpp>

#include <chrono>
#include <optional>
#include <string>

namespace sqlock {

// One key of one client, locked and unlocked like a std::timed_mutex.
// Like std::timed_mutex, one object is locked and unlocked by one thread at a
// time; locking it again while it holds the key throws std::system_error
// (resource_deadlock_would_occur). Database failures throw sqlock errors.
class mutex {
public:
    mutex(client c, std::string key, lock_options options = {});
    mutex(const mutex&) = delete;
    mutex& operator=(const mutex&) = delete;

    void lock();
    bool try_lock();
    template <class Rep, class Period>
    bool try_lock_for(const std::chrono::duration<Rep, Period>& d) {
        return lock_within(std::chrono::ceil<std::chrono::milliseconds>(d));
    }
    template <class Clock, class Duration>
    bool try_lock_until(const std::chrono::time_point<Clock, Duration>& t) {
        return lock_within(std::chrono::ceil<std::chrono::milliseconds>(t - Clock::now()));
    }
    void unlock();

    // The lease while locked (for its token and lost()); null otherwise.
    const lease* held() const noexcept { return held_ ? &*held_ : nullptr; }

private:
    bool lock_within(std::chrono::milliseconds timeout);
    client client_;
    std::string key_;
    lock_options options_;
    std::optional<lease> held_;
};

}  // namespace sqlock
