#include <sqlock/errors.hpp>
#include <sqlock/shared_mutex.hpp>

#include <mutex>
#include <system_error>

namespace sqlock {

shared_mutex::shared_mutex(client c, std::string key, lock_options options)
    : client_(std::move(c)), key_(std::move(key)), options_(std::move(options)) {
    options_.reentrant = false;  // one object is one lock, as for std::shared_mutex
}

void shared_mutex::lock() { lock_within(wait_forever); }

bool shared_mutex::try_lock() { return lock_within(std::chrono::milliseconds::zero()); }

bool shared_mutex::lock_within(std::chrono::milliseconds timeout) {
    // Beyond a century is forever (and would overflow the steady clock).
    const bool forever = timeout >= std::chrono::hours(24 * 365 * 100);
    const auto deadline = std::chrono::steady_clock::now() + (forever ? std::chrono::milliseconds::zero() : timeout);
    {
        std::unique_lock l(mu_);
        if (writer_ == std::this_thread::get_id())
            throw std::system_error(std::make_error_code(std::errc::resource_deadlock_would_occur));
        if (forever) {
            writer_gone_.wait(l, [&] { return !writer_; });
        } else if (!writer_gone_.wait_until(l, deadline, [&] { return !writer_; })) {
            return false;  // another thread of ours still holds it (try_lock: at once)
        }
        writer_ = std::this_thread::get_id();
    }
    std::optional<lease> got;
    try {
        const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
        if (!forever && left <= std::chrono::milliseconds::zero()) {
            got = client_.try_acquire(key_, options_);
        } else {
            got.emplace(client_.acquire(key_, forever ? wait_forever : left, options_));
        }
    } catch (const timeout_error&) {
    } catch (...) {
        let_next_writer();
        throw;
    }
    if (!got) {
        let_next_writer();
        return false;
    }
    std::lock_guard l(mu_);
    held_ = std::move(got);
    return true;
}

void shared_mutex::unlock() {
    std::optional<lease> l;
    {
        std::lock_guard g(mu_);
        if (!writer_ || !held_) return;
        l.swap(held_);
    }
    // Released before the next thread asks, so that its first attempt finds
    // the key free; the gate opens even if the release fails.
    try {
        l->release();
    } catch (...) {
        let_next_writer();
        throw;
    }
    let_next_writer();
}

void shared_mutex::let_next_writer() {
    {
        std::lock_guard g(mu_);
        writer_.reset();
    }
    writer_gone_.notify_all();  // all: one whose wait just timed out may take a notify_one
}

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
    l->release();
}

}  // namespace sqlock
