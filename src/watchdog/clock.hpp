#pragma once
// The clock lease deadlines live on. Internal; sqlock::lease_clock
// (sqlock/lease.hpp) is the public face.

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

}  // namespace sqlock::detail
