#include "core/client_impl.hpp"
#include "core/validate.hpp"
#include "watchdog/deadline_timer.hpp"
#include "watchdog/watchdog.hpp"

#include <sqlock/client.hpp>
#include <sqlock/errors.hpp>

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <limits>
#include <random>

namespace sqlock {

const char* to_string(mode m) noexcept {
    switch (m) {
        case mode::unique_insert: return "unique_insert";
        case mode::conditional_update: return "conditional_update";
        case mode::select_for_update: return "select_for_update";
    }
    return "unknown";
}

const char* to_string(durability d) noexcept {
    switch (d) {
        case durability::strict: return "strict";
        case durability::relaxed: return "relaxed";
    }
    return "unknown";
}

namespace detail {
namespace {

std::shared_ptr<spdlog::logger> default_logger() {
    // Never touch the application's default logger; share one named "sqlock".
    static std::mutex mu;
    std::lock_guard lock(mu);
    if (auto existing = spdlog::get("sqlock")) return existing;
    return spdlog::stderr_color_mt("sqlock");
}

std::unique_ptr<dialect> make_dialect(const url_parts& url, const dialect_context& ctx) {
    if (url.scheme == "postgres") return make_postgres(url, ctx);
    if (url.scheme == "mysql") return make_mysql(url, ctx);
    return make_sqlite(url, ctx);
}

std::string dialect_dir(const url_parts& url) { return url.scheme; }

}  // namespace

client_impl::client_impl(const url_parts& url, client_options options)
    : options_(std::move(options)),
      log_(options_.logger ? options_.logger : default_logger()),
      sql_(dialect_dir(url), options_.table_prefix) {
    ctx_.redacted_url = redact_url(url.raw);
    ctx_.secrets = url.secrets;
    ctx_.options = options_;
    ctx_.sql = &sql_;
    ctx_.statements = &statements;
    dialect_ = make_dialect(url, ctx_);
}

client_impl::~client_impl() {
    listener_stop_ = true;
    if (listener_.joinable()) {
        if (listener_.get_id() == std::this_thread::get_id()) listener_.detach();
        else listener_.join();
    }
    deadlines_.reset();
    if (watchdog_) stop_watchdog_thread(*watchdog_);
    if (callbacks_) stop_callback_thread(*callbacks_);
}

void client_impl::start_watchdog() {
    callbacks_ = std::make_shared<callback_queue>();
    start_callback_thread(callbacks_);
    // The timer holds the grants weakly and the client not at all: a grant's
    // own reference keeps the client alive while mark_lost runs.
    deadlines_ = std::make_unique<deadline_timer>([](grant& g) { g.client->mark_lost(g); });
    watchdog_ = std::make_shared<watchdog_core>();
    start_watchdog_thread(watchdog_, weak_from_this());
}

// Runs `which` of the grant's callbacks on the callback thread. The closure
// holds the grant, so the callback runs even if the lease is dropped first.
void client_impl::post(grant& g, std::function<void(const std::string&, std::int64_t)> grant::*which,
                       const char* name) {
    post_callback(*callbacks_, [g = g.shared_from_this(), which, name] {
        try {
            ((*g).*which)(g->key, g->token);
        } catch (const std::exception& e) {
            g->client->log().error("{} callback for '{}' threw: {}", name, g->key, e.what());
        } catch (...) {
            g->client->log().error("{} callback for '{}' threw a non-standard exception", name, g->key);
        }
    });
}

void client_impl::watch(const std::shared_ptr<grant>& g) {
    deadlines_->watch(g);
    bool wake = false;
    {
        std::lock_guard lock(watchdog_->mu);
        watchdog_->leases.push_back(g);
        // Wake the thread only if this lease needs it before it would wake anyway.
        const std::int64_t first_event =
            g->auto_renew ? std::min(g->next_renew_ns.load(), g->deadline_ns.load()) : g->deadline_ns.load();
        if (first_event < watchdog_->wake_ns) {
            watchdog_->dirty = true;
            wake = true;
        }
    }
    if (wake) watchdog_->cv.notify_one();
}

std::unique_ptr<session> client_impl::take_session(bool fresh, bool* reused) {
    if (!fresh) {
        std::lock_guard lock(pool_mu_);
        if (!idle_.empty()) {
            auto s = std::move(idle_.back());
            idle_.pop_back();
            if (reused) *reused = true;
            return s;
        }
    }
    if (reused) *reused = false;
    return dialect_->connect();
}

void client_impl::put_back(std::unique_ptr<session> s) {
    std::lock_guard lock(pool_mu_);
    if (idle_.size() < options_.pool_size) idle_.push_back(std::move(s));
}

void client_impl::drop_idle() {
    std::vector<std::unique_ptr<session>> dead;
    {
        std::lock_guard lock(pool_mu_);
        dead.swap(idle_);
    }
}  // closed outside the pool mutex

void client_impl::check_schema() {
    if (schema_checked_.load(std::memory_order_acquire)) return;
    int have = with_session([](session& s) { return s.schema_version(); });
    int need = sql_.latest_version();
    if (have < need)
        throw schema_error("sqlock schema in " + ctx_.redacted_url + " is at version " + std::to_string(have) +
                           " but this library needs " + std::to_string(need) +
                           " (table prefix '" + sql_.prefix() + "'): run client.migrate() "
                           "or apply migrations/" + std::string(dialect_->name()) + "/ by hand");
    schema_checked_.store(true, std::memory_order_release);
}

std::shared_ptr<grant> client_impl::find_reentrant(std::string_view key) {
    std::shared_ptr<grant> g;
    {
        std::lock_guard lock(held_mu_);
        auto it = held_.find(std::make_pair(thread_serial(), std::string(key)));
        if (it == held_.end()) return nullptr;
        g = it->second.lock();
        if (!g) {
            held_.erase(it);
            return nullptr;
        }
    }
    std::lock_guard glock(g->mu);
    if (g->released.load() || !g->reentry_open.load() || g->lost.load() || lease_now_ns() >= g->deadline_ns.load())
        return nullptr;
    ++g->depth;
    return g;
}

void client_impl::end_reentry(grant& g) noexcept {
    if (!g.reentrant || !g.reentry_open.exchange(false)) return;
    std::lock_guard lock(held_mu_);
    auto it = held_.find(std::make_pair(g.thread, g.key));
    if (it != held_.end() && it->second.lock().get() == &g) held_.erase(it);
}

client_impl::attempt client_impl::try_grant(std::string_view key, const lock_options& options,
                                            bool want_remaining, std::int64_t ticket) {
    validate_key(key);
    validate_lock_options(options);
    if (options.mode == mode::select_for_update && !dialect_->supports_row_locks())
        throw config_error(std::string("select_for_update needs row locks, which ") +
                           std::string(dialect_->name()) +
                           " does not have (it locks the whole database file): use conditional_update or "
                           "unique_insert");
    check_schema();
    if (options.reentrant) {
        if (auto g = find_reentrant(key)) return {std::move(g), std::nullopt};
    }

    auto g = std::make_shared<grant>();
    g->client = shared_from_this();
    g->key = std::string(key);
    g->owner = new_owner_id();
    g->mode = options.mode;
    g->lease_ms = options.lease.count();
    g->margin_ms = effective_margin(options).count();
    g->thread = thread_serial();
    g->reentrant = options.reentrant;
    g->auto_renew = options.auto_renew;
    g->interval_ns = ms_to_ns(effective_renew_interval(options).count());
    g->on_lost = options.on_lost;
    g->on_renewed = options.on_renewed;
    attempt out;
    const std::int64_t sent = lease_now_ns();
    // Not fair: every live fair waiter is ahead. Fair without a ticket yet:
    // waiters of the same or higher priority are ahead.
    const std::int64_t priority = options.fair ? options.priority : not_fair;

    if (options.mode == mode::select_for_update) {
        bool reused = false;
        auto pinned = take_session(false, &reused);
        row_lock state;
        try {
            state = pinned->lock_row(key, g->lease_ms, ticket, priority, want_remaining ? &out.remaining_ms : nullptr);
        } catch (const connection_error&) {
            if (!reused) throw;
            drop_idle();
            pinned = take_session(true, &reused);
            state = pinned->lock_row(key, g->lease_ms, ticket, priority, want_remaining ? &out.remaining_ms : nullptr);
        }
        if (state == row_lock::missing) {
            with_session([&](session& s) { s.ensure_row(key); });
            state = pinned->lock_row(key, g->lease_ms, ticket, priority, want_remaining ? &out.remaining_ms : nullptr);
        }
        if (state != row_lock::locked) {
            put_back(std::move(pinned));
            ++contention_misses;
            return out;
        }
        std::optional<std::int64_t> token;
        try {
            token = with_session([&](session& s) {
                auto bumped = s.bump_token(key);
                if (bumped && ticket != no_ticket) s.dequeue(ticket);  // a granted waiter leaves the queue
                return bumped;
            });
        } catch (...) {
            try {
                pinned->end_row_lock();
            } catch (...) {
            }
            throw;
        }
        if (!token) {
            // An earlier holder's fenced transaction still share-locks the
            // key's fence row: the key is not free yet. Contention, as in the
            // lease modes, so that a blocking acquire waits on.
            pinned->end_row_lock();
            put_back(std::move(pinned));
            ++contention_misses;
            return out;
        }
        g->token = *token;
        g->pinned = std::move(pinned);
    } else {
        const std::string holder = holder_description();
        const grant_request request{key,           g->owner,       options.mode, g->lease_ms, holder,
                                    options.note, want_remaining, ticket,       priority};
        grant_result r = with_session([&](session& s) { return s.grant(request); });
        if (!r.token) {
            ++contention_misses;
            out.remaining_ms = r.remaining_ms;
            return out;
        }
        g->token = *r.token;
    }
    // The database's expiry is its clock at the statement + lease (for
    // select_for_update: the server's idle limit after the last statement);
    // that statement ran after `sent`, so this deadline is never later.
    g->confirmed(sent);
    g->hold_until_ns = options.max_hold.count() > 0 ? saturating_add(sent, ms_to_ns(options.max_hold.count()))
                                                      : std::numeric_limits<std::int64_t>::max();
    ++acquisitions;
    if (options.reentrant) {
        std::lock_guard lock(held_mu_);
        held_[std::make_pair(g->thread, g->key)] = g;
    }
    watch(g);
    log_->debug("acquired '{}' token {} mode {} owner {}", g->key, g->token, to_string(g->mode), g->owner);
    out.granted = std::move(g);
    return out;
}

std::shared_ptr<grant> client_impl::acquire(std::string_view key, std::chrono::milliseconds timeout,
                                            const lock_options& options) {
    validate_timeout(timeout);
    // A timeout too long to add to the clock (~292 years and more) waits forever.
    const auto start = std::chrono::steady_clock::now();
    const bool forever =
        timeout >= std::chrono::floor<std::chrono::milliseconds>(std::chrono::steady_clock::time_point::max() - start);
    const auto deadline = forever ? std::chrono::steady_clock::time_point::max() : start + timeout;
    // Fair waiters queue. On PostgreSQL every waiter does, because a release
    // wakes the head of the queue through LISTEN/NOTIFY.
    const bool queues = options.fair || dialect_->supports_notify();
    // Without notifications a queued waiter polls; its backoff stays short so
    // that handoffs to it stay prompt.
    const std::int64_t max_backoff_ms = queues && !dialect_->supports_notify() ? 250 : 1000;
    std::stop_callback on_cancel(options.cancel, [this] { notify_release(); });
    thread_local std::minstd_rand jitter(std::random_device{}());
    std::shared_ptr<waiter> queued;
    std::int64_t backoff_ms = 4;
    try {
        for (;;) {
            std::uint64_t epoch;
            {
                std::lock_guard lock(wake().mu);
                epoch = wake().epoch;
            }
            auto tried = try_grant(key, options, true, queued ? queued->ticket : no_ticket);
            if (tried.granted) {
                queued.reset();  // the grant removed its row
                return std::move(tried.granted);
            }
            auto now = std::chrono::steady_clock::now();
            if (now >= deadline)
                throw timeout_error("timed out after " + std::to_string(timeout.count()) + " ms waiting for lock '" +
                                    std::string(key) + "'");
            if (options.cancel.stop_requested())
                throw cancelled_error("acquire of '" + std::string(key) + "' was cancelled");
            if (queues && (!queued || queued->gone.load())) {
                // Take a ticket (again, if our row expired: others may have
                // passed it) and try at once: the key may have been freed
                // while we queued.
                leave_queue(queued);
                queued = enqueue(key, options);
                continue;
            }
            // Exponential backoff with jitter, but never sleep past the moment
            // the holder's lease runs out: that is when the key can next be free.
            std::int64_t sleep_ms =
                std::uniform_int_distribution<std::int64_t>(backoff_ms / 2, backoff_ms)(jitter);
            if (tried.remaining_ms) sleep_ms = std::min(sleep_ms, *tried.remaining_ms + 1);
            sleep_ms = std::max<std::int64_t>(sleep_ms, 1);
            backoff_ms = std::min(backoff_ms * 2, max_backoff_ms);
            auto wake_at = now + std::chrono::milliseconds(sleep_ms);
            if (wake_at > deadline) wake_at = deadline;
            std::unique_lock lock(wake().mu);
            wake().cv.wait_until(lock, wake_at, [&] {
                return wake().epoch != epoch || options.cancel.stop_requested() || (queued && queued->gone.load());
            });
        }
    } catch (...) {
        leave_queue(queued);
        throw;
    }
}

std::shared_ptr<waiter> client_impl::enqueue(std::string_view key, const lock_options& options) {
    if (dialect_->supports_notify()) std::call_once(listener_once_, [this] { start_listener(); });
    auto w = std::make_shared<waiter>();
    w->lease_ms = options.lease.count();
    w->interval_ns = std::max<std::int64_t>(w->lease_ms / 3, 1) * 1'000'000;
    const std::string owner = new_owner_id();
    const std::string holder = holder_description();
    const waiter_request request{key, owner, options.fair, options.fair ? options.priority : 0, w->lease_ms, channel_,
                                 holder};
    const std::int64_t sent = lease_now_ns();
    w->ticket = with_session([&](session& s) { return s.enqueue(request); });
    w->next_beat_ns = sent + w->interval_ns;
    ++waits;
    bool wake = false;
    {
        std::lock_guard lock(watchdog_->mu);
        watchdog_->waiters.push_back(w);
        if (w->next_beat_ns.load() < watchdog_->wake_ns) {
            watchdog_->dirty = true;
            wake = true;
        }
    }
    if (wake) watchdog_->cv.notify_one();
    return w;
}

void client_impl::leave_queue(std::shared_ptr<waiter>& w) noexcept {
    if (!w) return;
    const std::int64_t ticket = w->ticket;
    w.reset();  // the watchdog holds it weakly: it stops heartbeating now
    try {
        with_session([&](session& s) { s.dequeue(ticket); });
    } catch (const std::exception& e) {
        // The row expires unheartbeated and the sweeper removes it.
        log_->warn("leaving the wait queue failed (the ticket will expire): {}", e.what());
    }
}

void client_impl::start_listener() {
    channel_ = sql_.prefix() + "w_" + new_owner_id().substr(0, 16);
    // LISTEN before the first waiter row names the channel, so that the first
    // release already finds someone listening. If it fails, the thread keeps
    // trying; waiters poll meanwhile.
    std::unique_ptr<notifier> first;
    try {
        first = dialect_->listen(channel_);
    } catch (const std::exception& e) {
        log_->warn("wake-up listener could not connect yet: {}", e.what());
    }
    listener_ = std::thread([this, n = std::move(first)]() mutable { listener_main(std::move(n)); });
}

void client_impl::listener_main(std::unique_ptr<notifier> n) {
    while (!listener_stop_.load()) {
        try {
            if (!n) {
                n = dialect_->listen(channel_);
                notify_release();  // wake-ups may have been missed while it was down
            }
            if (n->wait(std::chrono::milliseconds(250))) {
                ++wakeups;
                notify_release();
            }
        } catch (const std::exception& e) {
            n.reset();
            log_->warn("wake-up listener lost its connection, reconnecting: {}", e.what());
            for (int i = 0; i < 5 && !listener_stop_.load(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
        }
    }
}

client_impl::wake_state& client_impl::wake() {
    static wake_state state;  // never destroyed before the last client
    return state;
}

void client_impl::notify_release() {
    {
        std::lock_guard lock(wake().mu);
        ++wake().epoch;
    }
    wake().cv.notify_all();
}

void client_impl::mark_lost(grant& g) {
    // A released lease is not lost: a release deletes or clears the row,
    // which a racing renewal would otherwise read as a takeover.
    if (!g.released.load()) signal_lost(g);
}

void client_impl::signal_lost(grant& g) {
    if (g.lost.exchange(true)) return;
    ++leases_lost;
    // A fixed lease running out is what its owner asked for; anything else is news.
    log_->log(g.auto_renew ? spdlog::level::warn : spdlog::level::info, "lease on '{}' (token {}) is lost", g.key,
              g.token);
    g.stop.request_stop();
    if (g.on_lost) post(g, &grant::on_lost, "on_lost");
}

// What one round renews: nothing unless something is due now; then, with it,
// everything that would fall due before the next round could come (the
// shortest interval held). So renewals are never late, at most one interval
// early, and leases of equal length end up renewed together, one statement
// per batch. Lowers `next` to the earliest due time left.
template <class T, class Due, class Interval>
static std::vector<std::shared_ptr<T>> pick_due(const std::vector<std::shared_ptr<T>>& items, std::int64_t now,
                                                std::int64_t& next, Due due_of, Interval interval_of) {
    bool any_due = false;
    std::int64_t gap = std::numeric_limits<std::int64_t>::max();
    for (auto& x : items) {
        any_due = any_due || due_of(*x) <= now;
        gap = std::min(gap, interval_of(*x));
    }
    std::vector<std::shared_ptr<T>> out;
    for (auto& x : items) {
        const std::int64_t due = due_of(*x);
        if (any_due && due - now < gap) out.push_back(x);
        else next = std::min(next, due);
    }
    return out;
}

std::int64_t client_impl::background_round(std::vector<std::shared_ptr<grant>>& leases,
                                          std::vector<std::shared_ptr<waiter>>& waiters) {
    const std::int64_t now = lease_now_ns();
    std::int64_t next = now + 1'000'000'000;  // look around at least once a second
    std::vector<std::shared_ptr<grant>> renewable;
    for (auto& g : leases) {
        if (g->lost.load()) continue;
        const std::int64_t deadline = g->deadline_ns.load();
        if (now >= deadline) {
            mark_lost(*g);  // the deadline timer does this too; whoever is first
            continue;
        }
        next = std::min(next, deadline);
        if (g->auto_renew && now < g->hold_until_ns) renewable.push_back(g);
    }
    std::vector<std::shared_ptr<grant>> batch, pings;
    for (auto& g : pick_due(renewable, now, next, [](const grant& x) { return x.next_renew_ns.load(); },
                            [](const grant& x) { return x.interval_ns; }))
        (g->mode == mode::select_for_update ? pings : batch).push_back(g);
    const std::size_t size = std::max<std::size_t>(options_.renew_batch_size, 1);
    for (std::size_t i = 0; i < batch.size(); i += size) {
        std::vector<std::shared_ptr<grant>> chunk(batch.begin() + static_cast<std::ptrdiff_t>(i),
                                                  batch.begin() + static_cast<std::ptrdiff_t>(std::min(i + size, batch.size())));
        renew_batch(chunk);
    }
    for (auto& g : pings) ping_pinned(*g, false);
    for (auto* group : {&batch, &pings})
        for (auto& g : *group)
            if (!g->lost.load()) next = std::min({next, g->next_renew_ns.load(), g->deadline_ns.load()});
    if (!batch.empty() || !pings.empty()) ++watchdog_ticks;

    // Waiter rows are heartbeated the same way, in batches of their own.
    std::vector<std::shared_ptr<waiter>> queued;
    for (auto& w : waiters)
        if (!w->gone.load()) queued.push_back(w);
    auto beats = pick_due(queued, now, next, [](const waiter& x) { return x.next_beat_ns.load(); },
                          [](const waiter& x) { return x.interval_ns; });
    for (std::size_t i = 0; i < beats.size(); i += size) {
        std::vector<std::shared_ptr<waiter>> chunk(beats.begin() + static_cast<std::ptrdiff_t>(i),
                                                   beats.begin() + static_cast<std::ptrdiff_t>(std::min(i + size, beats.size())));
        beat_waiters(chunk);
    }
    for (auto& w : beats)
        if (!w->gone.load()) next = std::min(next, w->next_beat_ns.load());

    // Sweep only once this client has seen a current schema (no noise from a
    // client opened before migrate()).
    if (options_.sweep && schema_checked_.load()) {
        if (next_sweep_ns_ == 0) {
            // First sweep at a random point of the interval, so that a fleet
            // started together does not sweep in lockstep.
            thread_local std::minstd_rand spread(std::random_device{}());
            next_sweep_ns_ = now + std::uniform_int_distribution<std::int64_t>(
                                       0, options_.sweep_interval.count() * 1'000'000)(spread);
        }
        if (now >= next_sweep_ns_) {
            std::int64_t again = options_.sweep_interval.count() * 1'000'000;
            try {
                // A full batch means more may be waiting: continue soon.
                if (sweep_once() >= options_.sweep_batch_size) again = 100'000'000;
            } catch (const std::exception& e) {
                log_->warn("sweep failed: {}", e.what());
            }
            next_sweep_ns_ = lease_now_ns() + again;
        }
        next = std::min(next, next_sweep_ns_);
    }
    return next;
}

std::chrono::milliseconds client_impl::wait_bound(std::int64_t earliest_deadline_ns) const {
    // At least 100 ms: a bound too short to answer in would fail a healthy
    // connection. Zero would mean "the default", so never return it.
    const std::int64_t left_ms = (earliest_deadline_ns - lease_now_ns()) / 1'000'000;
    return std::chrono::milliseconds(std::clamp<std::int64_t>(left_ms, 100, options_.statement_timeout.count()));
}

void client_impl::renew_batch(std::vector<std::shared_ptr<grant>>& chunk) {
    std::vector<renewal> items;
    items.reserve(chunk.size());
    std::int64_t earliest = std::numeric_limits<std::int64_t>::max();
    for (auto& g : chunk) {
        items.push_back({g->key, g->owner, g->lease_ms});
        earliest = std::min(earliest, g->deadline_ns.load());
    }
    const std::int64_t sent = lease_now_ns();
    std::vector<bool> renewed;
    try {
        renewed = with_session([&](session& s) {
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
        renewal_failures += chunk.size();
        log_->warn("renewing {} lease(s) failed, retrying: {}", chunk.size(), e.what());
        for (auto& g : chunk) g->next_renew_ns = sent + std::min<std::int64_t>(g->interval_ns / 4, 500'000'000);
        return;
    }
    for (std::size_t i = 0; i < chunk.size(); ++i) {
        auto& g = *chunk[i];
        if (renewed[i]) renewed_at(g, sent);
        else renew_alone(g);  // lost, or skipped because another transaction had its row locked
    }
}

// A lease the batch did not renew: renew it by itself, without waiting for a
// locked row (the other leases of the round wait for this one). Only a
// renewal that finds the lease gone makes it lost; a locked row is tried
// again shortly, until the deadline.
void client_impl::renew_alone(grant& g) {
    const std::int64_t sent = lease_now_ns();
    renew_result r;
    try {
        r = with_session([&](session& s) { return s.renew(g.key, g.owner, g.lease_ms, false); });
    } catch (const std::exception& e) {
        ++renewal_failures;
        log_->warn("renewing '{}' failed, retrying: {}", g.key, e.what());
        g.next_renew_ns = sent + std::min<std::int64_t>(g.interval_ns / 4, 500'000'000);
        return;
    }
    switch (r) {
        case renew_result::renewed: renewed_at(g, sent); return;
        case renew_result::not_held: mark_lost(g); return;
        case renew_result::row_locked:
            ++renewal_failures;
            log_->warn("renewing '{}': another transaction keeps its row locked; retrying until the deadline", g.key);
            g.next_renew_ns = sent + std::min<std::int64_t>(g.interval_ns / 4, 500'000'000);
            return;
    }
}

// A confirmed renewal sent at `sent`: move the deadline and the next renewal
// on, and tell the observer.
void client_impl::renewed_at(grant& g, std::int64_t sent) {
    if (g.lost.load()) return;  // lost stays lost, whatever a late answer says
    g.confirmed(sent);
    ++renewals;
    if (g.on_renewed) post(g, &grant::on_renewed, "on_renewed");
}

void client_impl::beat_waiters(std::vector<std::shared_ptr<waiter>>& chunk) {
    std::vector<heartbeat> items;
    items.reserve(chunk.size());
    for (auto& w : chunk) items.push_back({w->ticket, w->lease_ms});
    const std::int64_t sent = lease_now_ns();
    std::vector<bool> live;
    try {
        live = with_session([&](session& s) { return s.beat_waiters(items); });
    } catch (const std::exception& e) {
        log_->warn("heartbeating {} waiter(s) failed, retrying: {}", chunk.size(), e.what());
        for (auto& w : chunk) w->next_beat_ns = sent + std::min<std::int64_t>(w->interval_ns / 4, 500'000'000);
        return;
    }
    bool lost_place = false;
    for (std::size_t i = 0; i < chunk.size(); ++i) {
        if (live[i]) {
            chunk[i]->next_beat_ns = sent + chunk[i]->interval_ns;
        } else {
            chunk[i]->gone = true;  // its waiter queues again
            lost_place = true;
        }
    }
    if (lost_place) notify_release();
}

// The pinned connection is borrowed, not used under g.mu: a ping can take as
// long as the network does, and nothing else may wait on the grant's mutex
// for that long (the deadline timer and the watchdog read the grant freely).
void client_impl::ping_pinned(grant& g, bool wait) {
    session* pinned = nullptr;
    {
        std::unique_lock lock(g.mu);
        if (wait) g.pinned_idle.wait(lock, [&] { return !g.pinned_busy; });
        if (g.pinned_busy) {
            // The application's renew() is pinging: it confirms or loses the
            // lease. Look again shortly rather than at once.
            g.next_renew_ns = lease_now_ns() + std::min<std::int64_t>(g.interval_ns / 4, 500'000'000);
            return;
        }
        if (g.released.load() || !g.pinned) return;
        g.pinned_busy = true;
        pinned = g.pinned.get();
    }
    const std::int64_t sent = lease_now_ns();
    bool alive = false;
    try {
        pinned->bound_waits(wait_bound(g.deadline_ns.load()));
        // Another token means an operator broke the lock (force_release):
        // give up the row lock now rather than at release.
        alive = pinned->fence_token(g.key) == g.token;
        pinned->bound_waits(std::chrono::milliseconds::zero());
    } catch (const error&) {
        alive = false;  // the server ended the transaction with the connection
    }
    std::unique_ptr<session> dead;
    {
        std::lock_guard lock(g.mu);
        g.pinned_busy = false;
        if (!alive) dead = std::move(g.pinned);  // never pooled after a loss
    }
    g.pinned_idle.notify_all();
    if (dead) {
        try {
            dead->end_row_lock();
        } catch (const error&) {
            // The connection is dropped below: the row lock ends with it.
        }
        dead.reset();
        mark_lost(g);
        return;
    }
    renewed_at(g, sent);
}

std::size_t client_impl::sweep_once() {
    const std::size_t n = with_session([&](session& s) {
        std::size_t rows = s.sweep(options_.sweep_batch_size) + s.sweep_waiters(options_.sweep_batch_size);
        if (options_.job_retention.count() > 0)
            rows += s.sweep_jobs(options_.job_retention.count(), options_.sweep_batch_size);
        return rows;
    });
    rows_swept += n;
    if (n > 0) log_->debug("swept {} expired row(s)", n);
    return n;
}

void client_impl::release(grant& g) {
    std::unique_ptr<session> pinned;
    {
        std::unique_lock lock(g.mu);
        if (g.released.load()) return;
        if (--g.depth > 0) return;
        g.released = true;
        // A ping in progress has the pinned session: wait for it to come back.
        g.pinned_idle.wait(lock, [&] { return !g.pinned_busy; });
        pinned = std::move(g.pinned);
    }
    if (g.reentrant) {
        std::lock_guard lock(held_mu_);
        auto it = held_.find(std::make_pair(g.thread, g.key));
        if (it != held_.end() && it->second.lock().get() == &g) held_.erase(it);
    }
    if (g.mode == mode::select_for_update) {
        // No connection is left when the lease was found broken (ping_pinned).
        if (pinned) {
            try {
                pinned->end_row_lock();
                // A lost lease's connection died or misbehaved: never pool it.
                if (!g.lost.load()) put_back(std::move(pinned));
            } catch (const error&) {
                // The server ended (or will end) the transaction with the
                // connection, which is dropped here: the row lock is gone either way.
                signal_lost(g);
            }
        }
    } else {
        bool ours = with_session([&](session& s) { return s.release(g.key, g.owner, g.mode); });
        if (!ours) signal_lost(g);  // it had been taken over before this release
    }
    ++releases;
    notify_release();
    log_->debug("released '{}' token {}", g.key, g.token);
}

bool client_impl::renew(grant& g) {
    if (g.lost.load() || g.released.load()) return false;
    if (g.mode == mode::select_for_update) {
        ping_pinned(g, true);
        return !g.lost.load() && !g.released.load();
    }
    const std::int64_t sent = lease_now_ns();
    switch (with_session([&](session& s) { return s.renew(g.key, g.owner, g.lease_ms, true); })) {
        case renew_result::renewed:
            if (g.lost.load()) return false;  // the deadline passed while the renewal was on its way
            g.confirmed(sent);
            ++renewals;
            return true;
        case renew_result::not_held:
            mark_lost(g);
            return false;
        case renew_result::row_locked:
            break;
    }
    throw db_error(std::string(dialect_->name()), "",
                   "renewing '" + g.key + "': another transaction kept the key's row locked past the row lock "
                   "timeout; the lease is unchanged (lost at its deadline unless a renewal gets through)");
}

lock_info client_impl::inspect(std::string_view key) {
    validate_key(key);
    check_schema();
    return with_session([&](session& s) { return s.inspect(key); });
}

std::vector<lock_info> client_impl::locks(std::string_view prefix, std::size_t limit) {
    validate_prefix(prefix);
    if (limit < 1) throw config_error("limit must be at least 1");
    check_schema();
    return with_session([&](session& s) {
        // Candidates include keys whose select_for_update holder has gone
        // since; page through them until `limit` are found held.
        const std::size_t page = std::max<std::size_t>(limit, 100);
        std::vector<lock_info> out;
        std::string after;
        for (;;) {
            const auto keys = s.held_keys(prefix, after, page);
            for (const auto& key : keys) {
                auto info = s.inspect(key);
                if (info.held) out.push_back(std::move(info));
                if (out.size() == limit) return out;
            }
            if (keys.size() < page) return out;
            after = keys.back();
        }
    });
}

std::vector<waiter_info> client_impl::waiters(std::string_view prefix, std::size_t limit) {
    validate_prefix(prefix);
    if (limit < 1) throw config_error("limit must be at least 1");
    check_schema();
    return with_session([&](session& s) { return s.waiters(prefix, limit); });
}

std::int64_t client_impl::force_release(std::string_view key, std::string_view by) {
    validate_key(key);
    check_schema();
    const auto [before, token] = with_session([&](session& s) {
        auto info = s.inspect(key);
        return std::make_pair(info, s.force_release(key));
    });
    if (!token) {
        log_->info("force release of '{}' by {}: the key was never granted", key, by);
        return 0;
    }
    if (before.held)
        log_->warn("force release of '{}' by {}: fenced off token {} (mode {}, holder '{}', owner {}); next token "
                   "is above {}",
                   key, by, before.token, before.mode, before.holder.empty() ? "?" : before.holder,
                   before.owner.empty() ? "?" : before.owner, *token);
    else
        log_->warn("force release of '{}' by {}: it was not held; token {} fenced off", key, by, before.token);
    notify_release();
    return *token;
}

void client_impl::migrate() {
    with_session([](session& s) { s.migrate(); });
    schema_checked_.store(false);
}

int client_impl::schema_version() {
    return with_session([](session& s) { return s.schema_version(); });
}

}  // namespace detail

client::client(std::shared_ptr<detail::client_impl> impl) : impl_(std::move(impl)) {}

client client::open(std::string_view url, client_options options) {
    detail::validate_client_options(options);
    auto parts = detail::parse_url(url);
    auto impl = std::make_shared<detail::client_impl>(parts, std::move(options));
    // Connect now, so that a wrong URL fails here rather than at first use.
    impl->put_back(impl->take_session(true, nullptr));
    impl->start_watchdog();
    return client(std::move(impl));
}

void client::migrate() { impl_->migrate(); }
int client::schema_version() { return impl_->schema_version(); }
int client::required_schema_version() const { return impl_->sql().latest_version(); }

// Leases are made here, in the object returned to the caller (guaranteed copy
// elision): the library never moves a lease, so a move is always the
// application's, and ends the grant's reentrancy.
std::optional<lease> client::try_acquire(std::string_view key, const lock_options& options) {
    auto g = impl_->try_grant(key, options, false).granted;
    if (!g) return std::nullopt;
    return std::optional<lease>(std::in_place, detail::grant_ref{std::move(g)});
}

lease client::acquire(std::string_view key, std::chrono::milliseconds timeout, const lock_options& options) {
    return lease(detail::grant_ref{impl_->acquire(key, timeout, options)});
}

lock_info client::inspect(std::string_view key) { return impl_->inspect(key); }

void client::check_key(std::string_view key) { detail::validate_key(key); }

std::string client::migration_sql() const {
    std::string out;
    for (const auto& m : impl_->sql().migrations()) {
        out += "-- sqlock migration " + std::to_string(m.version) + " (" + m.name + ")\n";
        out += m.text;
        if (!out.ends_with('\n')) out += '\n';
        out += '\n';
    }
    return out;
}

std::vector<lock_info> client::locks(std::string_view prefix, std::size_t limit) {
    return impl_->locks(prefix, limit);
}

std::vector<waiter_info> client::waiters(std::string_view prefix, std::size_t limit) {
    return impl_->waiters(prefix, limit);
}

std::int64_t client::force_release(std::string_view key, std::string_view by) {
    return impl_->force_release(key, by);
}

client_stats client::stats() const {
    client_stats s;
    s.acquisitions = impl_->acquisitions.load();
    s.contention_misses = impl_->contention_misses.load();
    s.releases = impl_->releases.load();
    s.renewals = impl_->renewals.load();
    s.renewal_failures = impl_->renewal_failures.load();
    s.leases_lost = impl_->leases_lost.load();
    s.statements = impl_->statements.load();
    s.rows_swept = impl_->rows_swept.load();
    s.watchdog_ticks = impl_->watchdog_ticks.load();
    s.waits = impl_->waits.load();
    s.wakeups = impl_->wakeups.load();
    return s;
}

std::chrono::sys_time<std::chrono::milliseconds> client::database_time() {
    const auto ms = impl_->with_session([](detail::session& s) { return s.now_ms(); });
    return std::chrono::sys_time<std::chrono::milliseconds>(std::chrono::milliseconds(ms));
}

std::size_t client::sweep() {
    return impl_->sweep_once();
}

std::string_view client::dialect() const { return impl_->dialect().name(); }

}  // namespace sqlock
