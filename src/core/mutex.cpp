#include <sqlock/mutex.hpp>

#include "core/exclusive_turn.hpp"

namespace sqlock {

mutex::mutex(client c, std::string key, lock_options options)
    : client_(std::move(c)),
      key_(std::move(key)),
      options_(std::move(options)),
      turn_(std::make_unique<detail::exclusive_turn>()) {
    // One mutex object is one lock: nested lock() is an error, as for std::timed_mutex.
    options_.reentrant = false;
}

mutex::~mutex() = default;

void mutex::lock() { turn_->lock(client_, key_, options_, wait_forever); }

bool mutex::try_lock() { return turn_->lock(client_, key_, options_, std::chrono::milliseconds::zero()); }

bool mutex::lock_within(std::chrono::milliseconds timeout) { return turn_->lock(client_, key_, options_, timeout); }

void mutex::unlock() { turn_->unlock(); }

const lease* mutex::held() const noexcept { return turn_->held(); }

}  // namespace sqlock
