// sqlock::client: the facade, the client's construction and teardown, and the
// administration operations (inspect, locks, waiters, force_release, sweep,
// migrate). Acquisition is in acquire.cpp, a lease's operations and the
// watchdog's work in leases.cpp.

#include "core/client_impl.hpp"
#include "core/validate.hpp"
#include "dialects/common/fault.hpp"
#include "dialects/common/sql_library.hpp"
#include "queue/wait_queue.hpp"
#include "queue/wakeups.hpp"
#include "sweeper/sweeper.hpp"
#include "watchdog/callbacks.hpp"
#include "watchdog/deadline_timer.hpp"
#include "watchdog/watchdog.hpp"

#include <sqlock/client.hpp>
#include <sqlock/errors.hpp>

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <utility>

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

const char* to_string(event_kind k) noexcept {
    switch (k) {
        case event_kind::acquired: return "acquired";
        case event_kind::released: return "released";
        case event_kind::renewed: return "renewed";
        case event_kind::renewal_failed: return "renewal_failed";
        case event_kind::lost: return "lost";
        case event_kind::queued: return "queued";
        case event_kind::waited: return "waited";
    }
    return "unknown";
}

const char* to_string(loss_cause c) noexcept {
    switch (c) {
        case loss_cause::none: return "none";
        case loss_cause::not_held: return "not_held";
        case loss_cause::deadline: return "deadline";
        case loss_cause::forced: return "forced";
        case loss_cause::connection_lost: return "connection_lost";
    }
    return "unknown";
}

