#include "core/clock.hpp"

#include <sqlock/lease.hpp>

#include <time.h>

#include <atomic>
#include <limits>

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

std::uint64_t thread_serial() noexcept {
    static std::atomic<std::uint64_t> next{1};
    thread_local const std::uint64_t mine = next.fetch_add(1, std::memory_order_relaxed);
    return mine;
}

std::int64_t saturating_add(std::int64_t a, std::int64_t b) noexcept {
    std::int64_t out;
    if (__builtin_add_overflow(a, b, &out))
        return b > 0 ? std::numeric_limits<std::int64_t>::max() : std::numeric_limits<std::int64_t>::min();
    return out;
}

std::int64_t ms_to_ns(std::int64_t ms) noexcept {
    std::int64_t out;
    if (__builtin_mul_overflow(ms, std::int64_t{1'000'000}, &out))
        return ms > 0 ? std::numeric_limits<std::int64_t>::max() : std::numeric_limits<std::int64_t>::min();
    return out;
}

}  // namespace sqlock::detail

namespace sqlock {

lease_clock::time_point lease_clock::now() noexcept {
    return time_point(duration(detail::lease_now_ns()));
}

}  // namespace sqlock
