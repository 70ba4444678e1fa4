// A held lease's operations (release, renew, loss), the events they make
// (told to the listener on a thread of its own: event_sink), and the
// watchdog's work on the database (the keeper: renew a batch, renew one
// alone, ping a row lock, heartbeat tickets, sweep). When to do that work is
// the watchdog's business (src/watchdog/schedule.cpp).

#include "core/client_impl.hpp"
#include "core/row_lock.hpp"
#include "dialects/common/fault.hpp"
#include "queue/wait_queue.hpp"
#include "queue/wakeups.hpp"
#include "sweeper/sweeper.hpp"
#include "watchdog/callbacks.hpp"
#include "watchdog/clock.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <thread>

namespace sqlock::detail {

namespace {

// A renewal answered at or after the lease's deadline confirms nothing: by
// the client's own count the lease ran out meanwhile, and another owner may
// have been granted the key in between (a renewal that waited for a row
// lock may still find its own row and renew it).
bool answered_late(const grant& g) { return lease_now_ns() >= g.deadline_ns.load(); }

}  // namespace

void client_impl::mark_lost(grant& g, loss_cause cause) {
    // A released lease is not lost: a release deletes or clears the row,
    // which a racing renewal would otherwise read as a takeover.
    if (!g.released.load()) signal_lost(g, cause);
}

void client_impl::end_broken_hold(grant& g, loss_cause cause) {
    // In this order: while the row lock lasts nobody else can take the key,
    // so the holder is told its lease is lost before anyone can win it.
    mark_lost(g, cause);
    g.row_lock->release(g.key, false);  // ends the held transaction (if not ended already); never pooled again
}

void client_impl::signal_lost(grant& g, loss_cause cause) {
    if (g.lost.exchange(true)) return;
    const std::int64_t now = lease_now_ns();
    ++counters_.leases_lost;
    telemetry_.lost[static_cast<std::size_t>(cause)].fetch_add(1);
    end_hold(g, now);
    g.stop.request_stop();
    if (g.on_lost) post(g, &grant::on_lost, "on_lost");
    if (events_) {
        auto e = event_of(g, event_kind::lost);
        e.cause = cause;
        e.hold = std::chrono::nanoseconds(std::max<std::int64_t>(now - g.granted_ns, 0));
        post_event(g, std::move(e));
    }
    // Logged last and on the callback thread: this often runs on the deadline
    // timer's thread, which signals every lease of the client, and a sink
    // that blocks (stderr a full pipe, a stalled journald) held up the stop
    // token and on_lost of this lease and of every lease due after it, past
    // the database's expiry. A fixed lease running out is what its owner
    // asked for; anything else is news.
    callbacks_->post([log = log_, level = g.auto_renew ? spdlog::level::warn : spdlog::level::info, key = g.key,
                      token = g.token, cause] {
        try {
            log->log(level, "lease on '{}' (token {}) is lost ({})", key, token, to_string(cause));
        } catch (...) {
        }
    });
}

// Runs `which` of the grant's callbacks on the callback thread. The closure
// holds the grant, so on_lost runs even if the lease is dropped first (it is
// told exactly once, whenever the loss is found); on_renewed never runs once
// the lease was released (release() waits out a call under way).
void client_impl::post(grant& g, std::function<void(const std::string&, std::int64_t)> grant::*which,
                       const char* name) {
    callbacks_->post([g = g.shared_from_this(), which, name] {
        std::unique_lock<std::mutex> renewing;
        if (which == &grant::on_renewed) {
            renewing = std::unique_lock(g->renewed_mu);
            // Nor once it was lost: a loss found between a renewal's check
            // and this post queued on_lost first, and callbacks run in order.
            if (g->released.load() || g->lost.load()) return;
        }
        try {
            ((*g).*which)(g->key, g->token);
        } catch (const std::exception& e) {
            g->client->log().error("{} callback for '{}' threw: {}", name, g->key, e.what());
        } catch (...) {
            g->client->log().error("{} callback for '{}' threw a non-standard exception", name, g->key);
        }
    });
}

// --- telemetry -----------------------------------------------------------------

void client_impl::end_hold(grant& g, std::int64_t now) noexcept {
    if (g.hold_ended.exchange(true)) return;
    telemetry_.hold.observe(now - g.granted_ns);
    telemetry_.held.fetch_sub(1);
}

lock_event client_impl::event_of(const grant& g, event_kind kind) const {
    lock_event e;
    e.kind = kind;
    e.key = g.key;
    e.token = g.token;
    e.owner = g.owner;
    e.mode = g.mode;
    return e;
}

// Under the grant's mutex, so that a grant's events are queued in the order
// they happened: nothing follows `released`, and a renewal that raced a
// loss or a release is not told after it.
void client_impl::post_event(grant& g, lock_event e) {
    std::lock_guard lock(g.mu);
    if (g.events_closed) return;
    if ((e.kind == event_kind::renewed || e.kind == event_kind::renewal_failed) && (g.lost.load() || g.released.load()))
        return;
    if (e.kind == event_kind::released) g.events_closed = true;
    events_->post(std::move(e));
}

void client_impl::renewal_failed(grant& g, std::int64_t sent, const std::string& why) {
    if (!events_) return;
    auto e = event_of(g, event_kind::renewal_failed);
    e.db_time = std::chrono::nanoseconds(std::max<std::int64_t>(lease_now_ns() - sent, 0));
    e.error = why;
    post_event(g, std::move(e));
}

event_sink::event_sink(std::function<void(const lock_event&)> listener, std::shared_ptr<spdlog::logger> log,
                       std::atomic<std::uint64_t>& dropped)
    : listener_(std::make_shared<const std::function<void(const lock_event&)>>(std::move(listener))),
      log_(std::move(log)),
      dropped_(dropped) {}

void event_sink::close() {
    closed_ = true;
    queue_.stop();
}

void event_sink::post(lock_event e) noexcept {
    if (closed_) return;
    try {
        e.time = std::chrono::system_clock::now();
        auto tell = [listener = listener_, log = log_, e = std::move(e)] {
            try {
                (*listener)(e);
            } catch (const std::exception& x) {
                log->error("the event listener threw on {} of '{}': {}", to_string(e.kind), e.key, x.what());
            } catch (...) {
                log->error("the event listener threw a non-standard exception on {} of '{}'", to_string(e.kind),
                           e.key);
            }
        };
        if (queue_.try_post(std::move(tell), max_pending_events)) {
            dropping_.store(false, std::memory_order_relaxed);
            return;
        }
    } catch (...) {
        // Out of memory: dropped like an event past the limit.
    }
    dropped_.fetch_add(1);
    if (!dropping_.exchange(true))
        log_->warn("the event listener is {} events behind: dropping events until it catches up",
                   max_pending_events);
}

// --- a lease's operations -------------------------------------------------------

void client_impl::end_reentry(grant& g) noexcept {
    if (g.reentrant && g.reentry_open.exchange(false)) reentry_.remove(g);
}

bool client_impl::confirm_renewal(grant& g, std::int64_t sent, std::int64_t db_ns) {
    if (g.lost.load()) return false;  // lost stays lost, whatever a late answer says
    if (answered_late(g)) {
        signal_lost(g, loss_cause::deadline);
        return false;
    }
    g.confirmed(sent);
    ++counters_.renewals;
    fault(fault_point::renewal_confirmed);
    if (g.on_renewed && !g.released.load()) post(g, &grant::on_renewed, "on_renewed");
    if (events_) {
        auto e = event_of(g, event_kind::renewed);
        e.db_time = std::chrono::nanoseconds(db_ns);
        post_event(g, std::move(e));
    }
    // A loss found meanwhile (another thread's lost() past the deadline)
    // stands: renew() does not say true for a lease that is lost.
    return !g.lost.load();
}

void client_impl::release(grant& g) {
    {
        std::lock_guard lock(g.mu);
        if (g.released.load()) return;
        if (--g.depth > 0) return;
        g.released = true;
    }
    // An on_renewed call under way ends before release returns (unless it is
    // that callback releasing its own lease).
    if (g.on_renewed && !callbacks_->on_thread()) std::lock_guard wait_out(g.renewed_mu);
    if (g.reentrant) reentry_.remove(g);
    const std::int64_t began = lease_now_ns();
    auto told = [&](const char* failure) {
        const std::int64_t done = lease_now_ns();
        end_hold(g, done);
        if (!events_) return;
        auto e = event_of(g, event_kind::released);
        e.hold = std::chrono::nanoseconds(std::max<std::int64_t>(done - g.granted_ns, 0));
        e.db_time = std::chrono::nanoseconds(std::max<std::int64_t>(done - began, 0));
        if (failure) e.error = failure;
        post_event(g, std::move(e));
    };
    try {
        if (g.row_lock) {
            // A lost lease's connection died or misbehaved: never pool it.
            if (!g.row_lock->release(g.key, !g.lost.load())) signal_lost(g, loss_cause::connection_lost);
        } else if (g.kind != 'X') {
            if (!pool_.with_session([&](session& s) {
                    fault(fault_point::release_sending);
                    return s.release_holder(g.kind, g.key, g.owner);
                }))
                signal_lost(g, loss_cause::not_held);  // it had expired before this release
        } else if (!pool_.with_session([&](session& s) {
                       fault(fault_point::release_sending);
                       return s.release(g.key, g.owner, g.mode);
                   })) {
            signal_lost(g, loss_cause::not_held);  // it had been taken over before this release
        }
    } catch (const std::exception& e) {
        told(e.what());
        wakeups::notify(dialect_->tables(), g.key);  // the key may be free all the same (the lease ran out)
        throw;
    }
    ++counters_.releases;
    told(nullptr);
    wakeups::notify(dialect_->tables(), g.key);
    log_->debug("released '{}' token {}", g.key, g.token);
}

bool client_impl::renew(grant& g) {
    if (g.lost.load() || g.released.load()) return false;
    const std::int64_t sent = lease_now_ns();
    if (g.row_lock) {
        const auto v = g.row_lock->check(g.key, g.token, options().statement_timeout, true);
        const std::int64_t db_ns = lease_now_ns() - sent;
        switch (v) {
            case row_lock_holder::verdict::held:
                telemetry_.renewal.observe(db_ns);
                return confirm_renewal(g, sent, db_ns);
            case row_lock_holder::verdict::forced:
                telemetry_.renewal.observe(db_ns);
                end_broken_hold(g, loss_cause::forced);
                return false;
            case row_lock_holder::verdict::lost: end_broken_hold(g, loss_cause::connection_lost); return false;
            case row_lock_holder::verdict::skipped: return !g.lost.load();
        }
    }
    // A reader's or permit's key row that a grant or release of the key has
    // locked: PostgreSQL's batched renewal skips it at once (SKIP LOCKED,
    // for the watchdog, which comes back later), where the other backends
    // wait up to the row lock timeout. A caller's renew() waits as long on
    // every backend: tried again until the row lock timeout has passed
    // since the first try.
    const auto give_up = std::chrono::steady_clock::now() + options().row_lock_timeout;
    std::int64_t tried_at = sent;
    renew_result r;
    for (;;) {
        r = pool_.with_session([&](session& s) {
            return g.kind != 'X' ? renew_holder_alone(s, g) : s.renew(g.key, g.owner, g.lease_ms, true);
        });
        if (r != renew_result::row_locked || g.kind == 'X' || std::chrono::steady_clock::now() >= give_up) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
        tried_at = lease_now_ns();
    }
    const std::int64_t db_ns = lease_now_ns() - tried_at;
    telemetry_.renewal.observe(db_ns);
    switch (r) {
        case renew_result::renewed: return confirm_renewal(g, tried_at, db_ns);
        case renew_result::not_held: mark_lost(g, loss_cause::not_held); return false;
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
    // Exclusive leases in one statement, shared holders and permits in
    // another, on the same connection in the same round.
    std::vector<renewal> items, held_items;
    std::vector<std::size_t> index, held_index;
    std::int64_t earliest = never_ns;
    for (std::size_t i = 0; i < batch.size(); ++i) {
        auto& g = static_cast<grant&>(*batch[i]);
        (g.kind == 'X' ? items : held_items).push_back({g.key, g.owner, g.lease_ms, g.kind});
        (g.kind == 'X' ? index : held_index).push_back(i);
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
            std::vector<bool> renewed(batch.size(), false);
            auto scatter = [&](const std::vector<bool>& part, const std::vector<std::size_t>& at) {
                for (std::size_t i = 0; i < part.size(); ++i) renewed[at[i]] = part[i];
            };
            if (!items.empty()) scatter(s.renew_batch(items), index);
            if (!held_items.empty()) scatter(s.renew_holders(held_items), held_index);
            return renewed;
        });
    } catch (const std::exception& e) {
        // Transient (the database is away or slow): retry soon, but never
        // past a lease's deadline, where the deadline timer declares it lost.
        counters_.renewal_failures += batch.size();
        log_->warn("renewing {} lease(s) failed, retrying: {}", batch.size(), e.what());
        if (events_)
            for (auto* l : batch) renewal_failed(static_cast<grant&>(*l), sent, e.what());
        return out;
    }
    const std::int64_t answered = lease_now_ns();
    const std::int64_t db_ns = answered - sent;
    telemetry_.renewal.observe(db_ns);
    // The leases the batch renewed first, judged by when the batch answered,
    // and their new deadlines set now: the one-by-one renewals below take a
    // round trip each (up to the statement timeout on a slow server), and a
    // lease the database had renewed was declared lost meanwhile, at its old
    // deadline or by a late-answer check that read the clock after them.
    for (std::size_t i = 0; i < batch.size(); ++i) {
        if (!renewed_now[i]) continue;
        auto& g = static_cast<grant&>(*batch[i]);
        if (answered >= g.deadline_ns.load()) {
            g.loss_hint = loss_cause::deadline;
            out[i] = outcome{result::lost, sent};
            continue;
        }
        g.renew_db_ns = db_ns;
        if (!g.lost.load()) g.confirmed(sent);  // the watchdog applies the outcome again, to the same deadline
        out[i] = outcome{result::renewed, sent};
    }
    for (std::size_t i = 0; i < batch.size(); ++i)
        if (!renewed_now[i]) out[i] = renew_alone(static_cast<grant&>(*batch[i]));  // lost, or its row was locked
    return out;
}

