#pragma once
// The clock lease deadlines live on, and the thread identity reentrancy is
// keyed on. Internal; sqlock::lease_clock (sqlock/lease.hpp) is the public face.

#include <cstdint>

namespace sqlock::detail {

// Nanoseconds on CLOCK_BOOTTIME. Unlike CLOCK_MONOTONIC (steady_clock), it
// keeps counting while the machine is suspended, as the database's clock does:
// a lease held across a suspend longer than its length is lost on resume.
std::int64_t lease_now_ns() noexcept;

// Tests only: replaces the clock lease_now_ns() reads (nullptr: the real one),
// so that a test can make time pass that steady_clock does not see.
using lease_clock_source = std::int64_t (*)() noexcept;
void set_lease_clock_for_testing(lease_clock_source source) noexcept;

// This thread's serial number: 1, 2, 3... in the order threads first ask,
// never reused within the process. std::thread::id values are reused as soon
// as a thread exits, so they cannot tell a new thread from a dead one.
std::uint64_t thread_serial() noexcept;

// a + b, clamped to the range of int64 instead of overflowing.
std::int64_t saturating_add(std::int64_t a, std::int64_t b) noexcept;
// ms as nanoseconds, clamped instead of overflowing.
std::int64_t ms_to_ns(std::int64_t ms) noexcept;

}  // namespace sqlock::detail
