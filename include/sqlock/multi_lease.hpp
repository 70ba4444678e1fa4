#pragma once
// sqlock::multi_lease: proof of holding a set of keys, all of them at once
// (client::acquire_all).

#include <sqlock/lease.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <stop_token>
#include <string>
#include <string_view>
#include <vector>

namespace sqlock {

namespace detail {
struct lease_set;
// How the library hands a granted set to a multi_lease; not for applications.
struct lease_set_ref {
    std::shared_ptr<lease_set> s;
};
}  // namespace detail

// The most keys one acquire_all() takes.
inline constexpr std::size_t max_keys_per_set = 64;

// A set of keys held together: one exclusive lease per key underneath, each
// with its own fencing token, renewed by the client's watchdog with its
// other leases. Losing any key is losing the set: lost() turns true, the
// stop token is requested and on_lost runs once, naming the first key found
// lost. Move-only; releases every key when destroyed (never throwing:
// failures there are logged). Usable from any thread, but not from two
// threads at once without external synchronization.
//
// A moved-from multi_lease holds nothing and says so: lost() is true, check()
// throws lease_lost_error, renew() is false, release() does nothing, keys(),
// tokens() and leases() are empty, at() and token() throw config_error,
// mode() is conditional_update, deadline() is lease_clock's epoch, and
// stop_token() is never requested (it has no stop state).
class multi_lease {
public:
    explicit multi_lease(detail::lease_set_ref s) noexcept;
    multi_lease(multi_lease&& other) noexcept;
    multi_lease& operator=(multi_lease&& other) noexcept;
    multi_lease(const multi_lease&) = delete;
    multi_lease& operator=(const multi_lease&) = delete;
    ~multi_lease();

    // The keys, sorted by their bytes (the order they were taken in).
    const std::vector<std::string>& keys() const;
    // Each key's fencing token, in keys() order.
    std::vector<std::int64_t> tokens() const;
    // The fencing token of one of the keys; config_error for a key not in the set.
    std::int64_t token(std::string_view key) const;
    // The lease of each key, in keys() order (for fence_sql() and the
    // per-backend fences of one key). Releasing one of them is releasing
    // that key only; the set is lost from then on.
    const std::vector<lease>& leases() const;
    const lease& at(std::string_view key) const;  // config_error for a key not in the set
    sqlock::mode mode() const;

    // True once any key's lease is lost (or its local deadline passed).
    bool lost() const;
    // The earliest local deadline of the keys' leases (see lease::deadline).
    lease_clock::time_point deadline() const;
    // Throws lease_lost_error, naming the lost key, when lost() is true.
    void check() const;
    // Requested when the first key is lost (on the thread that notices, as
    // for lease::stop_token): poll it or attach a std::stop_callback.
    std::stop_token stop_token() const;

    // Renews every key's lease; true when all of them were renewed.
    bool renew();
    // Gives every key up (in reverse order); idempotent. When a release
    // fails the others are released all the same and the first failure is
    // thrown (the failed key expires at the end of its lease).
    void release();

private:
    void release_quietly() noexcept;
    std::shared_ptr<detail::lease_set> set_;
};

}  // namespace sqlock
