// sqlock::multi_lease and the pieces of a multi-key lock that are not the
// acquisition itself (that is in acquire.cpp): the set's loss signals, its
// key checks, and the client's facade for it.

#include "core/client_impl.hpp"
#include "core/lease_set.hpp"
#include "core/validate.hpp"

#include <sqlock/client.hpp>
#include <sqlock/errors.hpp>
#include <sqlock/multi_lease.hpp>

#include <spdlog/spdlog.h>

#include <algorithm>
#include <exception>

namespace sqlock {
namespace detail {

void set_signals::lost(const std::string& key, std::int64_t token) {
    {
        std::lock_guard lock(mu_);
        if (!armed_ || fired_) return;
        fired_ = true;
    }
    if (on_lost_) on_lost_(key, token);
}

void set_signals::arm() {
    std::lock_guard lock(mu_);
    armed_ = true;
}

lock_options round_options(const lock_options& options, const std::shared_ptr<set_signals>& signals) {
    lock_options out = options;
    out.reentrant = false;
    if (options.on_lost)
        out.on_lost = [signals](const std::string& key, std::int64_t token) { signals->lost(key, token); };
    return out;
}

std::vector<std::string> canonical_keys(const std::vector<std::string>& keys) {
    if (keys.empty()) throw config_error("a multi-key lock needs at least one key");
    if (keys.size() > max_keys_per_set)
        throw config_error("a multi-key lock takes at most " + std::to_string(max_keys_per_set) + " keys, not " +
                           std::to_string(keys.size()) + ": split the set, or lock a key that stands for the group");
    for (const auto& k : keys) validate_key(k);
    std::vector<std::string> out = keys;
    // By bytes (std::string compares as unsigned char), the order of the
    // key columns' binary collation on every backend.
    std::sort(out.begin(), out.end());
    if (auto dup = std::adjacent_find(out.begin(), out.end()); dup != out.end())
        throw config_error("key '" + *dup + "' is listed twice in a multi-key lock: list each key once");
    return out;
}

void check_set_options(const lock_options& options) {
    if (options.mode == mode::select_for_update)
        throw config_error("a multi-key lock is held with leases: use conditional_update (the default) or "
                           "unique_insert, not select_for_update (a pinned connection per key)");
}

}  // namespace detail

// --- the client's facade -----------------------------------------------------------

void client::check_keys(const std::vector<std::string>& keys) { (void)detail::canonical_keys(keys); }

std::optional<multi_lease> client::try_acquire_all(const std::vector<std::string>& keys,
                                                   const lock_options& options) {
    auto sorted = detail::canonical_keys(keys);
    detail::check_set_options(options);
    auto set = impl_->try_acquire_set(sorted, options);
    if (set.grants.empty()) return std::nullopt;
    return std::optional<multi_lease>(std::in_place, impl_->hand_out(std::move(sorted), std::move(set), impl_));
}

multi_lease client::acquire_all(const std::vector<std::string>& keys, std::chrono::milliseconds timeout,
                                const lock_options& options) {
    auto sorted = detail::canonical_keys(keys);
    detail::check_set_options(options);
    auto set = impl_->acquire_set(sorted, timeout, options);
    return multi_lease(impl_->hand_out(std::move(sorted), std::move(set), impl_));
}

// --- multi_lease ----------------------------------------------------------------------

namespace {
const std::vector<std::string> no_keys;
const std::vector<lease> no_leases;
}  // namespace

multi_lease::multi_lease(detail::lease_set_ref s) noexcept : set_(std::move(s.s)) {}
multi_lease::multi_lease(multi_lease&& other) noexcept = default;

multi_lease& multi_lease::operator=(multi_lease&& other) noexcept {
    if (this != &other) {
        release_quietly();
        set_ = std::move(other.set_);
    }
    return *this;
}

multi_lease::~multi_lease() { release_quietly(); }

// Last key first, each by its lease's destructor, which never throws and
// logs a failure (the key then expires on its own).
void multi_lease::release_quietly() noexcept {
    if (!set_ || set_->released) return;
    set_->released = true;
    for (auto it = set_->leases.rbegin(); it != set_->leases.rend(); ++it) {
        lease gone = std::move(*it);
    }
}

const std::vector<std::string>& multi_lease::keys() const { return set_ ? set_->keys : no_keys; }
const std::vector<lease>& multi_lease::leases() const { return set_ ? set_->leases : no_leases; }

std::vector<std::int64_t> multi_lease::tokens() const {
    std::vector<std::int64_t> out;
    for (const auto& l : leases()) out.push_back(l.token());
    return out;
}

const lease& multi_lease::at(std::string_view key) const {
    const auto& k = keys();
    const auto it = std::lower_bound(k.begin(), k.end(), key);
    if (it == k.end() || *it != key) throw config_error("'" + std::string(key) + "' is not a key of this multi-key lock");
    return leases()[static_cast<std::size_t>(it - k.begin())];
}

std::int64_t multi_lease::token(std::string_view key) const { return at(key).token(); }

sqlock::mode multi_lease::mode() const { return leases().empty() ? mode::conditional_update : leases().front().mode(); }

bool multi_lease::lost() const {
    if (!set_) return true;
    // Every lease is asked: each one past its deadline is declared lost now.
    bool any = false;
    for (const auto& l : set_->leases) any = l.lost() || any;
    return any;
}

lease_clock::time_point multi_lease::deadline() const {
    if (!set_ || set_->leases.empty()) return lease_clock::time_point{};
    auto earliest = lease_clock::time_point::max();
    for (const auto& l : set_->leases) earliest = std::min(earliest, l.deadline());
    return earliest;
}

void multi_lease::check() const {
    if (!set_) throw lease_lost_error("this multi-key lease was moved from: it holds nothing");
    for (const auto& l : set_->leases)
        if (l.lost())
            throw lease_lost_error("multi-key lease is lost: '" + l.key() + "' (token " + std::to_string(l.token()) +
                                   ") is lost; stop work that relies on the set");
}

std::stop_token multi_lease::stop_token() const { return set_ ? set_->stop.get_token() : std::stop_token(); }

bool multi_lease::renew() {
    if (!set_ || set_->released) return false;
    bool all = true;
    for (auto& l : set_->leases) all = l.renew() && all;
    return all;
}

void multi_lease::release() {
    if (!set_ || set_->released) return;
    set_->released = true;
    std::exception_ptr first;
    for (auto it = set_->leases.rbegin(); it != set_->leases.rend(); ++it) {
        try {
            it->release();
        } catch (...) {
            if (!first) first = std::current_exception();
        }
    }
    if (first) std::rethrow_exception(first);
}

}  // namespace sqlock
