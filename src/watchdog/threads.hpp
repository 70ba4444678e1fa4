#pragma once
// How the client's background threads stop.

#include <condition_variable>
#include <mutex>
#include <thread>

namespace sqlock::detail {

// Stops a thread that waits on `cv` until `stopping`: sets it, wakes the
// thread and joins it — or detaches it when called on that thread itself
// (its last reference to the client was dropped there, destroying the client
// from within); the thread then sees `stopping` in the state it shares with
// its owner, and ends.
inline void stop_thread(std::mutex& mu, bool& stopping, std::condition_variable& cv, std::thread& thread) {
    {
        std::lock_guard lock(mu);
        stopping = true;
    }
    cv.notify_all();
    if (!thread.joinable()) return;
    if (thread.get_id() == std::this_thread::get_id()) thread.detach();
    else thread.join();
}

}  // namespace sqlock::detail
