// A held lease's operations (release, renew, loss) and the watchdog's work
// on the database (the keeper: renew a batch, renew one alone, ping a row
// lock, heartbeat tickets, sweep). When to do that work is the watchdog's
// business (src/watchdog/schedule.cpp).

#include "core/client_impl.hpp"
#include "core/row_lock.hpp"
#include "queue/wait_queue.hpp"
#include "queue/wakeups.hpp"
#include "sweeper/sweeper.hpp"
#include "watchdog/callbacks.hpp"
#include "watchdog/clock.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>

namespace sqlock::detail {

void client_impl::mark_lost(grant& g) {
    // A released lease is not lost: a release deletes or clears the row,
    // which a racing renewal would otherwise read as a takeover.
    if (!g.released.load()) signal_lost(g);
}

void client_impl::signal_lost(grant& g) {
    if (g.lost.exchange(true)) return;
    ++counters_.leases_lost;
    // A fixed lease running out is what its owner asked for; anything else is news.
    log_->log(g.auto_renew ? spdlog::level::warn : spdlog::level::info, "lease on '{}' (token {}) is lost", g.key,
              g.token);
    g.stop.request_stop();
    if (g.on_lost) post(g, &grant::on_lost, "on_lost");
}

// Runs `which` of the grant's callbacks on the callback thread. The closure
// holds the grant, so the callback runs even if the lease is dropped first.
void client_impl::post(grant& g, std::function<void(const std::string&, std::int64_t)> grant::*which,
                       const char* name) {
    callbacks_->post([g = g.shared_from_this(), which, name] {
        try {
            ((*g).*which)(g->key, g->token);
        } catch (const std::exception& e) {
            g->client->log().error("{} callback for '{}' threw: {}", name, g->key, e.what());
        } catch (...) {
            g->client->log().error("{} callback for '{}' threw a non-standard exception", name, g->key);
        }
    });
}

void client_impl::end_reentry(grant& g) noexcept {
    if (g.reentrant && g.reentry_open.exchange(false)) reentry_.remove(g);
}

bool client_impl::confirm_renewal(grant& g, std::int64_t sent) {
    if (g.lost.load()) return false;  // lost stays lost, whatever a late answer says
    g.confirmed(sent);
    ++counters_.renewals;
    if (g.on_renewed) post(g, &grant::on_renewed, "on_renewed");
    return true;
}

void client_impl::release(grant& g) {
    {
        std::lock_guard lock(g.mu);
        if (g.released.load()) return;
        if (--g.depth > 0) return;
        g.released = true;
    }
    if (g.reentrant) reentry_.remove(g);
    if (g.row_lock) {
        // A lost lease's connection died or misbehaved: never pool it.
        if (!g.row_lock->release(!g.lost.load())) signal_lost(g);
    } else if (!pool_.with_session([&](session& s) { return s.release(g.key, g.owner, g.mode); })) {
        signal_lost(g);  // it had been taken over before this release
    }
    ++counters_.releases;
    wakeups::notify();
    log_->debug("released '{}' token {}", g.key, g.token);
}

bool client_impl::renew(grant& g) {
    if (g.lost.load() || g.released.load()) return false;
    const std::int64_t sent = lease_now_ns();
    if (g.row_lock) {
        switch (g.row_lock->check(g.key, g.token, options().statement_timeout, true)) {
            case row_lock_holder::verdict::held: return confirm_renewal(g, sent);
            case row_lock_holder::verdict::lost: mark_lost(g); return false;
            case row_lock_holder::verdict::skipped: return !g.lost.load();
        }
    }
    switch (pool_.with_session([&](session& s) { return s.renew(g.key, g.owner, g.lease_ms, true); })) {
        case renew_result::renewed: return confirm_renewal(g, sent);
        case renew_result::not_held: mark_lost(g); return false;
        case renew_result::row_locked: break;
    }
    throw db_error(std::string(dialect_->name()), "",
                   "renewing '" + g.key + "': another transaction kept the key's row locked past the row lock "
                   "timeout; the lease is unchanged (lost at its deadline unless a renewal gets through)");
}

// --- the watchdog's work ------------------------------------------------------

std::chrono::milliseconds client_impl::wait_bound(std::int64_t earliest_deadline_ns) const {
    // At least 100 ms: a bound too short to answer in would fail a healthy
    // connection. Zero would mean "the default", so never return it.
    const std::int64_t left_ms = (earliest_deadline_ns - lease_now_ns()) / 1'000'000;
    return std::chrono::milliseconds(std::clamp<std::int64_t>(left_ms, 100, options().statement_timeout.count()));
}

std::vector<keeper::outcome> client_impl::renew(const std::vector<lease_timing*>& batch) {
    std::vector<renewal> items;
    items.reserve(batch.size());
    std::int64_t earliest = never_ns;
    for (auto* l : batch) {
        auto& g = static_cast<grant&>(*l);
        items.push_back({g.key, g.owner, g.lease_ms});
        earliest = std::min(earliest, g.deadline_ns.load());
    }
    const std::int64_t sent = lease_now_ns();
    std::vector<outcome> out(batch.size(), outcome{result::retry, sent});
    std::vector<bool> renewed_now;
    try {
        renewed_now = watchdog_pool_.with_session([&](session& s) {
            s.bound_waits(wait_bound(earliest));
            struct restore {
                session& s;
                ~restore() {
                    try {
                        s.bound_waits(std::chrono::milliseconds::zero());
                    } catch (...) {
                    }
                }
            } restore_bound{s};
            return s.renew_batch(items);
        });
    } catch (const std::exception& e) {
        // Transient (the database is away or slow): retry soon, but never
        // past a lease's deadline, where the deadline timer declares it lost.
        counters_.renewal_failures += batch.size();
        log_->warn("renewing {} lease(s) failed, retrying: {}", batch.size(), e.what());
        return out;
    }
    for (std::size_t i = 0; i < batch.size(); ++i)
        out[i] = renewed_now[i] ? outcome{result::renewed, sent}
                                : renew_alone(static_cast<grant&>(*batch[i]));  // lost, or its row was locked
    return out;
}

// A lease the batch did not renew: renew it by itself, without waiting for a
// locked row (the other leases of the round wait for this one). Only a
// renewal that finds the lease gone makes it lost; a locked row is tried
// again shortly, until the deadline.
keeper::outcome client_impl::renew_alone(grant& g) {
    const std::int64_t sent = lease_now_ns();
    renew_result r;
    try {
        r = watchdog_pool_.with_session([&](session& s) { return s.renew(g.key, g.owner, g.lease_ms, false); });
    } catch (const std::exception& e) {
        ++counters_.renewal_failures;
        log_->warn("renewing '{}' failed, retrying: {}", g.key, e.what());
        return {result::retry, sent};
    }
    switch (r) {
        case renew_result::renewed: return {result::renewed, sent};
        case renew_result::not_held: return {result::lost, sent};
        case renew_result::row_locked: break;
    }
    ++counters_.renewal_failures;
    log_->warn("renewing '{}': another transaction keeps its row locked; retrying until the deadline", g.key);
    return {result::retry, sent};
}

keeper::outcome client_impl::ping(lease_timing& lease) {
    auto& g = static_cast<grant&>(lease);
    const std::int64_t sent = lease_now_ns();
    if (!g.row_lock) return {result::lost, sent};
    switch (g.row_lock->check(g.key, g.token, wait_bound(g.deadline_ns.load()), false)) {
        case row_lock_holder::verdict::held: return {result::renewed, sent};
        case row_lock_holder::verdict::lost: return {result::lost, sent};
        case row_lock_holder::verdict::skipped: break;  // the application's renew() is pinging
    }
    return {result::retry, sent};
}

std::vector<bool> client_impl::heartbeat(const std::vector<ticket_timing*>& batch) {
    return queue_->heartbeat(watchdog_pool_, batch);
}

void client_impl::renewed(lease_timing& lease) {
    auto& g = static_cast<grant&>(lease);
    ++counters_.renewals;
    if (g.on_renewed) post(g, &grant::on_renewed, "on_renewed");
}

void client_impl::lost(lease_timing& lease) { mark_lost(static_cast<grant&>(lease)); }

void client_impl::tickets_gone() { wakeups::notify(); }  // their waiters queue again

std::int64_t client_impl::periodic(std::int64_t now) { return sweeper_->run_due(now, watchdog_pool_); }

}  // namespace sqlock::detail
