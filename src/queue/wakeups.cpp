#include "queue/wakeups.hpp"

#include <condition_variable>
#include <mutex>

namespace sqlock::detail::wakeups {
namespace {

struct state {
    std::mutex mu;
    std::condition_variable cv;
    std::uint64_t epoch = 0;
};

state& shared() {
    static state s;  // never destroyed before the last client
    return s;
}

}  // namespace

std::uint64_t epoch() {
    auto& s = shared();
    std::lock_guard lock(s.mu);
    return s.epoch;
}

void notify() {
    auto& s = shared();
    {
        std::lock_guard lock(s.mu);
        ++s.epoch;
    }
    s.cv.notify_all();
}

void wait(std::uint64_t seen, std::chrono::steady_clock::time_point until, const std::function<bool()>& stop) {
    auto& s = shared();
    std::unique_lock lock(s.mu);
    s.cv.wait_until(lock, until, [&] { return s.epoch != seen || stop(); });
}

}  // namespace sqlock::detail::wakeups