// A lease the batch did not renew: renew it by itself, without waiting for a
// locked row (the other leases of the round wait for this one). Only a
// renewal that finds the lease gone makes it lost; a locked row is tried
// again shortly, until the deadline.
keeper::outcome client_impl::renew_alone(grant& g) {
    fault(fault_point::renewing_alone);
    const std::int64_t sent = lease_now_ns();
    renew_result r;
    try {
        r = watchdog_pool_.with_session([&](session& s) {
            return g.kind != 'X' ? renew_holder_alone(s, g) : s.renew(g.key, g.owner, g.lease_ms, false);
        });
    } catch (const std::exception& e) {
        ++counters_.renewal_failures;
        log_->warn("renewing '{}' failed, retrying: {}", g.key, e.what());
        renewal_failed(g, sent, e.what());
        return {result::retry, sent};
    }
    const std::int64_t db_ns = lease_now_ns() - sent;
    telemetry_.renewal.observe(db_ns);
    switch (r) {
        case renew_result::renewed:
            if (answered_late(g)) {
                g.loss_hint = loss_cause::deadline;
                return {result::lost, sent};
            }
            g.renew_db_ns = db_ns;
            return {result::renewed, sent};
        case renew_result::not_held: g.loss_hint = loss_cause::not_held; return {result::lost, sent};
        case renew_result::row_locked: break;
    }
    ++counters_.renewal_failures;
    log_->warn("renewing '{}': another transaction keeps its row locked; retrying until the deadline", g.key);
    renewal_failed(g, sent, "another transaction keeps the key's row locked");
    return {result::retry, sent};
}

