#include "watchdog/clock.hpp"

#include <sqlock/lease.hpp>

#include <time.h>

#include <atomic>

namespace sqlock::detail {
namespace {

std::atomic<lease_clock_source> test_source{nullptr};

std::int64_t boottime_ns() noexcept {
    timespec ts{};
    ::clock_gettime(CLOCK_BOOTTIME, &ts);
    return static_cast<std::int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

}  // namespace

std::int64_t lease_now_ns() noexcept {
    if (auto source = test_source.load(std::memory_order_relaxed)) return source();
    return boottime_ns();
}

void set_lease_clock_for_testing(lease_clock_source source) noexcept { test_source.store(source); }

}  // namespace sqlock::detail

namespace sqlock {

lease_clock::time_point lease_clock::now() noexcept {
    return time_point(duration(detail::lease_now_ns()));
}

}  // namespace sqlock
