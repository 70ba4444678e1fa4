// Acquisition: one try (try_grant), and the wait for a busy key (acquire):
// a ticket in the wait queue for every waiter (fair ones wait their turn; the
// others cannot be passed by a releaser once they have waited 2 ms), wake-ups
// from releases (in this process directly, from other processes through the
// dialect's doorbell), and jittered exponential backoff bounded by the
// holder's remaining lease for when no wake-up comes.

#include "core/client_impl.hpp"
#include "core/row_lock.hpp"
#include "core/validate.hpp"
#include "dialects/common/fault.hpp"
#include "queue/wait_queue.hpp"
#include "queue/wakeups.hpp"
#include "watchdog/clock.hpp"
#include "watchdog/deadline_timer.hpp"
#include "watchdog/watchdog.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <random>

namespace sqlock::detail {

std::shared_ptr<grant> client_impl::new_grant(std::string_view key, const lock_options& options, char kind) {
    auto g = std::make_shared<grant>();
    g->client = shared_from_this();
    g->key = std::string(key);
    g->owner = new_owner_id();
    g->mode = options.mode;
    g->kind = kind;
    g->lease_ms = options.lease.count();
    g->margin_ms = effective_margin(options).count();
    g->thread = thread_serial();
    g->reentrant = options.reentrant && kind == 'X';
    g->auto_renew = options.auto_renew;
    g->pinged = options.mode == mode::select_for_update;
    g->interval_ns = ms_to_ns(effective_renew_interval(options).count());
    g->on_lost = options.on_lost;
    g->on_renewed = options.on_renewed;
    return g;
}

void client_impl::watch(const std::shared_ptr<grant>& g, const lock_options& options, std::int64_t sent,
                        std::int64_t answered, std::int64_t started) {
    // The database's expiry is its clock at the statement + lease (for
    // select_for_update: the server's idle limit after the last statement);
    // that statement ran after `sent`, so this deadline is never later.
    g->confirmed(sent);
    g->hold_until_ns = options.max_hold.count() > 0 ? saturating_add(sent, ms_to_ns(options.max_hold.count()))
                                                      : never_ns;
    g->granted_ns = answered;
    ++counters_.acquisitions;
    telemetry_.held.fetch_add(1);
    // Told before anyone else learns of the grant, so before any other event of it.
    if (events_) {
        auto e = event_of(*g, event_kind::acquired);
        e.wait = std::chrono::nanoseconds(std::max<std::int64_t>(answered - started, 0));
        e.db_time = std::chrono::nanoseconds(std::max<std::int64_t>(answered - sent, 0));
        post_event(*g, std::move(e));
    }
    if (g->reentrant) reentry_.add(g);
    deadlines_->watch(g);
    watchdog_->watch(g);
    log_->debug("acquired '{}' token {} mode {} owner {}", g->key, g->token, to_string(g->mode), g->owner);
}

// The pool runs a grant again, on a fresh connection, when the connection of
// an idle session failed (pool.hpp); the first run may then have committed
// with its answer lost. A repeat that grants has the key anew under the same
// owner id (the statements re-admit their own owner). A refused repeat —
// a waiter that queued in between is now ahead of the request, or a reader's
// or permit's row of this owner is already there — releases what the first
// run may have left under that owner id, which nobody would renew or
// release: it would keep the key (or a reader's place, or a permit) from
// everyone until it expired.
grant_result client_impl::grant_once(std::string_view key, const std::function<grant_result(session&)>& grant,
                                     const std::function<bool(session&)>& release) {
    int runs = 0;
    bool cleared = false;
    const grant_result r = pool_.with_session([&](session& s) {
        const bool repeat = runs++ > 0;
        const grant_result got = grant(s);
        if (!repeat) {
            fault(fault_point::grant_answered);
        } else if (!got.token) {
            try {
                cleared = release(s);
            } catch (const std::exception& e) {
                log_->warn("'{}': a repeated grant was refused, and releasing what its first run may have "
                           "taken failed (it lasts until its lease runs out): {}",
                           key, e.what());
            }
        }
        return got;
    });
    if (cleared) {
        log_->warn("'{}': the answer to a grant was lost and its repeat was refused; released the first run's "
                   "grant",
                   key);
        wakeups::notify(dialect_->tables(), key);
    }
    return r;
}

client_impl::attempt client_impl::try_grant(std::string_view key, const lock_options& options,
                                            bool want_remaining, std::int64_t ticket, std::int64_t started,
                                            const hold_request& what) {
    validate_key(key);
    validate_lock_options(options);
    check_hold(what, options);
    if (options.mode == mode::select_for_update && !dialect_->capabilities().row_locks)
        throw config_error("select_for_update needs row locks: " + dialect_->no_row_locks_reason() +
                           "; or use conditional_update or unique_insert");
    check_schema();
    if (options.reentrant && what.kind == 'X') {
        if (auto g = reentry_.find(key)) return {std::move(g), true, std::nullopt};
    }
    auto g = new_grant(key, options, what.kind);
    attempt out;
    const std::int64_t sent = lease_now_ns();
    // Not fair: every live fair waiter is ahead, and every waiter that is not
    // fair and has waited 2 ms (sql/*/grant.sql). Fair without a ticket yet:
    // waiters of the same or higher priority are ahead.
    const std::int64_t priority = options.fair ? options.priority : not_fair;
    if (what.kind != 'X') {
        const std::string holder = holder_description();
        const holder_request request{what.kind, key,          g->owner, what.permits, g->lease_ms,
                                     holder,    options.note, ticket,   priority};
        const grant_result r = grant_once(
            key, [&](session& s) { return s.grant_holder(request); },
            [&](session& s) { return s.release_holder(what.kind, key, g->owner); });
        if (!r.token) {
            ++counters_.contention_misses;
            out.remaining_ms = r.remaining_ms;
            return out;
        }
        g->token = *r.token;
    } else if (options.mode == mode::select_for_update) {
        auto taken = row_lock_holder::try_take(pool_, key, g->lease_ms, ticket, priority);
        if (!taken.holder) {
            ++counters_.contention_misses;
            if (want_remaining) out.remaining_ms = taken.remaining_ms;
            return out;
        }
        g->token = taken.token;
        g->row_lock = std::move(taken.holder);
    } else {
        const std::string holder = holder_description();
        const grant_request request{key,           g->owner,       options.mode, g->lease_ms, holder,
                                    options.note, want_remaining, ticket,       priority};
        const grant_result r = grant_once(
            key, [&](session& s) { return s.grant(request); },
            [&](session& s) { return s.release(key, g->owner, options.mode); });
        if (!r.token) {
            ++counters_.contention_misses;
            out.remaining_ms = r.remaining_ms;
            return out;
        }
        g->token = *r.token;
    }
    watch(g, options, sent, lease_now_ns(), started);
    out.granted = std::move(g);
    return out;
}

std::shared_ptr<grant> client_impl::try_acquire(std::string_view key, const lock_options& options,
                                                const hold_request& what) {
    attempt tried;
    try {
        tried = try_grant(key, options, false, no_ticket, lease_now_ns(), what);
    } catch (...) {
        telemetry_.count(acquire_outcome::error);
        throw;
    }
    telemetry_.count(!tried.granted ? acquire_outcome::busy
                     : tried.reentered ? acquire_outcome::reentered
                                       : acquire_outcome::acquired);
    return std::move(tried.granted);
}

std::shared_ptr<grant> client_impl::acquire(std::string_view key, std::chrono::milliseconds timeout,
                                            const lock_options& options, const hold_request& what) {
    try {
        check_hold(what, options);
    } catch (...) {
        telemetry_.count(acquire_outcome::error);
        throw;
    }
    return wait_for("lock '" + std::string(key) + "'", key, timeout, options, what.kind,
                    [&](std::int64_t ticket, std::string_view, std::int64_t started) {
                        return wait_step{try_grant(key, options, true, ticket, started, what), key};
                    });
}

std::shared_ptr<grant> client_impl::wait_for(
    std::string_view what, std::string_view event_key, std::chrono::milliseconds timeout,
    const lock_options& options, char kind,
    const std::function<wait_step(std::int64_t ticket, std::string_view queued, std::int64_t started)>& try_once) {
    const std::int64_t started = lease_now_ns();  // for telemetry; the timeout is kept on steady_clock
    try {
        validate_timeout(timeout);
    } catch (...) {
        telemetry_.count(acquire_outcome::error);
        throw;
    }
    // A timeout too long to add to the clock (~292 years and more) waits forever.
    const auto start = std::chrono::steady_clock::now();
    const bool forever =
        timeout >= std::chrono::floor<std::chrono::milliseconds>(std::chrono::steady_clock::time_point::max() - start);
    const auto deadline = forever ? std::chrono::steady_clock::time_point::max() : start + timeout;
    // Every waiter queues once the key is busy: a fair one for its turn, the
    // others so that a releaser cannot re-win the key over them once they have
    // waited a little (the grant statements: no barging), so that a release
    // can wake the head of the queue where the database carries wake-ups, and
    // so that readers see waiting writers and hold off (docs/design.md,
    // "Shared locks and semaphores"): without that a stream of readers would
    // starve them.
    const bool wake_ups = dialect_->capabilities().wake_ups;
    // Without wake-ups a queued waiter polls; its backoff stays short so that
    // handoffs to it stay prompt.
    const std::int64_t max_backoff_ms = wake_ups ? 1000 : 250;
    thread_local std::minstd_rand jitter(std::random_device{}());
    std::shared_ptr<ticket_timing> queued;
    std::string queued_key;  // the key `queued` waits for
    wakeups::spot spot;      // its place among this process's waiters for that key
    std::stop_callback on_cancel(options.cancel, [&spot] { spot.ring(); });
    // Gives the ticket up: leaves the queue, or (granted) just forgets it,
    // the grant having removed its row.
    auto drop_ticket = [&](bool leave) {
        if (!queued) return;
        telemetry_.waiters.fetch_sub(1);
        // The row goes first: leaving the local queue without the key rings
        // the next local waiter, whose grant must not find this ticket still
        // ahead of it (it would then sleep its backoff with the key free).
        if (leave) queue_->leave(queued);
        else queued.reset();
        spot.leave(!leave);
    };
    bool waited = false;  // the key was busy at least once
    // Counts the call's outcome and its wait; tells a wait that found the key busy.
    auto wait_ended = [&](wait_outcome how, const attempt* granted, const char* why) {
        const std::int64_t now = lease_now_ns();
        telemetry_.wait.observe(now - started);
        telemetry_.count(granted                          ? (granted->reentered ? acquire_outcome::reentered
                                                                                : acquire_outcome::acquired)
                         : how == wait_outcome::timed_out ? acquire_outcome::timeout
                         : how == wait_outcome::cancelled ? acquire_outcome::cancelled
                                                          : acquire_outcome::error);
        if (!waited || !events_) return;
        try {
            lock_event e;
            e.kind = event_kind::waited;
            e.key = std::string(event_key);
            e.mode = options.mode;
            e.outcome = how;
            e.wait = std::chrono::nanoseconds(std::max<std::int64_t>(now - started, 0));
            if (why) e.error = why;
            if (granted) {
                e.token = granted->granted->token;
                e.owner = granted->granted->owner;
                post_event(*granted->granted, std::move(e));  // after the grant's acquired event
            } else {
                events_->post(std::move(e));
            }
        } catch (...) {
            // Out of memory: the event is lost, not the grant or the caller's error.
        }
    };
    std::int64_t backoff_ms = 4;
    try {
        for (;;) {
            const std::uint64_t rings = spot.rings();
            const wait_step step = try_once(queued ? queued->ticket : no_ticket, queued_key, started);
            const attempt& tried = step.got;
            if (tried.granted) {
                drop_ticket(false);  // the grant removed its row
                wait_ended(wait_outcome::acquired, &tried, nullptr);
                return tried.granted;
            }
            waited = true;
            const auto now = std::chrono::steady_clock::now();
            if (now >= deadline)
                throw timeout_error("timed out after " + std::to_string(timeout.count()) + " ms waiting for " +
                                    std::string(what));
            if (options.cancel.stop_requested())
                throw cancelled_error("acquire of " + std::string(what) + " was cancelled");
            if (!queued || queued->gone.load() || queued_key != step.queue_key) {
                // Take a ticket (again, if our row expired: others may have
                // passed it; elsewhere, if a set found another key busy) and
                // try at once: the key may have been freed while we queued.
                // Not when another waiter of this process is ahead in the
                // queue: that one is rung by such a release, and this one
                // could not pass it (a statement saved per acquisition, four
                // on SQLite, where a queued try is a transaction).
                drop_ticket(true);
                const std::string ticket_owner = new_owner_id();
                queued_key = std::string(step.queue_key);
                queued = queue_->enqueue(queued_key, options, ticket_owner, holder_description(), kind);
                telemetry_.waiters.fetch_add(1);
                spot.place(dialect_->tables(), queued_key, kind, options.fair, options.priority, queued->ticket);
                if (events_) {
                    lock_event e;
                    e.kind = event_kind::queued;
                    e.key = queued_key;
                    e.owner = ticket_owner;
                    e.mode = options.mode;
                    e.ticket = queued->ticket;
                    events_->post(std::move(e));
                }
                if (spot.heads()) continue;
            }
            // Exponential backoff with jitter, but never sleep past the moment
            // the holder's lease runs out: that is when the key can next be free.
            std::int64_t sleep_ms = std::uniform_int_distribution<std::int64_t>(backoff_ms / 2, backoff_ms)(jitter);
            if (tried.remaining_ms) sleep_ms = std::min(sleep_ms, *tried.remaining_ms + 1);
            sleep_ms = std::max<std::int64_t>(sleep_ms, 1);
            backoff_ms = std::min(backoff_ms * 2, max_backoff_ms);
            // A waiter behind another of this process's waiters cannot take the
            // key before that one has: it is rung when it heads the queue, and
            // meanwhile polls only at the slowest rate.
            const auto wake_at = std::min(now + std::chrono::milliseconds(sleep_ms), deadline);
            const auto behind_until = std::min(now + std::chrono::milliseconds(max_backoff_ms), deadline);
            dialect_->idle();
            spot.wait(rings, wake_at, std::max(wake_at, behind_until),
                      [&] { return options.cancel.stop_requested() || (queued && queued->gone.load()); });
        }
    } catch (const timeout_error&) {
        drop_ticket(true);
        wait_ended(wait_outcome::timed_out, nullptr, nullptr);
        throw;
    } catch (const cancelled_error&) {
        drop_ticket(true);
        wait_ended(wait_outcome::cancelled, nullptr, nullptr);
        throw;
    } catch (const std::exception& e) {
        drop_ticket(true);
        wait_ended(wait_outcome::failed, nullptr, e.what());
        throw;
    } catch (...) {
        drop_ticket(true);
        wait_ended(wait_outcome::failed, nullptr, "a non-standard exception");
        throw;
    }
}

// --- multi-key locks ------------------------------------------------------------

void client_impl::give_back(std::vector<std::shared_ptr<grant>>& grants) noexcept {
    for (auto it = grants.rbegin(); it != grants.rend(); ++it) {
        try {
            release(**it);
        } catch (const std::exception& e) {
            log_->warn("giving back '{}' of an unfinished set failed: {} (the lease expires on its own)", (*it)->key,
                       e.what());
        } catch (...) {
        }
    }
    grants.clear();
}

client_impl::set_attempt client_impl::try_grant_set(const std::vector<std::string>& keys,
                                                    const lock_options& options, std::int64_t ticket,
                                                    std::string_view ticket_key, std::int64_t started,
                                                    granted_set* held) {
    set_attempt out;
    if (held && !held->signals) held->signals = std::make_shared<set_signals>(options.on_lost);
    out.granted.signals = held ? held->signals : std::make_shared<set_signals>(options.on_lost);
    const lock_options round = round_options(options, out.granted.signals);
    // Key order, except that the key this set queues for (the one it last
    // found busy) goes first: while it stays busy a round touches no other
    // key. Every try is a try: nothing here waits while holding a key. A
    // set that holds keys between rounds goes strictly in key order, after
    // the ones it holds: two such sets then meet at their first common key,
    // and no cycle of waits can form among callers that wait in key order.
    const std::size_t first = held ? held->grants.size() : 0;
    std::vector<std::size_t> order;
    for (std::size_t i = first; i < keys.size(); ++i) order.push_back(i);
    const auto queued = std::find(keys.begin(), keys.end(), ticket_key);
    if (!held && queued != keys.end())
        std::rotate(order.begin(), order.begin() + (queued - keys.begin()),
                    order.begin() + (queued - keys.begin()) + 1);
    std::vector<std::shared_ptr<grant>> taken;  // in the order taken
    taken.reserve(keys.size());
    try {
        for (const std::size_t i : order) {
            auto tried = try_grant(keys[i], round, true, keys[i] == ticket_key ? ticket : no_ticket, started);
            if (!tried.granted) {
                // A set that holds nothing between rounds gives back what
                // this round took before the caller waits; one that holds
                // keeps it, the keys before the busy one in key order.
                if (held) {
                    for (auto& g : taken) held->grants.push_back(std::move(g));
                    taken.clear();
                } else {
                    give_back(taken);
                }
                out.missing = i;
                out.remaining_ms = tried.remaining_ms;
                return out;
            }
            taken.push_back(std::move(tried.granted));
        }
    } catch (...) {
        give_back(taken);
        throw;
    }
    auto& grants = out.granted.grants;
    if (held) {
        grants = std::move(held->grants);
        held->grants.clear();
        for (auto& g : taken) grants.push_back(std::move(g));
        return out;
    }
    grants.resize(keys.size());
    for (std::size_t n = 0; n < order.size(); ++n) grants[order[n]] = std::move(taken[n]);
    return out;
}

client_impl::granted_set client_impl::try_acquire_set(const std::vector<std::string>& keys,
                                                      const lock_options& options) {
    set_attempt tried;
    try {
        tried = try_grant_set(keys, options, no_ticket, {}, lease_now_ns());
    } catch (...) {
        telemetry_.count(acquire_outcome::error);
        throw;
    }
    telemetry_.count(tried.granted.grants.empty() ? acquire_outcome::busy : acquire_outcome::acquired);
    return std::move(tried.granted);
}

client_impl::granted_set client_impl::acquire_set(const std::vector<std::string>& keys,
                                                  std::chrono::milliseconds timeout, const lock_options& options) {
    std::string what = "locks";
    for (const auto& k : keys) what += (&k == &keys.front() ? " '" : ", '") + k + "'";
    granted_set granted;
    // A set that gives back every key it took whenever the next is busy can
    // starve: with each key always waited for by single-key callers, it
    // reaches the head of one key's queue, gets that key, finds the next one
    // waited for by someone who has waited longer, gives the first back and
    // queues at the back of the second's queue, round after round. Once it
    // has waited hold_after, it keeps what it gets, in key order, while it
    // waits in the next key's queue: single-key callers never wait while
    // holding, and sets that hold take their keys in one order, so no
    // cycle of waits forms (docs/design.md, "Multi-key locks").
    constexpr auto hold_after = std::chrono::milliseconds(200);
    const auto hold_from = std::chrono::steady_clock::now() + hold_after;
    granted_set held;
    try {
        (void)wait_for(what, keys.front(), timeout, options, 'X',
                       [&](std::int64_t ticket, std::string_view queued, std::int64_t started) {
                           // A key lost while held and waited with: start again, holding
                           // nothing, with signals of its own: the lost grant's on_lost may
                           // still be queued on the callback thread, and must not reach the
                           // set handed out later (once armed, it would fire the set's
                           // on_lost for a key it holds, and spend its one loss report).
                           if (std::any_of(held.grants.begin(), held.grants.end(),
                                           [](const auto& g) { return g->lost.load(); })) {
                               give_back(held.grants);
                               held.signals.reset();
                           }
                           const bool hold =
                               !held.grants.empty() || std::chrono::steady_clock::now() >= hold_from;
                           auto round = try_grant_set(keys, options, ticket, queued, started, hold ? &held : nullptr);
                           wait_step step;
                           if (round.granted.grants.empty()) {
                               step.queue_key = keys[round.missing];
                               step.got.remaining_ms = round.remaining_ms;
                               return step;
                           }
                           granted = std::move(round.granted);
                           step.got.granted = granted.grants.front();  // the set's events name its first key
                           return step;
                       });
    } catch (...) {
        give_back(held.grants);  // a timeout, cancellation or failure leaves no key held
        throw;
    }
    return granted;
}

lease_set_ref client_impl::hand_out(std::vector<std::string> keys, granted_set set, std::shared_ptr<const void> user) {
    auto out = std::make_shared<lease_set>();
    out->keys = std::move(keys);
    out->signals = std::move(set.signals);
    out->leases.reserve(set.grants.size());
    out->watches.reserve(set.grants.size());
    for (auto& g : set.grants) {
        out->watches.push_back(std::make_unique<std::stop_callback<std::function<void()>>>(
            g->stop.get_token(), std::function<void()>([s = out->stop] () mutable { s.request_stop(); })));
        out->leases.emplace_back(grant_ref{g, user});
    }
    out->signals->arm();
    // A key lost before the set was armed told nobody: tell it now, once.
    for (auto& g : set.grants) {
        if (g->lost.load() && g->on_lost) {
            post(*g, &grant::on_lost, "on_lost");
            break;
        }
    }
    return {std::move(out)};
}

void client_impl::check_hold(const hold_request& what, const lock_options& options) const {
    if (what.kind == 'X') return;
    const char* name = what.kind == 'S' ? "a shared lock" : "a semaphore permit";
    if (options.mode == mode::select_for_update)
        throw config_error(std::string("select_for_update is for exclusive locks; ") + name +
                           " is a lease: use conditional_update (the default) or unique_insert");
    if (what.kind == 'P') validate_permits(what.permits);
}

void client_impl::set_permits(std::string_view name, std::int64_t permits) {
    validate_key(name);
    validate_permits(permits);
    check_schema();
    with_session([&](session& s) { s.set_permits(name, permits); });
}

std::vector<holder_info> client_impl::holders(std::string_view prefix, std::size_t limit) {
    validate_prefix(prefix);
    if (limit < 1) throw config_error("limit must be at least 1");
    check_schema();
    const auto rows = with_session([&](session& s) { return s.holders(prefix, limit); });
    std::vector<holder_info> out;
    out.reserve(rows.size());
    for (const auto& r : rows)
        out.push_back({.key = r.key,
                       .kind = r.kind == 'S' ? lease_kind::shared : lease_kind::permit,
                       .owner = r.owner,
                       .token = r.token,
                       .holder = r.holder,
                       .note = r.note,
                       .expires_in = std::chrono::milliseconds(r.remaining_ms),
                       .permits = r.permits});
    return out;
}

}  // namespace sqlock::detail
