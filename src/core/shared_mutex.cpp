#include <sqlock/errors.hpp>
#include <sqlock/shared_mutex.hpp>

#include "core/exclusive_turn.hpp"

#include <mutex>

namespace sqlock {

shared_mutex::shared_mutex(client c, std::string key, lock_options options)
    : client_(std::move(c)),
      key_(std::move(key)),
      options_(std::move(options)),
      writer_(std::make_unique<detail::exclusive_turn>()) {
    options_.reentrant = false;  // one object is one lock, as for std::shared_mutex
}

shared_mutex::~shared_mutex() = default;

void shared_mutex::lock() { writer_->lock(client_, key_, options_, wait_forever); }

bool shared_mutex::try_lock() { return writer_->lock(client_, key_, options_, std::chrono::milliseconds::zero()); }

bool shared_mutex::lock_within(std::chrono::milliseconds timeout) {
    return writer_->lock(client_, key_, options_, timeout);
}

void shared_mutex::unlock() { writer_->unlock(); }

void shared_mutex::lock_shared() { lock_shared_within(wait_forever); }

bool shared_mutex::try_lock_shared() { return lock_shared_within(std::chrono::milliseconds::zero()); }

bool shared_mutex::lock_shared_within(std::chrono::milliseconds timeout) {
    if (timeout <= std::chrono::milliseconds::zero()) {
        auto got = client_.try_acquire_shared(key_, options_);
        if (!got) return false;
        keep_shared(std::move(*got));
        return true;
    }
    try {
        keep_shared(client_.acquire_shared(key_, timeout, options_));
        return true;
    } catch (const timeout_error&) {
        return false;
    }
}

void shared_mutex::keep_shared(lease l) {
    std::lock_guard g(mu_);
    shared_[std::this_thread::get_id()].push_back(std::move(l));
}

void shared_mutex::unlock_shared() {
    std::optional<lease> l;
    {
        std::lock_guard g(mu_);
        auto it = shared_.find(std::this_thread::get_id());
        if (it == shared_.end() || it->second.empty()) return;
        l.emplace(std::move(it->second.back()));
        it->second.pop_back();
        if (it->second.empty()) shared_.erase(it);
    }
    l.reset();  // released by the lease's destructor: never thrown (see exclusive_turn::unlock)
}

}  // namespace sqlock
