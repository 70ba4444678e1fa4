#pragma once
// What one client last learned of the keys it was granted on MariaDB: the
// key's fencing counter and whether the key was lean then
// (migrations/mysql/0014_lean_grants.sql). The lean grant is a compare and
// set on that counter: one UPDATE whose new token is the remembered one plus
// one, so it needs no second round trip to read the token back (MariaDB has
// no UPDATE ... RETURNING). A stale entry costs one UPDATE that matches
// nothing, then the grant procedure; it can never make a token wrong, since
// the database only takes the set when its counter is the remembered one.
//
// Safe for concurrent use by every session of the client.

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

namespace sqlock::detail::mysql {

class lean_memo {
public:
    struct entry {
        std::int64_t token = 0;
        bool lean = false;
    };

    std::optional<entry> find(std::string_view key) const {
        std::lock_guard l(mu_);
        auto it = keys_.find(std::string(key));
        if (it == keys_.end()) return std::nullopt;
        return it->second;
    }

    void remember(std::string_view key, entry e) {
        std::lock_guard l(mu_);
        // Bounded: a client that touches ever new keys forgets them all at
        // once now and then, which costs each of them one procedure call.
        if (keys_.size() >= capacity && !keys_.contains(std::string(key))) keys_.clear();
        keys_.insert_or_assign(std::string(key), e);
    }

    // A lean release matched nothing: somebody queued, or the lease is gone.
    void not_lean(std::string_view key) {
        std::lock_guard l(mu_);
        if (auto it = keys_.find(std::string(key)); it != keys_.end()) it->second.lean = false;
    }

private:
    static constexpr std::size_t capacity = 4096;
    mutable std::mutex mu_;
    std::unordered_map<std::string, entry> keys_;
};

}  // namespace sqlock::detail::mysql