const char* to_string(wait_outcome o) noexcept {
    switch (o) {
        case wait_outcome::none: return "none";
        case wait_outcome::acquired: return "acquired";
        case wait_outcome::timed_out: return "timed_out";
        case wait_outcome::cancelled: return "cancelled";
        case wait_outcome::failed: return "failed";
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

}  // namespace

client_impl& lease_access::client(const lease& l) { return *of(l).client; }

client_impl::client_impl(const url_parts& url, client_options options)
    : ctx_{url.raw, redact_url(url.raw), url.secrets, std::move(options), &counters_.statements},
      log_(ctx_.options.logger ? ctx_.options.logger : default_logger()),
      dialect_(make_dialect(url.scheme, ctx_)),
      pool_(*dialect_, ctx_.options.pool_size),
      watchdog_pool_(*dialect_, 1) {}

void client_impl::start() {
    // Connect now, so that a wrong URL fails here rather than at first use.
    pool_.put_back(pool_.take(true, nullptr));
    callbacks_ = std::make_unique<callback_queue>();
    if (ctx_.options.on_event)
        events_ = std::make_unique<event_sink>(ctx_.options.on_event, log_, telemetry_.events_dropped);
    // The timer holds the leases weakly and the client not at all: a grant's
    // own reference keeps the client alive while mark_lost runs.
    deadlines_ = std::make_unique<deadline_timer>([](lease_timing& l) {
        auto& g = static_cast<grant&>(l);
        g.client->mark_lost(g, loss_cause::deadline);
    });
    sweeper_ = std::make_unique<sweeper>(ctx_.options, *log_, schema_checked_, counters_.rows_swept);
    watchdog_ = std::make_unique<watchdog>(std::weak_ptr<keeper>(shared_from_this()), ctx_.options.renew_batch_size);
    queue_ = std::make_unique<wait_queue>(*dialect_, pool_, *watchdog_, *log_,
                                          wait_queue::counters{counters_.waits, counters_.wakeups},
                                          sql().prefix() + "w_" + new_owner_id().substr(0, 16));
}

client_impl::~client_impl() {
    // Threads first, in an order in which none of them uses what is gone.
    deadlines_.reset();
    watchdog_.reset();
    queue_.reset();
    callbacks_.reset();
    events_.reset();
}

void client_impl::close_events() {
    if (events_) events_->close();
}

const sql_library& client_impl::sql() const { return dialect_->sql(); }

std::uint64_t client_impl::watchdog_ticks() const { return watchdog_ ? watchdog_->ticks() : 0; }

void client_impl::check_schema() {
    if (schema_checked_.load(std::memory_order_acquire)) return;
    const int have = with_session([](session& s) { return s.schema_version(); });
    const int need = sql().latest_version();
    if (have < need)
        throw schema_error("sqlock schema in " + ctx_.redacted_url + " is at version " + std::to_string(have) +
                           " but this library needs " + std::to_string(need) + " (table prefix '" + sql().prefix() +
                           "'): run client.migrate() or apply migrations/" + std::string(dialect_->name()) +
                           "/ by hand");
    schema_checked_.store(true, std::memory_order_release);
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
    // Never repeated by the pool: a first run whose answer was lost has
    // broken the lease already, and a repeat would break the lease of
    // whoever was granted the key in between, a holder nobody meant to stop.
    const auto [before, token] = pool_.with_session_once([&](session& s) {
        auto info = s.inspect(key);
        auto fenced = s.force_release(key);
        fault(fault_point::force_release_answered);
        return std::make_pair(info, fenced);
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
    wakeups::notify(dialect_->tables(), key);
    return *token;
}

std::size_t client_impl::sweep() { return sweeper_->sweep_once(pool_); }

void client_impl::migrate() {
    with_session([](session& s) { s.migrate(); });
    schema_checked_.store(false);
}

int client_impl::schema_version() {
    return with_session([](session& s) { return s.schema_version(); });
}

}  // namespace detail

client::client(std::shared_ptr<detail::client_impl> impl) : impl_(std::move(impl)) {}

namespace {

// The application's hold on a client. Every copy of the client and every
// lease shares it; background threads hold the client_impl itself. So when
// the application's last handle goes, this closes the listener on the
// application's thread, even if the watchdog, the deadline timer or an
// on_lost callback still holds the client_impl and destroys it later
// elsewhere: a listener capturing the application's objects by reference is
// never called after the last handle's destructor returned.
struct user_hold {
    explicit user_hold(std::shared_ptr<detail::client_impl> i) : impl(std::move(i)) {}
    user_hold(const user_hold&) = delete;
    user_hold& operator=(const user_hold&) = delete;
    ~user_hold() {
        try {
            impl->close_events();
        } catch (...) {
            // A failed join (std::system_error): the thread ends by itself.
        }
    }
    const std::shared_ptr<detail::client_impl> impl;
};

}  // namespace

client client::open(std::string_view url, client_options options) {
    detail::validate_client_options(options);
    auto impl = std::make_shared<detail::client_impl>(detail::parse_url(url), std::move(options));
    impl->start();
    auto hold = std::make_shared<user_hold>(std::move(impl));
    // Aliasing: points at the client_impl, counts the hold.
    return client(std::shared_ptr<detail::client_impl>(hold, hold->impl.get()));
}

void client::migrate() { impl_->migrate(); }
int client::schema_version() { return impl_->schema_version(); }
int client::required_schema_version() const { return impl_->sql().latest_version(); }

// Leases are made here, in the object returned to the caller (guaranteed copy
// elision): the library never moves a lease, so a move is always the
// application's, and ends the grant's reentrancy.
std::optional<lease> client::try_acquire(std::string_view key, const lock_options& options) {
    auto g = impl_->try_acquire(key, options);
    if (!g) return std::nullopt;
    return std::optional<lease>(std::in_place, detail::grant_ref{std::move(g), impl_});
}

lease client::acquire(std::string_view key, std::chrono::milliseconds timeout, const lock_options& options) {
    return lease(detail::grant_ref{impl_->acquire(key, timeout, options), impl_});
}

std::optional<lease> client::try_acquire_shared(std::string_view key, const lock_options& options) {
    auto g = impl_->try_acquire(key, options, {'S', 0});
    if (!g) return std::nullopt;
    return std::optional<lease>(std::in_place, detail::grant_ref{std::move(g), impl_});
}

lease client::acquire_shared(std::string_view key, std::chrono::milliseconds timeout, const lock_options& options) {
    return lease(detail::grant_ref{impl_->acquire(key, timeout, options, {'S', 0}), impl_});
}

std::optional<lease> client::try_acquire_permit(std::string_view name, std::int64_t permits,
                                                const lock_options& options) {
    auto g = impl_->try_acquire(name, options, {'P', permits});
    if (!g) return std::nullopt;
    return std::optional<lease>(std::in_place, detail::grant_ref{std::move(g), impl_});
}

lease client::acquire_permit(std::string_view name, std::int64_t permits, std::chrono::milliseconds timeout,
                             const lock_options& options) {
    return lease(detail::grant_ref{impl_->acquire(name, timeout, options, {'P', permits}), impl_});
}

void client::set_permits(std::string_view name, std::int64_t permits) { impl_->set_permits(name, permits); }

std::vector<holder_info> client::holders(std::string_view prefix, std::size_t limit) {
    return impl_->holders(prefix, limit);
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
    const auto& c = impl_->stats();
    client_stats s;
    s.acquisitions = c.acquisitions.load();
    s.contention_misses = c.contention_misses.load();
    s.releases = c.releases.load();
    s.renewals = c.renewals.load();
    s.renewal_failures = c.renewal_failures.load();
    s.leases_lost = c.leases_lost.load();
    s.statements = c.statements.load();
    s.rows_swept = c.rows_swept.load();
    s.watchdog_ticks = impl_->watchdog_ticks();
    s.waits = c.waits.load();
    s.wakeups = c.wakeups.load();
    return s;
}

std::string client::metrics_text() const { return impl_->metrics_text(); }

std::chrono::sys_time<std::chrono::milliseconds> client::database_time() {
    const auto ms = impl_->with_session([](detail::session& s) { return s.now_ms(); });
    return std::chrono::sys_time<std::chrono::milliseconds>(std::chrono::milliseconds(ms));
}

std::size_t client::sweep() { return impl_->sweep(); }

std::string_view client::dialect() const { return impl_->dialect().name(); }

client_capabilities client::capabilities() const { return impl_->dialect().capabilities(); }

}  // namespace sqlock
