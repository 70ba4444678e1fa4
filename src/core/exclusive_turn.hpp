#pragma once
// The exclusive side of sqlock::mutex and sqlock::shared_mutex: one thread of
// this process at a time holds the object's key, and the others wait here, as
// on a std::timed_mutex, rather than at the database.
//
// Asking the database is not enough: it would grant another thread of this
// process the key as soon as the holding thread's lease ran out (no renewal,
// max_hold, a partition), while that thread is still inside its critical
// section; the object's one lease slot would then be overwritten, and the
// first thread's unlock() would release the second thread's lease, letting
// another client in while the second is inside.

#include <sqlock/client.hpp>

#include <chrono>
#include <condition_variable>
#include <stop_token>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

namespace sqlock::detail {

class exclusive_turn {
public:
    // Waits for the other threads' turns (up to timeout; wait_forever: for
    // ever; zero: only if none is inside), then asks the database for key in
    // the time left. True when the calling thread holds the key. Throws
    // std::system_error (resource_deadlock_would_occur) when it holds it
    // already, cancelled_error when options.cancel stops a wait (here or at
    // the database), and the database's errors. "The calling thread" is a
    // thread id: a lock moved to another thread is still the first thread's
    // for this check.
    bool lock(client& c, const std::string& key, const lock_options& options, std::chrono::milliseconds timeout);

    // Releases the key and lets the next thread in; never throws (a release
    // that fails is logged). Any thread may call it (a std::unique_lock may be moved to
    // another thread); nothing happens when the key is not held.
    void unlock();

    // The lease while the key is held; null otherwise. Meant for the thread
    // holding it: for any other, the lease may be released at any moment.
    const lease* held() const noexcept;

private:
    void leave();

    mutable std::mutex mu_;  // guards inside_ and held_; never held across a database round trip
    std::condition_variable_any left_;  // _any: its waits also end on options.cancel
    std::optional<std::thread::id> inside_;  // holds the key, or is asking the database for it
    std::optional<lease> held_;
};

}  // namespace sqlock::detail
