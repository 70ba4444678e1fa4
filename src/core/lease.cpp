#include "core/client_impl.hpp"

#include <sqlock/errors.hpp>
#include <sqlock/lease.hpp>

#include <spdlog/spdlog.h>

namespace sqlock {

lease::lease(detail::grant_ref g) noexcept : grant_(std::move(g.g)) {}

// The library never moves a lease (client.cpp builds each one in place), so
// a move is the application's: the lease may now live on another thread, and
// no thread may reenter its grant any more.
lease::lease(lease&& other) noexcept : grant_(std::move(other.grant_)), released_(other.released_) {
    other.released_ = true;
    if (grant_) grant_->client->end_reentry(*grant_);
}

lease& lease::operator=(lease&& other) noexcept {
    if (this != &other) {
        release_quietly();
        grant_ = std::move(other.grant_);
        released_ = other.released_;
        other.released_ = true;
        if (grant_) grant_->client->end_reentry(*grant_);
    }
    return *this;
}

lease::~lease() { release_quietly(); }

void lease::release_quietly() noexcept {
    if (released_ || !grant_) return;
    try {
        release();
    } catch (const std::exception& e) {
        // Destructors never throw; the lease expires by itself on the server.
        try {
            grant_->client->log().warn("releasing '{}' failed: {} (the lease expires on its own)", grant_->key,
                                       e.what());
        } catch (...) {
        }
    } catch (...) {
    }
}

const std::string& lease::key() const { return grant_->key; }
const std::string& lease::owner() const { return grant_->owner; }
std::int64_t lease::token() const { return grant_->token; }
sqlock::mode lease::mode() const { return grant_->mode; }

bool lease::lost() const {
    if (grant_->lost.load()) return true;
    if (detail::lease_now_ns() >= grant_->deadline_ns.load()) {
        grant_->client->mark_lost(*grant_);
        return true;
    }
    return false;
}

void lease::check() const {
    if (lost())
        throw lease_lost_error("lease on '" + grant_->key + "' (token " + std::to_string(grant_->token) +
                               ") is lost: stop work that relies on it");
}

std::stop_token lease::stop_token() const { return grant_->stop.get_token(); }

lease_clock::time_point lease::deadline() const {
    return lease_clock::time_point(lease_clock::duration(grant_->deadline_ns.load()));
}

bool lease::renew() {
    if (released_) return false;
    if (lost()) return false;
    return grant_->client->renew(*grant_);
}

std::string_view lease::dialect() const { return grant_->client->dialect().name(); }

std::string lease::fence_sql() const {
    const auto d = dialect();
    if (d == "postgres") return "SELECT " + grant_->client->sql().prefix() + "assert_held($1, $2)";
    if (d == "mysql") return "SELECT " + grant_->client->sql().prefix() + "assert_held(?, ?)";
    throw config_error("SQLite has no stored functions: fence a write with sqlock::sqlite::fence (sqlock/sqlite.hpp)");
}

void lease::release() {
    if (released_ || !grant_) return;
    released_ = true;
    grant_->client->release(*grant_);
}

}  // namespace sqlock
