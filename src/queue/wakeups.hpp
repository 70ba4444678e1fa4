#pragma once
// Local wake-ups: every blocking acquire of this process, whatever its
// client, sleeps on one process-wide condition, and anything that may free a
// key for it bumps the condition's epoch: a release by any client of this
// process, a notification from the database, a waiter losing its place in the
// queue, a cancel. A waiter reads the epoch before it tries, and sleeps only
// while the epoch has not moved, so no wake-up between its try and its sleep
// is missed.

#include <chrono>
#include <cstdint>
#include <functional>

namespace sqlock::detail::wakeups {

std::uint64_t epoch();
void notify();
// Sleeps until the epoch is no longer `seen`, `until` passes, or stop() is true
// (checked at every wake-up).
void wait(std::uint64_t seen, std::chrono::steady_clock::time_point until, const std::function<bool()>& stop);

}  // namespace sqlock::detail::wakeups
