#pragma once
// The loss signals' own clock: a thread that declares a lease lost the moment
// its local deadline passes, and does nothing else. It never touches the
// database, so a renewal stuck on a frozen server, a dead network or a busy
// SQLite file cannot delay lost(), the stop token, on_lost or the CLI's
// guardian past the deadline. It sleeps on a CLOCK_BOOTTIME timerfd, so a
// machine suspend counts towards deadlines as the database's clock does.

#include "watchdog/schedule.hpp"

#include <cstdint>
#include <functional>
#include <memory>
#include <thread>

namespace sqlock::detail {

class deadline_timer {
public:
    // expire(l) is called on the timer's thread for each watched lease whose
    // deadline has passed and that is neither lost nor released.
    explicit deadline_timer(std::function<void(lease_timing&)> expire);
    // Stops and joins the thread (detaches it when called on that thread).
    ~deadline_timer();
    deadline_timer(const deadline_timer&) = delete;
    deadline_timer& operator=(const deadline_timer&) = delete;

    // Watches a lease (weakly) until it is lost or released. Thread-safe.
    void watch(const std::shared_ptr<lease_timing>& lease);

private:
    struct state;
    std::shared_ptr<state> state_;
    std::thread thread_;
};

}  // namespace sqlock::detail
