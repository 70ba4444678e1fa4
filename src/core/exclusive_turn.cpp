#include "core/exclusive_turn.hpp"

#include <sqlock/errors.hpp>

#include <system_error>

namespace sqlock::detail {

bool exclusive_turn::lock(client& c, const std::string& key, const lock_options& options,
                          std::chrono::milliseconds timeout) {
    // Beyond a century is for ever (and would overflow the steady clock).
    const bool forever = timeout >= std::chrono::hours(24 * 365 * 100);
    const auto deadline = std::chrono::steady_clock::now() + (forever ? std::chrono::milliseconds::zero() : timeout);
    {
        std::unique_lock l(mu_);
        if (inside_ == std::this_thread::get_id())
            throw std::system_error(std::make_error_code(std::errc::resource_deadlock_would_occur));
        const auto free = [&] { return !inside_; };
        if (!(forever ? left_.wait(l, options.cancel, free) : left_.wait_until(l, options.cancel, deadline, free))) {
            // Another thread of ours still holds it (try_lock: at once).
            if (timeout > std::chrono::milliseconds::zero() && options.cancel.stop_requested())
                throw cancelled_error("lock of " + key + " was cancelled");
            return false;
        }
        inside_ = std::this_thread::get_id();
    }
    std::optional<lease> got;
    try {
        const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
        if (!forever && left <= std::chrono::milliseconds::zero()) {
            got = c.try_acquire(key, options);
        } else {
            got.emplace(c.acquire(key, forever ? wait_forever : left, options));
        }
    } catch (const timeout_error&) {
    } catch (...) {
        leave();
        throw;
    }
    if (!got) {
        leave();
        return false;
    }
    std::lock_guard l(mu_);
    held_ = std::move(got);
    return true;
}

void exclusive_turn::unlock() {
    std::optional<lease> l;
    {
        std::lock_guard g(mu_);
        if (!inside_ || !held_) return;
        l.swap(held_);
    }
    // Released before the next thread asks, so that its first attempt finds
    // the key free. Never thrown: unlock() runs in std::lock_guard's and
    // std::unique_lock's destructors, which are noexcept (a throw there
    // terminates the process). The lease's destructor logs a release that
    // fails, and the lease then expires on its own; the turn passes on.
    l.reset();
    leave();
}

const lease* exclusive_turn::held() const noexcept {
    std::lock_guard g(mu_);
    return held_ ? &*held_ : nullptr;
}

void exclusive_turn::leave() {
    {
        std::lock_guard g(mu_);
        inside_.reset();
    }
    left_.notify_all();  // all: one whose wait just timed out may take a notify_one
}

}  // namespace sqlock::detail
