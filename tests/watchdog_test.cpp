// The watchdog: automatic, batched renewal; loss rules and signals; the sweeper.

#include "support/dialect.hpp"
#include "support/doctest_types.hpp"
#include "support/helpers.hpp"

#include <sqlock/sqlock.hpp>

#include <doctest/doctest.h>

#include <atomic>
#include <cmath>
#include <mutex>
#include <stop_token>
#include <thread>
#include <vector>

using namespace std::chrono_literals;
using sqlock::mode;

TEST_SUITE("watchdog") {

TEST_CASE_TEMPLATE("a batch that renews two leases of one key gives each row its own lease's length", Db,
                   ALL_BACKENDS) {
    // One client can renew two leases of one key in one batch: one broken by
    // force_release and not yet told, and the key's next holder. MariaDB's
    // batch looked each row's length up by key, which found the first lease
    // of the key: the holder's row got the broken lease's 10 s where its
    // client counted on 30 s, and another client could be granted the key
    // while the holder still held it.
    Db db;
    const test::migrated_dialect dialect(db);
    auto s = dialect->connect();
    const std::string key = "batch/twice";
    REQUIRE(s->grant({.key = key, .owner = "successor", .mode = sqlock::mode::conditional_update,
                      .lease_ms = 30'000, .holder = "test", .note = "", .want_remaining = false})
                .token);
    const std::vector<sqlock::detail::renewal> batch = {{key, "broken", 10'000}, {key, "successor", 30'000}};
    const auto renewed = s->renew_batch(batch);
    REQUIRE(renewed.size() == 2);
    CHECK_FALSE(renewed[0]);
    CHECK(renewed[1]);
    const auto info = s->inspect(key);
    CHECK(info.owner == "successor");
    CHECK(info.expires_in > 20s);  // 30 s from the renewal; the broken lease's 10 s before
}

TEST_CASE_TEMPLATE("the watchdog keeps a lease alive past its length", Db, ALL_BACKENDS) {
    Db db;
    auto holder = db.open();
    auto other = db.open();
    for (mode m : test::modes_of(db)) {
        CAPTURE(std::string(sqlock::to_string(m)));
        auto l = holder.try_acquire("k", {.mode = m, .lease = 600ms});
        REQUIRE(l);
        std::this_thread::sleep_for(1500ms);  // two and a half leases
        CHECK_FALSE(l->lost());
        CHECK_NOTHROW(l->check());
        CHECK_FALSE(other.try_acquire("k", {.mode = m}));
        CHECK(l->renew());
        l->release();
    }
    CHECK(holder.stats().renewals >= 4);
    CHECK(holder.stats().leases_lost == 0);
}

TEST_CASE_TEMPLATE("a lease is renewed about every third of its length, not more", Db, ALL_BACKENDS) {
    Db db;
    auto c = db.open_quiet();
    auto l = c.try_acquire("k", {.lease = 3s});
    REQUIRE(l);
    std::this_thread::sleep_for(2500ms);  // due at 1 s and 2 s
    const auto renewals = c.stats().renewals;
    CHECK(renewals >= 1);
    CHECK(renewals <= 3);
    CHECK_FALSE(l->lost());
}

TEST_CASE_TEMPLATE("a fixed lease runs out and is reported lost once", Db, ALL_BACKENDS) {
    Db db;
    auto holder = db.open();
    auto other = db.open();
    std::atomic<int> calls{0};
    std::thread::id callback_thread;
    auto l = holder.try_acquire("k", {.lease = 300ms,
                                      .auto_renew = false,
                                      .on_lost = [&](const std::string& key, std::int64_t) {
                                          CHECK(key == "k");
                                          callback_thread = std::this_thread::get_id();
                                          ++calls;
                                      }});
    REQUIRE(l);
    auto stop = l->stop_token();
    CHECK_FALSE(stop.stop_requested());
    REQUIRE(test::eventually([&] { return calls.load() == 1; }));
    CHECK(l->lost());
    CHECK(stop.stop_requested());
    CHECK(callback_thread != std::this_thread::get_id());  // the client's callback thread
    CHECK(other.acquire("k", 5s).token() > l->token());
    std::this_thread::sleep_for(300ms);
    CHECK(calls == 1);
    CHECK(holder.stats().renewals == 0);
}

TEST_CASE_TEMPLATE("the renewal interval is configurable", Db, ALL_BACKENDS) {
    Db db;
    auto c = db.open();
    std::atomic<int> renewed{0};
    auto l = c.try_acquire("k", {.lease = 10s,
                                 .renew_interval = 100ms,
                                 .on_renewed = [&](const std::string&, std::int64_t) { ++renewed; }});
    REQUIRE(l);
    // With the default (a third of 10 s) nothing would renew within a second.
    CHECK(test::eventually([&] { return renewed.load() >= 4; }, 5s));
    CHECK(c.stats().renewals >= 4);
}

TEST_CASE_TEMPLATE("no on_renewed call is under way or to come once release returns", Db, ALL_BACKENDS) {
    Db db;
    auto c = db.open();
    std::atomic<bool> inside{false};
    std::atomic<int> finished{0};
    auto l = c.try_acquire("k", {.lease = 10s,
                                 .renew_interval = 50ms,
                                 .on_renewed = [&](const std::string&, std::int64_t) {
                                     inside = true;
                                     std::this_thread::sleep_for(100ms);  // renewals queue up meanwhile
                                     inside = false;
                                     ++finished;
                                 }});
    REQUIRE(l);
    REQUIRE(test::eventually([&] { return inside.load(); }));
    l->release();  // while a call is under way and more are queued
    CHECK_FALSE(inside.load());
    const int after = finished.load();
    CHECK_FALSE(test::eventually([&] { return finished.load() != after || inside.load(); }, 300ms));
}

TEST_CASE_TEMPLATE("max_hold stops renewal and the lease then runs out", Db, ALL_BACKENDS) {
    Db db;
    auto holder = db.open();
    auto other = db.open();
    std::atomic<bool> lost{false};
    auto l = holder.try_acquire("k", {.lease = 300ms,
                                      .max_hold = 500ms,
                                      .on_lost = [&](const std::string&, std::int64_t) { lost = true; }});
    REQUIRE(l);
    REQUIRE(test::eventually([&] { return lost.load(); }, 5s));
    auto next = other.acquire("k", 5s);
    CHECK(next.token() > l->token());
    CHECK_THROWS_AS(l->check(), sqlock::lease_lost_error);
}

TEST_CASE_TEMPLATE("a lease whose row is taken away is lost at the next renewal", Db, ALL_BACKENDS) {
    Db db;
    auto holder = db.open();
    auto raw = db.raw();
    for (mode m : {mode::unique_insert, mode::conditional_update}) {
        CAPTURE(std::string(sqlock::to_string(m)));
        std::atomic<int> calls{0};
        std::atomic<bool> stopped{false};
        auto l = holder.try_acquire("k", {.mode = m,
                                          .lease = 2s,
                                          .renew_interval = 100ms,
                                          .on_lost = [&](const std::string&, std::int64_t) { ++calls; }});
        REQUIRE(l);
        std::stop_callback on_stop(l->stop_token(), [&] { stopped = true; });
        raw->exec("DELETE FROM " + db.table("locks"));
        REQUIRE(test::eventually([&] { return calls.load() == 1; }, 5s));
        CHECK(stopped);
        CHECK(l->lost());  // long before its 2 s deadline: the renewal matched no row
        CHECK_THROWS_AS(l->check(), sqlock::lease_lost_error);
        CHECK_FALSE(l->renew());
    }
}

TEST_CASE_TEMPLATE("callbacks run outside the client's locks and their exceptions are contained", Db, ALL_BACKENDS) {
    Db db;
    auto c = db.open();
    std::atomic<bool> reentered{false}, unblock{false};
    std::atomic<int> renew_calls{0};
    auto doomed = c.try_acquire("a", {.lease = 200ms,
                                      .auto_renew = false,
                                      .on_lost = [&](const std::string&, std::int64_t) {
                                          // Calling back into the client from the callback must not deadlock.
                                          reentered = c.inspect("a").token > 0 && c.try_acquire("other").has_value();
                                          // A callback that blocks must not hold up other leases' renewals.
                                          test::eventually([&] { return unblock.load(); }, 10s);
                                          throw std::runtime_error("callback failure");
                                      }});
    auto kept = c.try_acquire("b", {.lease = 600ms, .on_renewed = [&](const std::string&, std::int64_t) {
                                        ++renew_calls;
                                        throw std::runtime_error("observer failure");
                                    }});
    REQUIRE(doomed);
    REQUIRE(kept);
    REQUIRE(test::eventually([&] { return reentered.load(); }, 5s));
    const auto renewals = c.stats().renewals;
    std::this_thread::sleep_for(1500ms);  // two and a half of kept's leases, with the callback blocked
    CHECK(c.stats().renewals >= renewals + 3);
    CHECK_FALSE(kept->lost());
    unblock = true;
    CHECK(test::eventually([&] { return renew_calls.load() >= 3; }, 5s));
    CHECK_FALSE(kept->lost());  // the throwing observer did not stop renewals
}

TEST_CASE_TEMPLATE("renewal is batched: one statement per batch per tick", Db, ALL_BACKENDS) {
    Db db;
    for (std::size_t batch : {std::size_t{100}, std::size_t{500}}) {
        CAPTURE(batch);
        auto o = db.options();
        o.sweep = false;
        o.renew_batch_size = batch;
        o.pool_size = 1;
        auto c = sqlock::client::open(db.url(), o);
        std::vector<sqlock::lease> held;
        held.reserve(1000);
        for (int i = 0; i < 1000; ++i) {
            auto l = c.try_acquire("batch/" + std::to_string(i), {.lease = 3s, .reentrant = false});
            REQUIRE(l);
            held.push_back(std::move(*l));
        }
        // The first round may split leases taken over a long acquisition
        // period; after it they renew together. Measure the next rounds.
        const auto first = c.stats().watchdog_ticks;
        REQUIRE(test::eventually([&] { return c.stats().watchdog_ticks >= first + 2; }, 15s));
        const auto before = c.stats();
        REQUIRE(test::eventually([&] { return c.stats().watchdog_ticks >= before.watchdog_ticks + 2; }, 15s));
        const auto after = c.stats();
        const auto ticks = after.watchdog_ticks - before.watchdog_ticks;
        const auto per_tick = static_cast<double>(after.statements - before.statements) / static_cast<double>(ticks);
        const auto renewed_per_tick =
            static_cast<double>(after.renewals - before.renewals) / static_cast<double>(ticks);
        CHECK(per_tick == doctest::Approx(std::ceil(1000.0 / static_cast<double>(batch))));
        CHECK(renewed_per_tick == doctest::Approx(1000.0));
        CHECK(after.leases_lost == 0);
        for (auto& l : held) l.release();
    }
}

TEST_CASE_TEMPLATE("the sweeper deletes expired unique_insert rows and nothing live", Db, ALL_BACKENDS) {
    Db db;
    auto o = db.options();
    o.sweep = false;  // swept by hand below, to count exactly
    auto c = sqlock::client::open(db.url(), o);
    auto raw = db.raw();
    std::vector<sqlock::lease> abandoned;
    for (int i = 0; i < 5; ++i) {
        auto l = c.try_acquire("dead/" + std::to_string(i),
                               {.mode = mode::unique_insert, .lease = 100ms, .reentrant = false, .auto_renew = false});
        REQUIRE(l);
        abandoned.push_back(std::move(*l));  // never released: like a crashed holder
    }
    auto live = c.try_acquire("live", {.mode = mode::unique_insert, .lease = 30s});
    auto kept_row = c.try_acquire("kept", {.mode = mode::conditional_update, .lease = 100ms, .auto_renew = false});
    REQUIRE(live);
    REQUIRE(kept_row);
    std::this_thread::sleep_for(250ms);
    CHECK(c.sweep() == 5);
    CHECK(c.sweep() == 0);
    CHECK(c.stats().rows_swept == 5);
    CHECK(raw->scalar("SELECT COUNT(*) FROM " + db.table("locks")) == 2);  // "live" and "kept" stay
    CHECK(c.inspect("live").owner == live->owner());
    // Tokens go on rising after a sweep: the fence rows are untouched.
    auto again = c.try_acquire("dead/0", {.mode = mode::unique_insert});
    REQUIRE(again);
    CHECK(again->token() > abandoned[0].token());
}

TEST_CASE_TEMPLATE("the background sweeper runs on its own", Db, ALL_BACKENDS) {
    Db db;
    auto o = db.options();
    o.sweep_interval = 100ms;
    auto c = sqlock::client::open(db.url(), o);
    auto l = c.try_acquire("dead", {.mode = mode::unique_insert, .lease = 100ms, .auto_renew = false});
    REQUIRE(l);
    CHECK(test::eventually([&] { return c.stats().rows_swept == 1; }, 10s));
}

}  // TEST_SUITE
