#include <sqlock/errors.hpp>
#include <sqlock/mutex.hpp>

#include <system_error>

namespace sqlock {

mutex::mutex(client c, std::string key, lock_options options)
    : client_(std::move(c)), key_(std::move(key)), options_(std::move(options)) {
    // One mutex object is one lock: nested lock() is an error, as for std::timed_mutex.
    options_.reentrant = false;
}

void mutex::lock() {
    if (held_) throw std::system_error(std::make_error_code(std::errc::resource_deadlock_would_occur));
    held_.emplace(client_.acquire(key_, wait_forever, options_));
}

bool mutex::try_lock() {
    if (held_) throw std::system_error(std::make_error_code(std::errc::resource_deadlock_would_occur));
    held_ = client_.try_acquire(key_, options_);
    return held_.has_value();
}

bool mutex::lock_within(std::chrono::milliseconds timeout) {
    if (timeout <= std::chrono::milliseconds::zero()) return try_lock();
    if (held_) throw std::system_error(std::make_error_code(std::errc::resource_deadlock_would_occur));
    try {
        held_.emplace(client_.acquire(key_, timeout, options_));
        return true;
    } catch (const timeout_error&) {
        return false;
    }
}

void mutex::unlock() {
    if (!held_) return;
    auto l = std::move(*held_);
    held_.reset();
    l.release();
}

}  // namespace sqlock