renew_result client_impl::renew_holder_alone(session& s, const grant& g) {
    if (s.renew_holders({{g.key, g.owner, g.lease_ms, g.kind}}).front()) return renew_result::renewed;
    // Not renewed: gone, or its key's row was locked by a grant or release.
    return s.holder_live(g.kind, g.key, g.owner) ? renew_result::row_locked : renew_result::not_held;
}

keeper::outcome client_impl::ping(lease_timing& lease) {
    auto& g = static_cast<grant&>(lease);
    const std::int64_t sent = lease_now_ns();
    if (!g.row_lock) {
        g.loss_hint = loss_cause::connection_lost;
        return {result::lost, sent};
    }
    const auto v = g.row_lock->check(g.key, g.token, wait_bound(g.deadline_ns.load()), false);
    const std::int64_t db_ns = lease_now_ns() - sent;
    switch (v) {
        case row_lock_holder::verdict::held:
            telemetry_.renewal.observe(db_ns);
            g.renew_db_ns = db_ns;
            return {result::renewed, sent};
        // Told here rather than by the watchdog's lost(), which comes after:
        // the hold must end only once its holder knows.
        case row_lock_holder::verdict::forced:
            telemetry_.renewal.observe(db_ns);
            g.loss_hint = loss_cause::forced;
            end_broken_hold(g, loss_cause::forced);
            return {result::lost, sent};
        case row_lock_holder::verdict::lost:
            g.loss_hint = loss_cause::connection_lost;
            end_broken_hold(g, loss_cause::connection_lost);
            return {result::lost, sent};
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
    fault(fault_point::renewal_confirmed);
    if (g.on_renewed && !g.released.load()) post(g, &grant::on_renewed, "on_renewed");
    if (events_) {
        auto e = event_of(g, event_kind::renewed);
        e.db_time = std::chrono::nanoseconds(g.renew_db_ns.load());
        post_event(g, std::move(e));
    }
}

void client_impl::lost(lease_timing& lease) {
    auto& g = static_cast<grant&>(lease);
    mark_lost(g, g.loss_hint.load());
}

void client_impl::tickets_gone() { wakeups::notify_all(dialect_->tables()); }  // their waiters queue again

std::int64_t client_impl::periodic(std::int64_t now) { return sweeper_->run_due(now, watchdog_pool_); }

}  // namespace sqlock::detail
