#pragma once
// A multi-key lock's state (sqlock::multi_lease): the keys' leases, and the
// signals that make the loss of any key the loss of the set, said once.

#include "core/grant.hpp"

#include <sqlock/lease.hpp>
#include <sqlock/multi_lease.hpp>
#include <sqlock/options.hpp>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <stop_token>
#include <string>
#include <vector>

namespace sqlock::detail {

// The on_lost of one round of a set's grants. Every grant of the round gets
// lost() as its on_lost; the application's on_lost runs once, and only when
// the round granted the whole set and it was handed out (armed): a round
// that gave its keys back never tells anyone.
struct set_signals {
    explicit set_signals(std::function<void(const std::string&, std::int64_t)> on_lost)
        : on_lost_(std::move(on_lost)) {}
    // A grant of the round was lost (on the callback thread).
    void lost(const std::string& key, std::int64_t token);
    // The round is the set handed out: losses count from now on.
    void arm();

private:
    std::function<void(const std::string&, std::int64_t)> on_lost_;
    std::mutex mu_;  // orders arm() and the first lost(); never held across a call out
    bool armed_ = false, fired_ = false;
};

// The options each key of a set is granted with in one round: the
// application's, not reentrant, and on_lost going through `signals`.
lock_options round_options(const lock_options& options, const std::shared_ptr<set_signals>& signals);

// Sorted keys; config_error (before any SQL) for an empty set, more than
// max_keys_per_set keys, a key given twice, or an invalid key.
std::vector<std::string> canonical_keys(const std::vector<std::string>& keys);

// Throws config_error for options a set cannot be taken with.
void check_set_options(const lock_options& options);

struct lease_set {
    std::vector<std::string> keys;  // sorted
    std::vector<lease> leases;      // in keys order
    std::shared_ptr<set_signals> signals;
    std::stop_source stop;  // requested when a key's lease is lost
    // One per key, requesting `stop` when that key's stop is requested.
    // Declared after `stop`: they go first.
    std::vector<std::unique_ptr<std::stop_callback<std::function<void()>>>> watches;
    bool released = false;
};

}  // namespace sqlock::detail
