#include "core/client_impl.hpp"
#include "watchdog/clock.hpp"

#include <sqlock/errors.hpp>
#include <sqlock/lease.hpp>

#include <spdlog/spdlog.h>

namespace sqlock {

lease::lease(detail::grant_ref g) noexcept : grant_(std::move(g.g)), user_(std::move(g.user)) {}

// The library never moves a lease (client.cpp builds each one in place), so
// a move is the application's: the lease may now live on another thread, and
// no thread may reenter its grant any more.
lease::lease(lease&& other) noexcept
    : grant_(std::move(other.grant_)), user_(std::move(other.user_)), released_(other.released_) {
    other.released_ = true;
    if (grant_) grant_->client->end_reentry(*grant_);
}

lease& lease::operator=(lease&& other) noexcept {
    if (this != &other) {
        release_quietly();
        grant_ = std::move(other.grant_);
        user_ = std::move(other.user_);
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

// A moved-from lease has no grant: it answers as a lease that holds nothing.
namespace {
const std::string nothing;
}

const std::string& lease::key() const { return grant_ ? grant_->key : nothing; }
const std::string& lease::owner() const { return grant_ ? grant_->owner : nothing; }
std::int64_t lease::token() const { return grant_ ? grant_->token : 0; }
sqlock::mode lease::mode() const { return grant_ ? grant_->mode : mode::conditional_update; }

lease_kind lease::kind() const {
    if (!grant_) return lease_kind::exclusive;
    return grant_->kind == 'S' ? lease_kind::shared : grant_->kind == 'P' ? lease_kind::permit : lease_kind::exclusive;
}

const char* to_string(lease_kind k) noexcept {
    switch (k) {
        case lease_kind::exclusive: return "exclusive";
        case lease_kind::shared: return "shared";
        case lease_kind::permit: return "permit";
    }
    return "unknown";
}

bool lease::lost() const {
    if (!grant_ || grant_->lost.load()) return true;
    if (detail::lease_now_ns() >= grant_->deadline_ns.load()) {
        grant_->client->mark_lost(*grant_, loss_cause::deadline);
        return true;
    }
    return false;
}

void lease::check() const {
    if (!grant_) throw lease_lost_error("this lease was moved from: it holds nothing");
    if (lost())
        throw lease_lost_error("lease on '" + grant_->key + "' (token " + std::to_string(grant_->token) +
                               ") is lost: stop work that relies on it");
}

std::stop_token lease::stop_token() const { return grant_ ? grant_->stop.get_token() : std::stop_token(); }

lease_clock::time_point lease::deadline() const {
    return lease_clock::time_point(lease_clock::duration(grant_ ? grant_->deadline_ns.load() : 0));
}

bool lease::renew() {
    if (released_ || !grant_) return false;
    if (lost()) return false;
    return grant_->client->renew(*grant_);
}

std::string_view lease::dialect() const { return grant_ ? grant_->client->dialect().name() : std::string_view(); }

std::string lease::fence_sql() const { return detail::lease_access::fenceable(*this).client->dialect().fence_sql(); }

void lease::release() {
    if (released_ || !grant_) return;
    released_ = true;
    grant_->client->release(*grant_);
}

}  // namespace sqlock
